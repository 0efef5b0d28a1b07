import ArgumentParser

/// `bgtaskctl refresh disable [APP]`.
struct RefreshDisableCommand: ClientCommand {
    static let configuration = CommandConfiguration(
        commandName: "disable",
        abstract: "Turn Background App Refresh off for one app, or (without APP) for all apps.",
        discussion: """
            Calls Manager.SetBackgroundRefreshEnabled(APP, false); without APP, the global \
            switch (""), which denies refresh to every app whatever its own switch says. \
            A denied app is not woken for background fetch, and 'bgtaskctl fetch simulate' \
            answers RefreshDisabled for it. Only trusted callers (unsandboxed processes of \
            the daemon's user) may change the switches.

            --json prints {"app_id": APP or "", "enabled": false}.
            """)

    @OptionGroup(title: "Global options")
    var global: GlobalOptions

    @Argument(help: ArgumentHelp("The app's desktop-file id; omit it for the switch of all apps.", valueName: "APP"))
    var app: String?

    func validate() throws { try RefreshCommand.validate(app: app) }

    func run(with client: DaemonClient) throws {
        try RefreshCommand.setEnabled(false, app: app, client: client, json: global.json)
    }
}
