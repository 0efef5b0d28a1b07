import ArgumentParser

/// `bgtaskctl fetch`: the fetch mode's trusted methods.
struct FetchCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "fetch",
        abstract: "Drive background fetch (the fetch plugin's org.bgtaskd.BackgroundTasks1.Fetch interface).",
        subcommands: [FetchSimulateCommand.self]
    )

    // Declared here too so that `bgtaskctl fetch --json simulate APP` works.
    @OptionGroup(title: "Global options")
    var global: GlobalOptions

    /// No verb: usage on standard error and status 64, as `bgtaskctl` alone.
    func run() throws {
        try BgTaskCtl.noVerb(Self.self)
    }
}
