import ArgumentParser
import BgTaskProtocol
import Glibc

/// `bgtaskctl`: look at and drive a running bgtaskd over its D-Bus API.
///
/// Every subcommand is a client of the public API only (docs/DESIGN.md §7): it talks
/// to `org.bgtaskd.BackgroundTasks1` exactly as an app or `busctl` would, so
/// what it shows is what any client can see.
@main
struct BgTaskCtl: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "bgtaskctl",
        abstract: "Inspect and control bgtaskd, the background-execution daemon.",
        discussion: """
            bgtaskctl talks to org.bgtaskd.BackgroundTasks1 on the session bus \
            (or the bus named with --bus) through the daemon's public D-Bus API. \
            Add --json to any subcommand for machine-readable output.

            Exit status: 0 on success; 1 when the daemon is not running, the bus \
            cannot be reached or the daemon answers with an error (printed as \
            'bgtaskctl: <message> (<D-Bus error name>)'); 64 for a usage error; \
            74 when its output cannot be written (a full disk, say). With --json a \
            failure of status 1 is also printed on standard output, as \
            {"error":{"message":…,"name":…,"hint":…}} (name and hint where there are such).
            """,
        version: "bgtaskctl \(BgTaskNames.releaseVersion) (D-Bus API \(BgTaskNames.apiVersion))",
        // New subcommands go here, each in a file of its own conforming to
        // ClientCommand (groups: a ParsableCommand listing them).
        subcommands: [
            StatusCommand.self, TasksCommand.self, AppsCommand.self, FetchCommand.self, RefreshCommand.self,
            PushCommand.self, PushesCommand.self, LocationCommand.self, TransfersCommand.self, SleepCommand.self, WakeCommand.self,
        ]
    )

    // Declared here too so that `bgtaskctl --json tasks` works as well as
    // `bgtaskctl tasks --json`: ArgumentParser hands the values down to the
    // subcommand's own group of the same type.
    @OptionGroup(title: "Global options")
    var global: GlobalOptions

    /// `bgtaskctl help TOPIC` for a topic that names no subcommand is a usage
    /// error: ArgumentParser would print the overview and exit 0, so a
    /// mistyped `bgtaskctl help fecth` looked answered.
    static func main() {
        StandardOutputCheck.atExit(program: "bgtaskctl")
        if let unknown = unknownHelpTopic(in: Array(CommandLine.arguments.dropFirst())) {
            writeToStandardError("Error: no subcommand '\(unknown)' to show help for\nUsage: bgtaskctl help [<subcommand> ...]\n"
                + "  See 'bgtaskctl --help' for the subcommands.\n")
            Glibc.exit(64)
        }
        main(nil)
    }

    /// The first word after a leading `help` that is no subcommand where it stands, if any.
    static func unknownHelpTopic(in arguments: [String]) -> String? {
        guard arguments.first == "help" else { return nil }
        var command: any ParsableCommand.Type = Self.self
        for word in arguments.dropFirst() where !word.hasPrefix("-") {
            guard let next = command.configuration.subcommands.first(where: { $0._commandName == word }) else { return word }
            command = next
        }
        return nil
    }

    /// No subcommand: nothing was asked for. The usage goes to standard error
    /// with the usage-error status, so that a script that forgot its verb fails.
    func run() throws {
        try Self.noVerb(Self.self)
    }

    /// What a command of verbs (`bgtaskctl`, `bgtaskctl fetch` …) does without one.
    static func noVerb(_ command: any ParsableCommand.Type) throws -> Never {
        writeToStandardError(helpMessage(for: command) + "\n")
        throw ExitCode(64)
    }

    /// Writes `text` to standard error as it is (no "Error: " prefix, no newline added).
    static func writeToStandardError(_ text: String) {
        try? OutputFile.write(text, toDescriptor: STDERR_FILENO)
    }
}
