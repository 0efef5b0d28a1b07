import ArgumentParser
import SDBus

/// The options every subcommand takes: which bus, and which output form.
struct GlobalOptions: ParsableArguments {
    @Option(
        name: .long,
        help: ArgumentHelp(
            "Bus the daemon serves on: session (the default), system, or a D-Bus address such as unix:path=/tmp/bus.",
            valueName: "session|system|ADDRESS"))
    var bus: String = "session"

    @Flag(name: .long, help: "Print machine-readable JSON instead of text.")
    var json = false

    /// The bus to connect to.
    var address: Bus.Address { Bus.Address(parsing: bus) }

    func validate() throws {
        if let problem = Bus.Address.problem(with: bus) { throw ValidationError("--bus: \(problem)") }
    }
}
