import ArgumentParser
import BgTaskProtocol
import SDBus

/// `bgtaskctl refresh`: the user's Background App Refresh switches.
struct RefreshCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "refresh",
        abstract: "Show or change Background App Refresh, for all apps or for one.",
        discussion: """
            Background App Refresh is the user's switch for background work, as in \
            iOS's Settings: one switch for all apps and one per app. An app is woken in \
            the background (for a fetch, a silent push or a location event) only while \
            both are on and the system is not saving power. The \
            settings are stored by the daemon and survive restarts.
            """,
        subcommands: [RefreshEnableCommand.self, RefreshDisableCommand.self, RefreshStatusCommand.self]
    )

    // Declared here too so that `bgtaskctl refresh --json status` works.
    @OptionGroup(title: "Global options")
    var global: GlobalOptions

    /// No verb: usage on standard error and status 64, as `bgtaskctl` alone.
    func run() throws {
        try BgTaskCtl.noVerb(Self.self)
    }

    /// What `refresh enable|disable --json` prints.
    struct SwitchReport: Encodable {
        /// "" for the global switch.
        var appID: String
        var enabled: Bool

        private enum CodingKeys: String, CodingKey {
            case appID = "app_id", enabled
        }
    }

    /// Sets one switch (`Manager.SetBackgroundRefreshEnabled`) and says so.
    /// An APP given but empty is refused: `refresh disable "$APP"` with APP
    /// unset must not turn refresh off for every app.
    static func validate(app: String?) throws {
        try EmptyArgument.refuse(app, as: "APP", leaveOut: "change the switch of all apps")
    }

    static func setEnabled(_ enabled: Bool, app: String?, client: DaemonClient, json: Bool) throws {
        let appID = app ?? ""
        do {
            try client.call(ManagerInterface.Method.setBackgroundRefreshEnabled.rawValue) { (call) throws(BusError) in
                try call.append(appID)
                try call.append(enabled)
            }
        } catch var error {
            if error.name == BgTaskError.Code.unknownApplication.rawValue {
                error.hint = "the daemon finds apps by their desktop entries in $XDG_DATA_HOME/applications and $XDG_DATA_DIRS/*/applications"
            }
            throw error
        }
        if json {
            try JSONOutput.print(SwitchReport(appID: appID, enabled: enabled))
            return
        }
        let what = enabled ? "enabled" : "disabled"
        // "" is the global switch: APP left out.
        if !appID.isEmpty {
            print("Background App Refresh \(what) for \(appID).")
        } else {
            print("Background App Refresh \(what) for all apps (the global switch).")
        }
    }
}
