import ArgumentParser

/// `bgtaskctl refresh enable [APP]`.
struct RefreshEnableCommand: ClientCommand {
    static let configuration = CommandConfiguration(
        commandName: "enable",
        abstract: "Turn Background App Refresh on for one app, or (without APP) the switch for all apps.",
        discussion: """
            Calls Manager.SetBackgroundRefreshEnabled(APP, true); without APP, the global \
            switch (""). An app is refreshed only while its own switch and the global one \
            are both on. Only trusted callers (unsandboxed processes of the daemon's user) \
            may change the switches.

            --json prints {"app_id": APP or "", "enabled": true}.
            """)

    @OptionGroup(title: "Global options")
    var global: GlobalOptions

    @Argument(help: ArgumentHelp("The app's desktop-file id; omit it for the switch of all apps.", valueName: "APP"))
    var app: String?

    func validate() throws { try RefreshCommand.validate(app: app) }

    func run(with client: DaemonClient) throws {
        try RefreshCommand.setEnabled(true, app: app, client: client, json: global.json)
    }
}
