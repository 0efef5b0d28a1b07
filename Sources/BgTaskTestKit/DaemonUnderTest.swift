import Foundation

/// A built `bgtaskd` started on a private bus with a state directory of its
/// own, for one test. ``stop()`` sends SIGTERM and returns how it ended, so a
/// test can check the daemon shut down cleanly.
public final class DaemonUnderTest: @unchecked Sendable {
    public let bus: PrivateBus
    public let process: ChildProcess
    public let stateDirectory: String
    private let ownsBus: Bool

    /// Starts the daemon with `--set` overrides and extra arguments, and waits
    /// until it owns its bus name.
    public init(settings: [String] = [], arguments: [String] = [], bus: PrivateBus? = nil, stateDirectory: String? = nil) throws {
        self.ownsBus = bus == nil
        self.bus = try bus ?? PrivateBus()
        let state = stateDirectory ?? FileManager.default.temporaryDirectory
            .appendingPathComponent("bgtaskd-test-\(UUID().uuidString)").path
        self.stateDirectory = state
        var args = ["--bus", self.bus.address, "--state-dir", state, "--log-level", "debug"]
        for setting in settings { args += ["--set", setting] }
        process = try ChildProcess(BinaryLocator.path(of: "bgtaskd"), args + arguments)
        guard process.waitForStandardError(containing: "info: ready", timeout: .seconds(20)) else {
            process.stop()
            throw TestKitError("bgtaskd did not become ready: \(process.standardError)")
        }
    }

    /// Environment that points clients (`busctl --user`, `gdbus --session`, the SDK) at the private bus.
    public var environment: [String: String] { bus.environment }

    /// The daemon's log so far.
    public var log: String { process.standardError }

    /// Stops the daemon with SIGTERM and returns how it ended.
    @discardableResult
    public func stop() -> ChildProcess.Exit {
        process.stop(grace: .seconds(10))
    }

    /// `busctl --user ARGS` against the private bus.
    public func busctl(_ arguments: [String]) throws -> CommandResult {
        try CommandResult.run("/usr/bin/busctl", ["--user"] + arguments, environment: environment)
    }

    /// `busctl --user call` on the Manager interface.
    public func callManager(_ member: String, _ signature: String = "", _ values: [String] = []) throws -> CommandResult {
        var arguments = ["call", "org.bgtaskd.BackgroundTasks1", "/org/bgtaskd/BackgroundTasks1",
                         "org.bgtaskd.BackgroundTasks1.Manager", member]
        if !signature.isEmpty { arguments += [signature] + values }
        return try busctl(arguments)
    }

    /// `gdbus ARGS --session` against the private bus.
    public func gdbus(_ arguments: [String]) throws -> CommandResult {
        try CommandResult.run("/usr/bin/gdbus", arguments, environment: environment)
    }

    /// `bgtaskctl ARGS` against the private bus.
    public func bgtaskctl(_ arguments: [String]) throws -> CommandResult {
        try CommandResult.run(BinaryLocator.path(of: "bgtaskctl"), ["--bus", bus.address] + arguments)
    }

    /// Starts the scripted test app against this daemon.
    public func startTestApp(_ arguments: [String]) throws -> ChildProcess {
        try ChildProcess(BinaryLocator.path(of: "bgtaskd-testapp"), ["--bus", bus.address] + arguments)
    }

    deinit {
        process.stop()
        if ownsBus { bus.stop() }
        try? FileManager.default.removeItem(atPath: stateDirectory)
    }
}
