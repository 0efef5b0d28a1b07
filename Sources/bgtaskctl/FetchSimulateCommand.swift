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
            launched, that is after it checked in, or after 5 s if it is still starting. A \
            launch that fails (a command that does not exist, an app that exits without \
            checking in) is reported with the reason and exit status 1. Follow the fetch itself with \
            'bgtaskctl apps' or the daemon's log.

            --json prints {"app_id": APP, "simulated": true}.
            """)

    @OptionGroup(title: "Global options")
    var global: GlobalOptions

    @Argument(help: ArgumentHelp("The app's desktop-file id, such as org.example.News.", valueName: "APP"))
    var app: String

    struct Report: Encodable {
        var appID: String
        var simulated = true

        private enum CodingKeys: String, CodingKey {
            case appID = "app_id", simulated
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
        if global.json {
            try JSONOutput.print(Report(appID: app))
        } else {
            print("Simulated a background fetch for \(app): it has its PerformFetch.")
        }
    }

    /// Adds what to do about the errors a user can fix.
    static func explained(_ error: ClientError, app: String) -> ClientError {
        var error = error
        switch error.name {
        case BgTaskError.Code.refreshDisabled.rawValue:
            error.hint = "'bgtaskctl refresh status' and 'bgtaskctl apps' show the switches and the power state; " +
                "'bgtaskctl refresh enable \(app)' turns the app's switch back on, 'bgtaskctl refresh enable' the one for all apps"
        default:
            error.hint = ClientError.modeHint(for: error.name, mode: .fetch)
        }
        return error
    }
}
