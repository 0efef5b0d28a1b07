import Foundation

/// The outcome of a command run to completion.
public struct CommandResult: Sendable, CustomStringConvertible {
    public var exit: ChildProcess.Exit
    public var standardOutput: String
    public var standardError: String

    public var succeeded: Bool { exit == .status(0) }

    /// Runs a command with extra environment and waits for it (up to `timeout`).
    public static func run(
        _ executable: String, _ arguments: [String], environment: [String: String] = [:], timeout: Duration = .seconds(30)
    ) throws -> CommandResult {
        let child = try ChildProcess(executable, arguments, environment: environment)
        guard let exit = child.waitForExit(timeout: timeout) else {
            child.stop()
            throw TestKitError("\(executable) \(arguments) did not finish within \(timeout)")
        }
        return CommandResult(exit: exit, standardOutput: child.lines.joined(separator: "\n"), standardError: child.standardError)
    }

    public var description: String { "\(exit); stdout: \(standardOutput); stderr: \(standardError)" }
}
