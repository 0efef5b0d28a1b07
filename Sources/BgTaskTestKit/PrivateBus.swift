import Foundation

/// A `dbus-daemon` of the test's own (a session-type bus), stopped by PID.
public final class PrivateBus: @unchecked Sendable {
    public let address: String
    private let daemon: ChildProcess

    /// Starts the bus and waits for its address.
    public init() throws {
        daemon = try ChildProcess("/usr/bin/dbus-daemon", ["--session", "--nofork", "--print-address=1"])
        guard let line = daemon.waitForLine(timeout: .seconds(10), where: { $0.hasPrefix("unix:") }) else {
            throw TestKitError("dbus-daemon did not print its address: \(daemon.standardError)")
        }
        address = line.trimmingCharacters(in: .whitespaces)
    }

    /// Environment for clients of this bus (`busctl --user`, `gdbus --session`, the SDK's `.session`).
    public var environment: [String: String] { ["DBUS_SESSION_BUS_ADDRESS": address] }

    public func stop() {
        daemon.stop()
    }

    deinit { daemon.stop() }
}

/// A failure of the test harness itself.
public struct TestKitError: Error, CustomStringConvertible {
    public var description: String
    public init(_ description: String) { self.description = description }
}
