import ArgumentParser

/// `bgtaskd-bench`: one subcommand per figure, plus the victim process that
/// the expiry benchmark spawns.
///
/// Every subcommand but `scheduler` (in-process, no bus) talks to the daemon
/// over the bus in `$DBUS_SESSION_BUS_ADDRESS` (or `--bus`); `startup` starts
/// and stops the daemon itself. Each ends with one `figure` line per target it
/// checks (see ``Figure``), which bench/run gathers into its table.
struct BenchCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "bgtaskd-bench",
        abstract: "Measures bgtaskd against its performance targets (run in release mode).",
        discussion: "bench/run builds, starts a private bus, the C baseline and the daemon, and runs them all.",
        subcommands: [
            PairCommand.self, HoldCommand.self, ExpiryCommand.self, IdleCommand.self, FetchLatencyCommand.self,
            PushLatencyCommand.self, PushThroughputCommand.self, SchedulerCommand.self, RegionsCommand.self, TrackCommand.self, LocationLatencyCommand.self, StartupCommand.self,
            SleepDrainCommand.self, SleepFreezeCommand.self, SleepReleaseCommand.self, VictimCommand.self, WorkerCommand.self,
            TransferCommand.self,
        ])
}
