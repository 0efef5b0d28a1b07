import BgTaskCore
import Foundation

/// Why an app could not be launched for a background event. The launcher
/// never retries; the core decides what happens next.
struct LaunchError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The kind of failure; extensible, so new kinds do not break callers.
    struct Code: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
        var rawValue: String

        /// The desktop entry gave no command.
        static let emptyCommandLine = Code(rawValue: "empty-command-line")
        /// The program was not found or could not be executed (ENOENT, EACCES, ENOEXEC …).
        static let exec = Code(rawValue: "exec")
        /// The process could not be started at all (fork, pipe, pidfd: EAGAIN, EMFILE …).
        static let spawn = Code(rawValue: "spawn")
        /// The app's cgroup could not be made or entered.
        static let cgroup = Code(rawValue: "cgroup")

        var description: String { rawValue }
    }

    var code: Code
    var appID: AppID
    var commandLine: [String]
    /// What was wrong, without the app and command (those are in ``description``).
    var reason: String
    /// The errno behind it, when there is one.
    var errno: Int32?

    /// The daemon ran short of something (file descriptors, memory,
    /// processes), not the app: it says nothing about the app's command, so
    /// launches of the app are not held back for it.
    var isDaemonsShortage: Bool {
        guard let errno else { return false }
        return [EMFILE, ENFILE, ENOMEM, EAGAIN].contains(errno)
    }

    /// "cannot launch org.example.App (`/usr/bin/app --background`): …".
    var description: String {
        let command = commandLine.isEmpty ? "no command" : "`\(LaunchError.quote(commandLine))`"
        return "cannot launch \(appID) (\(command)): \(reason)"
    }

    /// A command line as a shell would need it, for log lines and messages.
    static func quote(_ commandLine: [String]) -> String {
        commandLine.map { argument in
            let plain = !argument.isEmpty && argument.allSatisfy {
                $0.isLetter || $0.isNumber || "-_./=:,+@%".contains($0)
            }
            return plain ? argument : "'" + argument.replacingOccurrences(of: "'", with: "'\\''") + "'"
        }.joined(separator: " ")
    }
}
