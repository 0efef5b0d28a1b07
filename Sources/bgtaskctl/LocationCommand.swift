import ArgumentParser

/// `bgtaskctl location`: the location mode's trusted methods.
struct LocationCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "location",
        abstract: "Move the device and look at monitored regions (the location plugin's org.bgtaskd.BackgroundTasks1.Location interface).",
        subcommands: [LocationSimulateCommand.self, LocationRegionsCommand.self]
    )

    // Declared here too so that `bgtaskctl location --json regions` works.
    @OptionGroup(title: "Global options")
    var global: GlobalOptions

    /// No verb: usage on standard error and status 64, as `bgtaskctl` alone.
    func run() throws {
        try BgTaskCtl.noVerb(Self.self)
    }
}
