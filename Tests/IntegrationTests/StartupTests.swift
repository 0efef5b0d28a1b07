import BgTaskTestKit
import Foundation
import Testing

/// Start-up, configuration errors and shutdown of the real binary.
@Suite struct StartupTests {
    private func runDaemon(_ arguments: [String]) throws -> CommandResult {
        try CommandResult.run(BinaryLocator.path(of: "bgtaskd"), arguments, timeout: .seconds(20))
    }

    @Test func badConfigFileNamesFileLineAndKey() throws {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("bgtaskd-\(UUID().uuidString).conf")
        try "# comment\n[Tasks]\nBudgetSec=30\nWarningSec=soon\n".write(to: file, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(at: file) }
        let result = try runDaemon(["--bus", "unix:path=/nonexistent", "--config", file.path])
        #expect(result.exit == .status(78), "\(result)")
        #expect(result.standardError.contains("\(file.path):4: Tasks.WarningSec: 'soon' is not a number of seconds"), "\(result)")
    }

    @Test func unknownKeyStopsStartup() throws {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("bgtaskd-\(UUID().uuidString).conf")
        try "[Tasks]\nBudgetSecs=30\n".write(to: file, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(at: file) }
        let result = try runDaemon(["--config", file.path])
        #expect(result.exit == .status(78))
        #expect(result.standardError.contains("\(file.path):2: Tasks.BudgetSecs: unknown key"), "\(result)")
    }

    /// Of several --config files only the last was read: a bad one before
    /// it was never seen (found by an outside test). They are read in order;
    /// a directory says it is one.
    @Test func everyConfigFileIsReadInOrder() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("bgtaskd-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let bad = directory.appendingPathComponent("bad.conf").path, good = directory.appendingPathComponent("good.conf").path
        try "[Tasks]\nBudgetSecs=30\n".write(toFile: bad, atomically: true, encoding: .utf8)
        try "[Tasks]\nBudgetSec=30\n".write(toFile: good, atomically: true, encoding: .utf8)
        let result = try runDaemon(["--bus", "unix:path=/nonexistent", "--config", bad, "--config", good])
        #expect(result.exit == .status(78), "\(result)")
        #expect(result.standardError.contains("\(bad):2: Tasks.BudgetSecs: unknown key"), "\(result)")
        let folder = try runDaemon(["--bus", "unix:path=/nonexistent", "--config", directory.path])
        #expect(folder.exit == .status(78), "\(folder)")
        #expect(folder.standardError.contains("\(directory.path): is a directory, not a file"), "\(folder)")
    }

    /// A state directory that is a file said "File exists".
    @Test func aStateDirectoryThatIsAFileSaysSo() throws {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("bgtaskd-\(UUID().uuidString)").path
        try "not a directory\n".write(toFile: file, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(atPath: file) }
        let result = try runDaemon(["--bus", "unix:path=/nonexistent", "--state-dir", file])
        #expect(result.exit == .status(73), "\(result)")
        #expect(result.standardError.contains("cannot use the state directory \(file): it is a file, not a directory"), "\(result)")
    }

    /// A socket that takes connections and never answers them (a bus that
    /// hangs): bgtaskd waited 90 s, then said "Transport endpoint is not
    /// connected" (found by an outside test). It gives up after 25 s and says why.
    @Test func aBusThatNeverAnswersIsGivenUpOnAndNamed() throws {
        let (directory, address, listener) = try Self.silentBus()
        defer { close(listener); try? FileManager.default.removeItem(atPath: directory) }
        let started = ContinuousClock.now
        let result = try CommandResult.run(BinaryLocator.path(of: "bgtaskd"), ["--bus", address, "--state-dir", directory + "/state"],
                                           timeout: .seconds(60))
        #expect(result.exit == .status(69), "\(result)")
        #expect(result.standardError.contains("connecting to the bus at \(address): the bus took the connection but did not answer its handshake within 25 s"), "\(result)")
        #expect(ContinuousClock.now - started < .seconds(45))
    }

    /// A listening unix socket nobody accepts from, in a fresh directory:
    /// the directory, its address, and the socket (the caller closes it).
    static func silentBus() throws -> (directory: String, address: String, socket: Int32) {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("bgtaskd-silent-\(UUID().uuidString.prefix(8))").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let path = directory + "/bus"
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            for (index, byte) in path.utf8.enumerated() { raw[index] = byte }
        }
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard fd >= 0, bound == 0, listen(fd, 8) == 0 else { throw POSIXError(.EADDRNOTAVAIL) }
        return (directory, "unix:path=" + path, fd)
    }

    @Test func badOverrideIsNamed() throws {
        let result = try runDaemon(["--set", "Tasks.MaxPerConnection=0"])
        #expect(result.exit == .status(78))
        #expect(result.standardError.contains("--set 'Tasks.MaxPerConnection=0': Tasks.MaxPerConnection: must be at least 1"), "\(result)")
    }

    @Test func missingConfigFileIsAnError() throws {
        let result = try runDaemon(["--config", "/nonexistent/bgtaskd.conf"])
        #expect(result.exit == .status(78))
        #expect(result.standardError.contains("/nonexistent/bgtaskd.conf: no such file"), "\(result)")
    }

    @Test func noBusIsAClearError() throws {
        let result = try runDaemon(["--bus", "unix:path=/nonexistent/bus", "--state-dir", NSTemporaryDirectory() + "bgt-\(UUID())"])
        #expect(result.exit == .status(69), "\(result)")
        #expect(result.standardError.contains("/nonexistent/bus"), "\(result)")
    }

    /// Without a session bus the daemon said only "No medium found".
    @Test func noSessionBusSaysWhereItLooked() throws {
        let state = NSTemporaryDirectory() + "bgt-\(UUID())"
        defer { try? FileManager.default.removeItem(atPath: state) }
        let result = try CommandResult.run("/usr/bin/env", ["-u", "DBUS_SESSION_BUS_ADDRESS", "XDG_RUNTIME_DIR=/nonexistent-run",
                                                           BinaryLocator.path(of: "bgtaskd"), "--state-dir", state], timeout: .seconds(20))
        #expect(result.exit == .status(69), "\(result)")
        #expect(result.standardError.contains("there is no bus at /nonexistent-run/bus"), "\(result)")
    }

    /// A bad BGTASKD_LOG_LEVEL was reported as a command-line mistake, naming
    /// neither the variable nor the levels there are.
    @Test func aBadLogLevelInTheEnvironmentIsNamed() throws {
        let result = try CommandResult.run(BinaryLocator.path(of: "bgtaskd"), ["--bus", "unix:path=/nonexistent"],
                                           environment: ["BGTASKD_LOG_LEVEL": "verbose"], timeout: .seconds(20))
        #expect(result.exit == .status(64), "\(result)")
        #expect(result.standardError.contains("'verbose' (from BGTASKD_LOG_LEVEL): one of trace, debug"), "\(result)")
    }

    /// `--help` gave --log-level two defaults, "$BGTASKD_LOG_LEVEL, else
    /// info" and the variable's value of the moment (found by an outside test).
    @Test func theLogLevelsHelpNamesOneDefault() throws {
        let help = try CommandResult.run(BinaryLocator.path(of: "bgtaskd"), ["--help"],
                                         environment: ["BGTASKD_LOG_LEVEL": "debug"], timeout: .seconds(20))
        let option = help.standardOutput.components(separatedBy: "--log-level <LEVEL>").last ?? ""
        let text = option.split(separator: "\n").prefix(3).joined(separator: " ")
        #expect(text.components(separatedBy: "(default:").count == 2, "\(text)")
        #expect(!text.contains("(default: debug)"), "\(text)")
    }

    /// The state directory given through a link (or relative) named the
    /// launched apps' cgroups differently from its plain path: a restart
    /// spelling it the other way did not take those apps back. It is used
    /// by its one real path.
    @Test func theStateDirectoryIsUsedByItsRealPath() throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("bgtaskd-real-\(UUID())").path
        try FileManager.default.createDirectory(atPath: root + "/real", withIntermediateDirectories: true)
        try FileManager.default.createSymbolicLink(atPath: root + "/link", withDestinationPath: root + "/real")
        defer { try? FileManager.default.removeItem(atPath: root) }
        let daemon = try DaemonUnderTest(stateDirectory: root + "/link/./state")
        #expect(daemon.waitForLog(containing: "state-dir=\(root)/real/state "), "\(daemon.log)")
        #expect(daemon.stop() == .status(0))
    }

    /// SIGHUP (the terminal that started it closing) killed the daemon
    /// outright: no log line, and apps it had frozen stayed frozen.
    @Test func aHangupStopsTheDaemonCleanly() throws {
        let daemon = try DaemonUnderTest()
        daemon.process.send(SIGHUP)
        #expect(daemon.process.waitForExit() == .status(0), "\(daemon.log)")
        #expect(daemon.log.contains("stopping on signal \(SIGHUP) (hangup)"), "\(daemon.log)")
    }

    @Test func secondDaemonOnTheSameBusRefusesToStart() throws {
        let first = try DaemonUnderTest()
        let second = try runDaemon(["--bus", first.bus.address, "--state-dir", NSTemporaryDirectory() + "bgt-\(UUID())"])
        #expect(second.exit == .status(69))
        #expect(second.standardError.contains("already owned"), "\(second)")
        #expect(first.stop() == .status(0))
    }

    /// A daemon whose bus goes away stops (69) instead of running on for
    /// nobody with its state directory locked: a daemon started when the bus
    /// is back takes over.
    @Test func aDaemonThatLosesItsBusStopsAndLetsTheNextOneStart() throws {
        let bus = try PrivateBus()
        let state = NSTemporaryDirectory() + "bgt-\(UUID())"
        let daemon = try DaemonUnderTest(bus: bus, stateDirectory: state)
        bus.stop()
        #expect(daemon.process.waitForExit(timeout: .seconds(10)) == .status(69), "\(daemon.log)")
        #expect(daemon.log.contains("lost the bus"), "\(daemon.log)")
        let next = try DaemonUnderTest(stateDirectory: state)
        #expect(next.stop() == .status(0))
    }

    @Test func sigtermAndSigintStopCleanly() throws {
        let daemon = try DaemonUnderTest()
        #expect(daemon.stop() == .status(0))
        #expect(daemon.waitForLog(containing: "stopped"))
        let again = try DaemonUnderTest()
        again.process.send(SIGINT)
        #expect(again.process.waitForExit(timeout: .seconds(10)) == .status(0))
    }

    /// `--bus ''` was tried as an address ("connecting to : Connection
    /// refused", 69), and so was `--bus garbage`; `--state-dir ''` as a
    /// directory named "". `--config ''` said "bad configuration: : no such
    /// file"; `--plugin-dir ''` and `--plugin-dir :` loaded the default
    /// directories' plugins.
    @Test func emptyValuesAreUsageErrors() throws {
        let empty = [["--bus", ""], ["--bus", "garbage"], ["--state-dir", ""], ["--bus-introspect", ""], ["--config", ""],
                     ["--plugin-dir", ""], ["--plugin-dir", ":"]]
        for arguments in empty {
            let result = try runDaemon(arguments)
            #expect(result.exit == .status(64) && result.standardError.contains(arguments[0]), "\(arguments): \(result)")
        }
    }

    @Test func helpDocumentsEveryConfigKey() throws {
        let result = try runDaemon(["--help"])
        #expect(result.succeeded)
        for key in ["Tasks.BudgetSec", "Tasks.KillGraceSec", "Fetch.MinimumIntervalSec", "Scheduler.ChunkSec", "--bus-introspect"] {
            #expect(result.standardOutput.contains(key), "\(key) missing from --help")
        }
    }
}

/// Regression: a change batched for PropertiesChanged when SIGTERM arrived was
/// lost (the bus was already closed when the batch was flushed).
@Suite struct ShutdownTests {
    @Test func pendingPropertiesChangedGoesOutBeforeExit() throws {
        let daemon = try DaemonUnderTest()
        let app = try daemon.startTestApp(["--tasks", "5", "--hold", "60"])
        // The last of five Begins in a row: its change is still batched (50 ms window).
        #expect(app.waitForLine(where: { $0.contains("\"begun\"") && app.lines.filter { $0.contains("\"begun\"") }.count == 5 }) != nil,
                "\(app.lines) \(app.standardError)")
        daemon.process.send(SIGTERM)
        #expect(daemon.process.waitForExit(timeout: .seconds(10)) == .status(0))
        #expect(!daemon.log.contains("cannot emit PropertiesChanged"), "\(daemon.log)")
        app.stop()
    }
}
