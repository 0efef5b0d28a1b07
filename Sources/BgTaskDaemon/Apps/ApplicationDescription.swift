import BgTaskCore
import BgTaskProtocol
import SDBus

/// One app as GetApplications describes it (what `bgtaskctl apps` shows):
/// its desktop entry, its refresh status, what the engine knows of it; the
/// mode plugins add their own keys.
struct ApplicationDescription {
    var id: AppID
    var entry: DesktopEntry?
    var refresh: (status: BackgroundRefreshStatus, reason: String)
    var running: Bool
    var launching: Bool
    /// Its state while connected.
    var state: ApplicationState?
    /// iOS's "suspended": held back while asleep or waiting for its turn, or launched and idle.
    var suspended: Bool
    /// Why its last launch failed, while launches are held back.
    var launchError: String?

    /// Writes the `a{sv}` into `message`; `plugins` adds the modes' keys inside it.
    func write(into message: Message, plugins: (Message) -> Void) throws(BusError) {
        typealias Key = ManagerInterface.ApplicationKey
        var fields: [BusValue.DictionaryEntry] = [
            .init(key: .string(Key.appID.rawValue), value: .variant(.string(id.rawValue))),
            .init(key: .string(Key.name.rawValue), value: .variant(.string(entry?.name ?? ""))),
            .init(key: .string(Key.modes.rawValue), value: .variant(.array(element: "s", (entry?.modes ?? []).map(BusValue.string)))),
            .init(key: .string(Key.refreshStatus.rawValue), value: .variant(.string(refresh.status.rawValue))),
            .init(key: .string(Key.refreshReason.rawValue), value: .variant(.string(refresh.reason))),
            .init(key: .string(Key.running.rawValue), value: .variant(.bool(running))),
            .init(key: .string(Key.launching.rawValue), value: .variant(.bool(launching))),
        ]
        if let state {
            fields.append(.init(key: .string(Key.state.rawValue), value: .variant(.string(state.rawValue))))
        }
        fields.append(.init(key: .string(Key.suspended.rawValue), value: .variant(.bool(suspended))))
        if let problem = entry?.execProblem {
            fields.append(.init(key: .string(Key.execProblem.rawValue), value: .variant(.string(problem))))
        }
        if let launchError {
            fields.append(.init(key: .string(Key.launchError.rawValue), value: .variant(.string(launchError))))
        }
        try message.container("a", "{sv}") { () throws(BusError) in
            for field in fields {
                try message.container("e", "sv") { () throws(BusError) in
                    try message.append(value: field.key)
                    try message.append(value: field.value)
                }
            }
            plugins(message)
        }
    }
}
