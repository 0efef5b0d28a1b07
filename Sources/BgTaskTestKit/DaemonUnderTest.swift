import Foundation

/// A built `bgtaskd` started on a private bus with a state directory of its
/// own, for one test. ``stop()`` sends SIGTERM and returns how it ended, so a
/// test can check the daemon shut down cleanly.
public final class DaemonUnderTest: @unchecked Sendable {
    public let bus: PrivateBus
    public private(set) var process: ChildProcess
    public let stateDirectory: String
    /// A home of the test's own: `data/applications` holds its desktop entries.
    public let home: String
    private let ownsBus: Bool
    /// The test's scratch directory (state and home, unless given), removed at the end.
    private let scratch: String
    private let arguments: [String]
    private let extraEnvironment: [String: String]
    /// A command the daemon runs under (`prlimit --nofile=64 --`), if any.
    private let wrapper: [String]

    /// Starts the daemon with `--set` overrides and extra arguments, and waits
    /// until it owns its bus name. Its XDG directories are the test's own (no
    /// desktop entries or configuration of the machine leak in), and it sees
    /// no system bus unless `environment` gives one (e.g. a MockSystemBus's).
    public init(
        settings: [String] = [], arguments: [String] = [], bus: PrivateBus? = nil, stateDirectory: String? = nil,
        home: String? = nil, desktopEntries: [DesktopEntrySpec] = [], environment: [String: String] = [:],
        wrapper: [String] = []
    ) throws {
        self.ownsBus = bus == nil
        self.bus = try bus ?? PrivateBus()
        let scratch = FileManager.default.temporaryDirectory.appendingPathComponent("bgtaskd-test-\(UUID().uuidString)").path
        self.scratch = scratch
        self.stateDirectory = stateDirectory ?? scratch + "/state"
        self.home = home ?? scratch + "/home"
        try FileManager.default.createDirectory(atPath: self.home + "/data/applications", withIntermediateDirectories: true)
        for entry in desktopEntries {
            try entry.text.write(toFile: self.home + "/data/applications/\(entry.id).desktop", atomically: true, encoding: .utf8)
        }
        var args = ["--bus", self.bus.address, "--state-dir", self.stateDirectory, "--log-level", "debug"]
        for setting in settings { args += ["--set", setting] }
        self.arguments = args + arguments
        self.extraEnvironment = environment
        self.wrapper = wrapper
        process = try Self.start(
            self.arguments, environment: Self.environment(home: self.home).merging(environment) { $1 }, wrapper: wrapper)
    }

    private static func environment(home: String) -> [String: String] {
        [
            "HOME": home, "XDG_DATA_HOME": home + "/data", "XDG_DATA_DIRS": home + "/no-system-data",
            "XDG_CONFIG_HOME": home + "/config", "DBUS_SYSTEM_BUS_ADDRESS": "unix:path=/nonexistent/bgtaskd-test-system-bus",
        ]
    }

    private static func start(_ arguments: [String], environment: [String: String], wrapper: [String]) throws -> ChildProcess {
        let command = wrapper + [BinaryLocator.path(of: "bgtaskd")] + arguments
        let process = try ChildProcess(command[0], Array(command.dropFirst()), environment: environment)
        guard process.waitForStandardError(containing: "info: ready", timeout: .seconds(20)) else {
            process.stop()
            throw TestKitError("bgtaskd did not become ready: \(process.standardError)")
        }
        return process
    }

    /// Kills the daemon with SIGKILL (a crash) and starts it again on the same
    /// bus, state and home, after `meanwhile` (which may change the state it
    /// left); returns how the old one ended.
    @discardableResult
    public func crashAndRestart(meanwhile: () throws -> Void = {}) throws -> ChildProcess.Exit {
        process.send(SIGKILL)
        let exit = process.waitForExit(timeout: .seconds(10)) ?? .signal(SIGKILL)
        try meanwhile()
        process = try Self.start(
            arguments, environment: Self.environment(home: home).merging(extraEnvironment) { $1 }, wrapper: wrapper)
        return exit
    }

    /// Rewrites records a plugin stored, as an older or damaged bgtaskd might
    /// have left them: in each record of `plugin`'s `collection`, `old` is
    /// replaced by `new`, an SQL text expression (`'a' || char(65534)`).
    /// For use while the daemon is down (``crashAndRestart(meanwhile:)``);
    /// returns how many records changed.
    public func rewriteStoredRecords(plugin: String, collection: String, replacing old: String, with new: String) throws -> Int {
        let edit = try CommandResult.run("/usr/bin/env", ["python3", "-c", """
            import sqlite3, sys
            db = sqlite3.connect(sys.argv[1])
            where = "plugin = ? AND collection = ? AND instr(CAST(data AS TEXT), ?) > 0"
            changed = db.execute("UPDATE plugin_record SET data = CAST(replace(CAST(data AS TEXT), ?, " + sys.argv[5] + ") AS BLOB) WHERE " + where,
                                 (sys.argv[4], sys.argv[2], sys.argv[3], sys.argv[4])).rowcount
            db.commit()
            print(changed)
            """, stateDirectory + "/bgtaskd.sqlite3", plugin, collection, old, new])
        guard edit.succeeded, let changed = Int(edit.standardOutput.trimmingCharacters(in: .whitespacesAndNewlines)) else {
            throw TestKitError("cannot rewrite the stored records: \(edit)")
        }
        return changed
    }

    /// The directory the daemon reads desktop entries from.
    public var applicationsDirectory: String { home + "/data/applications" }

    /// Writes a desktop entry while the daemon runs (a call that names the
    /// app finds it at once; entries known from the start belong in `init`).
    public func installDesktopEntry(_ entry: DesktopEntrySpec) throws {
        let path = applicationsDirectory + "/\(entry.id).desktop"
        try entry.text.write(toFile: path + ".tmp", atomically: false, encoding: .utf8)
        // Renamed into place, so the daemon never reads half a file.
        _ = rename(path + ".tmp", path)
    }

    /// Environment that points clients (`busctl --user`, `gdbus --session`, the SDK) at the private bus.
    public var environment: [String: String] { bus.environment }

    /// The daemon's log so far.
    public var log: String { process.standardError }

    /// Waits until the daemon's log holds `text` (its standard error arrives
    /// through a pipe, a moment after what it logs about has happened).
    public func waitForLog(containing text: String, timeout: Duration = .seconds(10)) -> Bool {
        process.waitForStandardError(containing: text, timeout: timeout)
    }

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
        // Only what this object made: a state directory or home given by the test stays.
        try? FileManager.default.removeItem(atPath: scratch)
    }
}
