import Foundation

/// A `dbus-daemon` of the test's own (a session-type bus), stopped by PID.
public final class PrivateBus: @unchecked Sendable {
    public let address: String
    private let daemon: ChildProcess

    private var configFile: String?

    /// Starts the bus and waits for its address. With `allowOtherUsers`, users
    /// other than the test's may connect too (to test untrusted callers).
    /// With `socket`, it listens at that path (a bus started again at the
    /// same address, as a system bus that restarts). With `serviceDirectory`,
    /// the bus starts the services whose `.service` files are there when
    /// they are called or asked for (D-Bus activation), and only those.
    /// With `maximumRepliesPerConnection`, a connection may wait for at most
    /// that many replies at once (dbus-daemon's `max_replies_per_connection`;
    /// further calls are refused with LimitsExceeded).
    public init(allowOtherUsers: Bool = false, socket: String? = nil, serviceDirectory: String? = nil,
                maximumRepliesPerConnection: Int? = nil) throws {
        var arguments = ["--session", "--nofork", "--print-address=1"]
        if let socket { arguments.append("--address=unix:path=\(socket)") }
        if allowOtherUsers || serviceDirectory != nil || maximumRepliesPerConnection != nil {
            // A configuration of its own instead of the standard session one.
            let directory = FileManager.default.temporaryDirectory.appendingPathComponent("bgtaskd-bus-\(UUID())").path
            try FileManager.default.createDirectory(
                atPath: directory, withIntermediateDirectories: true, attributes: allowOtherUsers ? [.posixPermissions: 0o755] : nil)
            let config = """
                <!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
                 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
                <busconfig>
                  <type>session</type>
                  <listen>\(socket.map { "unix:path=\($0)" } ?? "unix:dir=\(directory)")</listen>
                  \(serviceDirectory.map { "<servicedir>\($0)</servicedir>" } ?? "")
                  \(maximumRepliesPerConnection.map { "<limit name=\"max_replies_per_connection\">\($0)</limit>" } ?? "")
                  <auth>EXTERNAL</auth>
                  <policy context="default">
                    \(allowOtherUsers ? "<allow user=\"*\"/>" : "")
                    <allow send_destination="*" eavesdrop="true"/>
                    <allow eavesdrop="true"/>
                    <allow own="*"/>
                  </policy>
                </busconfig>
                """
            try config.write(toFile: directory + "/bus.conf", atomically: true, encoding: .utf8)
            configFile = directory
            arguments = ["--config-file=\(directory)/bus.conf", "--nofork", "--print-address=1"]
        }
        daemon = try ChildProcess("/usr/bin/dbus-daemon", arguments)
        guard let line = daemon.waitForLine(timeout: .seconds(10), where: { $0.hasPrefix("unix:") }) else {
            throw TestKitError("dbus-daemon did not print its address: \(daemon.standardError)")
        }
        // A bus started again at the same socket has another guid: clients
        // given the printed address (which names the guid) would refuse it.
        address = socket.map { "unix:path=\($0)" } ?? line.trimmingCharacters(in: .whitespaces)
    }

    /// Environment for clients of this bus (`busctl --user`, `gdbus --session`, the SDK's `.session`).
    public var environment: [String: String] { ["DBUS_SESSION_BUS_ADDRESS": address] }

    /// Kills the bus daemon (SIGKILL): its clients lose it as in a crash.
    public func crash() {
        daemon.send(SIGKILL)
        _ = daemon.waitForExit()
    }

    public func stop() {
        daemon.stop()
        if let configFile { try? FileManager.default.removeItem(atPath: configFile) }
    }

    deinit { stop() }
}

/// A failure of the test harness itself.
public struct TestKitError: Error, CustomStringConvertible {
    public var description: String
    public init(_ description: String) { self.description = description }
}
