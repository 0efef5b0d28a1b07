import BgTaskPluginKit

// A third-party mode plugin, written with the plugin ABI's header and
// BgTaskPluginKit only. It exports one method on the daemon's object,
//
//     org.example.Hello1.Greet(s name) -> (s greeting)
//
// and owns one configuration key, `Hello.Repeat` ([Hello] Repeat=N in
// bgtaskd.conf, or --set Hello.Repeat=N), which the daemon parses, checks
// (1 to 10) and lists in `bgtaskd --help` before the plugin starts. Build it
// with `swift build --product HelloMode`, copy the library as
// libbgtaskd-mode-hello.so into a directory only you can write, and start
// bgtaskd with --plugin-dir naming that directory (README, "Writing a mode").

/// The `hello` mode: greets its callers, as often as configured.
final class HelloMode: ModePlugin {
    static let name = "hello"
    static let version = "1.0.0"

    /// How many times Greet says hello.
    static let repeatKey = ConfigKey.integer("Hello.Repeat", default: 1, minimum: 1, maximum: 10, "times Greet says hello")
    static let configKeys = [repeatKey]
    /// Answered when the name is empty.
    static let noName = ModeError.Code(rawValue: "org.example.Hello1.Error.NoName")
    static let errorNames = [noName]

    private let host: PluginHost
    private let times: Int

    init(host: PluginHost) throws {
        self.host = host
        times = host.integer(of: Self.repeatKey)
    }

    func start() throws {
        try host.export(PluginInterface(name: "org.example.Hello1", members: [
            .method("Greet", in: [("name", "s")], out: [("greeting", "s")]),
        ]))
        host.log(.info, "hello mode ready: Greet says hello \(times) times")
    }

    func handle(_ call: PluginCall) throws {
        guard call.member == "Greet" else { throw ModeError.failed("unknown method \(call.member)") }
        let name = try call.arguments.readString()
        guard !name.isEmpty else { throw ModeError(Self.noName, "say who is to be greeted") }
        let greeting = Array(repeating: "hello", count: times).joined(separator: " ") + ", \(name)"
        try call.reply { reply throws(ModeError) in try reply.append(greeting) }
    }

    func handle(_ event: PluginEvent) {}
}
