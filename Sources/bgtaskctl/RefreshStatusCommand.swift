import BgTaskProtocol
import ArgumentParser

/// `bgtaskctl refresh status`: the global switch and the power state.
struct RefreshStatusCommand: ClientCommand {
    static let configuration = CommandConfiguration(
        commandName: "status",
        abstract: "Show whether Background App Refresh is available (the switch for all apps and the power state).",
        discussion: """
            Calls Manager.GetBackgroundRefreshStatus. bgtaskctl's connection is no app, \
            so the answer is that of the global switch and the power state: available, \
            denied (switched off for all apps) or restricted (power saver, or on battery \
            below 20 %). 'bgtaskctl apps' shows each app's own status.

            --json prints {"status": "available"|"denied"|"restricted"}.
            """)

    @OptionGroup(title: "Global options")
    var global: GlobalOptions

    struct Report: Encodable {
        var status: String
    }

    func run(with client: DaemonClient) throws {
        let uniqueName = try client.daemonUniqueName()
        let reply = try client.call(ManagerInterface.Method.getBackgroundRefreshStatus.rawValue, destination: uniqueName)
        let status: String
        do { status = try reply.readString() } catch { throw ClientError(error) }
        if global.json {
            try JSONOutput.print(Report(status: status))
            return
        }
        let meaning = switch BackgroundRefreshStatus(rawValue: status) {
        case .available: "apps may be woken for background fetch"
        case .denied: "switched off for all apps; 'bgtaskctl refresh enable' turns it on"
        case .restricted: "held back while the system saves power (power saver, or a low battery)"
        case nil: "unknown to this bgtaskctl"
        }
        print("Background App Refresh: \(LogText.escaped(status)) (\(meaning))")
    }
}
