import BgTaskProtocol
import Foundation
import SDBus

/// Why a subcommand failed, worded for the person at the terminal.
struct ClientError: Error, CustomStringConvertible {
    /// What went wrong.
    var message: String
    /// The D-Bus error name behind it, if the bus or the daemon answered with one.
    var name: String?
    /// A further line suggesting what to do, if there is something to suggest.
    var hint: String?

    init(_ message: String, name: String? = nil, hint: String? = nil) {
        self.message = message
        self.name = name
        self.hint = hint
    }

    /// An error the bus or the daemon answered with.
    init(_ error: BusError) {
        // Some services end their messages with a newline; the line is ours to end.
        self.init(error.message.trimmingCharacters(in: .whitespacesAndNewlines), name: error.name)
    }

    /// Nobody owns the daemon's bus name on `bus`.
    static func notRunning(on bus: Bus.Address, activatable: Bool = false) -> ClientError {
        ClientError(
            "bgtaskd is not running on \(bus.spelledOut) (\(BgTaskNames.busName) has no owner)",
            hint: activatable
                ? "the name is D-Bus activatable: any method call to it starts the daemon (bgtaskctl status never does)"
                : "start it: bgtaskd (from a build: scripts/run-daemon), or systemctl --user start bgtaskd where it is installed")
    }

    /// The hint for the errors any call of a mode's method may get: the app
    /// is unknown, does not declare the mode, or the mode's plugin is not
    /// loaded. Nil for any other error.
    static func modeHint(for name: String?, mode: BgTaskMode) -> String? {
        switch name {
        case BgTaskError.Code.modeNotDeclared.rawValue:
            "add \(mode.rawValue) to X-BgTaskd-Modes= in the app's desktop entry"
        case BgTaskError.Code.unknownApplication.rawValue:
            "the daemon finds apps by their desktop entries in $XDG_DATA_HOME/applications and $XDG_DATA_DIRS/*/applications"
        case "org.freedesktop.DBus.Error.UnknownInterface", "org.freedesktop.DBus.Error.UnknownMethod",
             "org.freedesktop.DBus.Error.UnknownObject":
            "the daemon runs without its \(mode.rawValue) plugin (bgtaskctl status lists the plugins it loaded)"
        default:
            nil
        }
    }

    /// `<message> (<error name>)`.
    var description: String {
        name.map { "\(message) (\($0))" } ?? message
    }

    /// Writes the error, and the hint if any, to standard error; with `json`
    /// also `{"error":{"message":…,"name":…,"hint":…}}` to standard output
    /// (`name` and `hint` only when there are such).
    func report(json: Bool = false) {
        // The text may be another program's (an error from the bus): never the terminal's control sequences.
        var text = "bgtaskctl: \(LogText.escaped(description))\n"
        if let hint { text += "bgtaskctl: \(LogText.escaped(hint))\n" }
        BgTaskCtl.writeToStandardError(text)
        // JSON escapes control characters itself; the document carries the text as it came.
        if json { try? JSONOutput.print(Document(error: self)) }
    }

    /// The `--json` form of an error.
    private struct Document: Encodable {
        var error: ClientError
    }
}

extension ClientError: Encodable {
    private enum CodingKeys: String, CodingKey { case message, name, hint }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(message, forKey: .message)
        try container.encodeIfPresent(name, forKey: .name)
        try container.encodeIfPresent(hint, forKey: .hint)
    }
}
