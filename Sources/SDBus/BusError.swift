import CBgTaskShim
import CSystemd
import Glibc

/// A D-Bus error: a name such as `org.freedesktop.DBus.Error.InvalidArgs` and
/// a message for people.
public struct BusError: Error, Equatable, Sendable, CustomStringConvertible {
    public var name: String
    public var message: String

    public init(name: String, message: String) {
        self.name = name
        self.message = message
    }

    /// `org.freedesktop.DBus.Error.InvalidArgs`.
    public static func invalidArgs(_ message: String) -> BusError {
        BusError(name: "org.freedesktop.DBus.Error.InvalidArgs", message: message)
    }

    /// `org.freedesktop.DBus.Error.Failed`.
    public static func failed(_ message: String) -> BusError {
        BusError(name: "org.freedesktop.DBus.Error.Failed", message: message)
    }

    /// An error from a negative errno that an sd-bus or sd-event call returned.
    public static func errno(_ result: Int32, _ what: String) -> BusError {
        BusError(name: "System.Error.\(errnoName(-result))", message: "\(what): \(String(cString: strerror(-result)))")
    }

    /// Copies an sd-bus error (and leaves it to the caller to free).
    init(_ error: sd_bus_error, fallback result: Int32, _ what: String) {
        if let name = error.name {
            self.init(name: String(cString: name), message: error.message.map { String(cString: $0) } ?? what)
        } else {
            self = .errno(result, what)
        }
    }

    /// Writes this error into sd-bus's error out-parameter; returns what a handler returns.
    func set(into error: UnsafeMutablePointer<sd_bus_error>?) -> Int32 {
        bgt_bus_error_set(error, name, message)
    }

    public var description: String { "\(name): \(message)" }

    /// `ECONNRESET`, `EPIPE` …: the symbolic name glibc knows for an errno.
    private static func errnoName(_ code: Int32) -> String {
        bgt_errno_name(code).map { String(cString: $0) } ?? "E\(code)"
    }
}

/// Throws a ``BusError`` when an sd-bus call returned a negative errno.
@discardableResult
@inline(__always)
func check(_ result: Int32, _ what: @autoclosure () -> String) throws(BusError) -> Int32 {
    if result < 0 { throw BusError.errno(result, what()) }
    return result
}
