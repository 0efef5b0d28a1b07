/// An error a plugin answers a call with: a D-Bus error name and a message.
public struct ModeError: Error, Equatable, CustomStringConvertible {
    public var name: String
    public var message: String

    public init(name: String, message: String) {
        self.name = name
        self.message = message
    }

    /// `org.freedesktop.DBus.Error.InvalidArgs`.
    public static func invalidArgs(_ message: String) -> ModeError {
        ModeError(name: "org.freedesktop.DBus.Error.InvalidArgs", message: message)
    }

    /// `org.freedesktop.DBus.Error.Failed`.
    public static func failed(_ message: String) -> ModeError {
        ModeError(name: "org.freedesktop.DBus.Error.Failed", message: message)
    }

    /// One of bgtaskd's own errors (`NoSuchToken`, `ModeNotDeclared` …).
    public static func bgtaskd(_ code: String, _ message: String) -> ModeError {
        ModeError(name: "org.bgtaskd.BackgroundTasks1.Error." + code, message: message)
    }

    public var description: String { "\(name): \(message)" }
}
