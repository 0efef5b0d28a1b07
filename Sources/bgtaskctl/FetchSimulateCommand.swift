import ArgumentParser
import BgTaskProtocol
import SDBus

/// `bgtaskctl fetch simulate APP`: wake one app for a fetch now.
struct FetchSimulateCommand: ClientCommand {
    static let configuration = CommandConfiguration(
        commandName: "simulate",
        abstract: "Wake an app for a background fetch now, whatever its schedule.",
        discussion: """
            Calls Fetch.SimulateFetch, as Xcode's "Simulate Background Fetch": a running \
            app that checked in gets PerformFetch at once; an app that is not running is \
            launched in the background (BGTASKD_LAUNCH_REASON=fetch) and gets it after its \
            CheckIn. The app must declare the fetch mode in its desktop entry \
            (X-BgTaskd-Modes=fetch;) and its Background App Refresh must be available. \
            Only trusted callers (unsandboxed processes of the daemon's user) may do this. \
            The command returns once the app has its PerformFetch; when the app had to be \
            launched, that is after it checked in, or after 5 s if it is still starting (then \
            it says so: the app gets PerformFetch once it checks in). While the machine \
            sleeps the fetch waits for the wake, and while the backlog after a wake drains \
            in turns (Scheduler.MaxConcurrentWakes) an app whose turn has not come waits \
            for it; it says that too. A \
            launch that fails (a command that does not exist, an app that exits without \
            checking in) is reported with the reason and exit status 1. Follow the fetch itself with \
            'bgtaskctl apps' or the daemon's log.

            --json prints {"app_id": APP, "simulated": true, "waits_for": null, "wake", "turn" or "check-in"}.
            """)

    @OptionGroup(title: "Global options")
    var global: GlobalOptions

    @Argument(help: ArgumentHelp("The app's desktop-file id, such as org.example.News.", valueName: "APP"))
    var app: String

    struct Report: Encodable {
        var appID: String
        var simulated = true
        /// What the PerformFetch still waits for: nil (the app has it), "wake", "turn" or "check-in".
        var waitsFor: String?

        private enum CodingKeys: String, CodingKey {
            case appID = "app_id", simulated, waitsFor = "waits_for"
        }

        func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encode(appID, forKey: .appID)
            try container.encode(simulated, forKey: .simulated)
            try container.encode(waitsFor, forKey: .waitsFor)  // null, not left out
        }
    }

    func run(with client: DaemonClient) throws {
        do {
            // A launch may take up to the wake's budget (Fetch.WakeBudgetSec, 30 s by default).
            try client.call(FetchInterface.Method.simulateFetch.rawValue, interface: BgTaskNames.fetch, timeout: 120_000_000) { (call) throws(BusError) in
                try call.append(app)
            }
        } catch {
            throw Self.explained(error, app: app)
        }
        // The daemon answers alike when the fetch went out and when it waits: say which.
        let waitsFor = Self.waitsFor(app, client: client)
        if global.json {
            try JSONOutput.print(Report(appID: app, waitsFor: waitsFor))
            return
        }
        switch waitsFor {
        case "wake": print("Simulated a background fetch for \(app): the machine sleeps; it gets its PerformFetch after the wake.")
        case "turn": print("Simulated a background fetch for \(app): the backlog after a wake drains in turns; it gets its PerformFetch at its turn.")
        case "check-in": print("Simulated a background fetch for \(app): it was launched and is still starting; it gets its PerformFetch once it checks in.")
        default: print("Simulated a background fetch for \(app): it has its PerformFetch.")
        }
    }

    /// What the fetch just simulated still waits for: "wake" while the machine
    /// sleeps, "turn" while the app waits for its turn in the backlog after a
    /// wake (not running, or frozen), "check-in" while the app launched for it
    /// has not checked in; nil when it went out.
    static func waitsFor(_ app: String, client: DaemonClient) -> String? {
        if case .bool(true)? = try? client.property("Sleeping") { return "wake" }
        guard let reply = try? client.call(ManagerInterface.Method.getApplications.rawValue),
              let apps = try? ApplicationInfo.list(from: reply),
              let info = apps.first(where: { $0.appID == app }) else { return nil }
        // Launched and still starting, not held back: that is the check-in (a launch frozen in the queue waits for its turn).
        if info.launching && !info.running && !info.suspended { return "check-in" }
        if case .array(_, let backlog)? = try? client.property("Backlog"),
           backlog.contains(where: { $0.unwrapped == .string(app) }), !info.running || info.suspended {
            return "turn"
        }
        return nil
    }

    /// Adds what to do about the errors a user can fix.
    static func explained(_ error: ClientError, app: String) -> ClientError {
        var error = error
        switch error.name {
        case BgTaskError.Code.refreshDisabled.rawValue where error.message.contains("restricted"):
            // The power state, not a switch: low battery or power saver.
            error.hint = "refresh is restricted by the power state (on battery below 20 %, or power-saver mode); " +
                "'bgtaskctl refresh status' shows it, and it lifts with the charger or the power profile"
        case BgTaskError.Code.refreshDisabled.rawValue:
            error.hint = "'bgtaskctl refresh status' and 'bgtaskctl apps' show the switches and the power state; " +
                "'bgtaskctl refresh enable \(app)' turns the app's switch back on, 'bgtaskctl refresh enable' the one for all apps"
        default:
            error.hint = ClientError.modeHint(for: error.name, mode: .fetch) ?? error.hint
        }
        return error
    }
}
