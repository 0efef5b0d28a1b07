import ArgumentParser
import BgTaskProtocol

/// `bgtaskd-sim`: replays traces through bgtaskd's fetch planner in virtual
/// time (docs/DESIGN.md §8), makes synthetic traces, and prints the scheduling figures the README quotes.
@main
struct BgTaskdSim: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "bgtaskd-sim",
        abstract: "Simulate bgtaskd's background-fetch scheduling over a trace, in virtual time.",
        discussion: """
            With no subcommand, `run` simulates a trace: bgtaskd-sim --trace FILE [--policy adaptive|naive|oracle] \
            [--floor SECONDS] [--json].

            \(RunCommand.traceFormat)
            """,
        version: "bgtaskd-sim \(BgTaskNames.releaseVersion)",
        subcommands: [RunCommand.self, GenerateCommand.self, FiguresCommand.self, CompareCommand.self, EvaluateCommand.self],
        defaultSubcommand: RunCommand.self
    )

    /// A trace or figures that could not all be written fail the run (74).
    static func main() {
        StandardOutputCheck.atExit(program: "bgtaskd-sim")
        main(nil)
    }
}
