import BgTaskProtocol
import Foundation
import SDBus

/// The bus and the daemon under fuzzing, both started and stopped by this
/// process by pid: a `dbus-daemon --session` of its own and a `bgtaskd` on
/// it with a state directory, plugins, desktop entries and XDG directories
/// from the ``Workspace``, and no system bus.
final class Harness {
    /// Where the programs are and what else the daemon gets.
    struct Settings {
        var bgtaskd: String
        var pluginDirectory: String
        var dbusDaemon: String
        /// Extra `--set` overrides for the daemon.
        var daemonSettings: [String]
        var readyTimeout: Double = 20
    }

    let settings: Settings
    let workspace: Workspace
    let address: String
    private let bus: ServiceProcess
    /// The daemon now running (or last run), its state directory and log.
    private(set) var daemon: ServiceProcess?
    private(set) var stateDirectory: String
    private(set) var daemonLog: String = ""
    /// How many times a daemon was started.
    private(set) var starts = 0

    /// The fuzzer's own connections play the apps, and the daemon terminates
    /// an app that overstays its budget or misses a wake by signalling the
    /// process behind the connection, which would be this one. Budgets far
    /// beyond any run keep the daemon from killing its own fuzzer.
    static let safetySettings = [
        "Tasks.BudgetSec=86400", "Fetch.WakeBudgetSec=86400", "RemoteNotifications.WakeBudgetSec=86400",
        "Location.WakeBudgetSec=86400", "Transfers.WakeBudgetSec=86400",
    ]

    init(settings: Settings) throws(HarnessError) {
        self.settings = settings
        workspace = try Workspace()
        stateDirectory = workspace.newStateDirectory()
        let busLog = workspace.newLog("dbus-daemon")
        bus = try ServiceProcess(
            path: settings.dbusDaemon, arguments: ["--session", "--nofork", "--print-address=1"], log: busLog)
        let deadline = Monotonic.seconds() + 10
        var found: String?
        while found == nil && Monotonic.seconds() < deadline && bus.isRunning {
            found = Self.read(busLog).split(separator: "\n").first { $0.hasPrefix("unix:") }.map(String.init)
            if found == nil { Monotonic.sleep(0.01) }
        }
        guard let found else {
            bus.killNow()
            workspace.remove()
            throw HarnessError("dbus-daemon did not print its address: \(Self.read(busLog))")
        }
        address = found.trimmingCharacters(in: .whitespaces)
        InterruptCleanup.busPID.store(bus.pid, ordering: .relaxed)
    }

    /// The environment of the daemon: the workspace's XDG directories, this
    /// bus as the session bus (for the apps it launches), no system bus, and
    /// nothing that would make it talk to the systemd this process runs under.
    private var daemonEnvironment: [String: String] {
        [
            "HOME": workspace.home, "XDG_DATA_HOME": workspace.dataHome, "XDG_DATA_DIRS": workspace.home + "/no-system-data",
            "XDG_CONFIG_HOME": workspace.home + "/config", "XDG_STATE_HOME": workspace.home + "/state",
            "DBUS_SESSION_BUS_ADDRESS": address, "DBUS_SYSTEM_BUS_ADDRESS": "unix:path=/nonexistent/bgtaskd-fuzz-system-bus",
        ]
    }

    /// Starts a daemon on `stateDirectory` (a fresh one when nil) and waits
    /// until it is ready: its log says `info: ready` and it owns the bus name.
    /// A daemon that exits or does not get ready in time is an error whose
    /// text carries the log's tail.
    @discardableResult
    func startDaemon(stateDirectory: String? = nil) throws(HarnessError) -> ServiceProcess {
        if let daemon, daemon.isRunning { daemon.stop() }
        self.stateDirectory = stateDirectory ?? workspace.newStateDirectory()
        daemonLog = workspace.newLog("bgtaskd")
        starts += 1
        let arguments = [
            "--bus", address, "--state-dir", self.stateDirectory, "--plugin-dir", settings.pluginDirectory,
            "--log-level", "debug",
        ] + (Self.safetySettings + settings.daemonSettings).flatMap { ["--set", $0] }
        let process = try ServiceProcess(
            path: settings.bgtaskd, arguments: arguments, environment: daemonEnvironment,
            removing: ["JOURNAL_STREAM", "NOTIFY_SOCKET", "BGTASKD_LOG_LEVEL", "LISTEN_FDS", "LISTEN_PID"], log: daemonLog)
        daemon = process
        InterruptCleanup.daemonPID.store(process.pid, ordering: .relaxed)
        let deadline = Monotonic.seconds() + settings.readyTimeout
        while !Self.read(daemonLog).contains("info: ready") {
            if let exit = process.poll() {
                throw HarnessError("bgtaskd \(exit) before it was ready:\n\(logTail(20).joined(separator: "\n"))")
            }
            if Monotonic.seconds() >= deadline {
                process.killNow()
                throw HarnessError("bgtaskd did not log 'info: ready' within \(settings.readyTimeout) s:\n\(logTail(20).joined(separator: "\n"))")
            }
            Monotonic.sleep(0.01)
        }
        let owner = nameOwnerPID()
        guard owner == process.pid else {
            throw HarnessError("bgtaskd (pid \(process.pid)) is ready but \(BgTaskNames.busName) belongs to \(owner.map { "pid \($0)" } ?? "nobody")")
        }
        return process
    }

    /// The pid of the connection that owns the daemon's bus name, asked of the bus.
    func nameOwnerPID() -> Int32? {
        guard let connection = try? Bus.open(.address(address), description: "bgtaskd-fuzz-owner"),
              let call = try? connection.newMethodCall(
                  destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus",
                  interface: "org.freedesktop.DBus", member: "GetConnectionUnixProcessID"),
              (try? call.append(BgTaskNames.busName)) != nil,
              let reply = try? connection.call(call, timeout: 5_000_000),
              let pid = try? reply.readUInt32() else { return nil }
        return Int32(bitPattern: pid)
    }

    /// How the daemon ended, if it has.
    var daemonExit: ServiceProcess.Exit? { daemon?.poll() }

    /// Stops the daemon with SIGTERM (SIGKILL after the grace); returns how it ended.
    @discardableResult
    func stopDaemon(grace: Double = 10) -> (exit: ServiceProcess.Exit, killed: Bool)? {
        guard let daemon else { return nil }
        if let exit = daemon.poll() { return (exit, false) }
        return daemon.stop(grace: grace)
    }

    /// The last `count` lines of the current daemon's log.
    func logTail(_ count: Int) -> [String] {
        Self.read(daemonLog).split(separator: "\n").suffix(count).map(String.init)
    }

    /// The part of the current daemon's log that tells why it crashed: from
    /// a little before Swift's "Fatal error" or the backtracer's "Program
    /// crashed", else its last lines.
    func crashExcerpt(_ count: Int = 30) -> [String] {
        let lines = Self.read(daemonLog).split(separator: "\n").map(String.init)
        guard let index = lines.firstIndex(where: { $0.contains("Fatal error") || $0.contains("Program crashed") }) else {
            return Array(lines.suffix(count))
        }
        return Array(lines[max(0, index - 4)..<min(lines.count, index + count)])
    }

    /// Stops everything this harness started and removes its files (unless `keep`).
    func shutdown(keep: Bool) {
        daemon?.stop(grace: 5)
        bus.stop(grace: 5)
        if !keep { workspace.remove() }
    }

    /// A whole file as text ("" when it cannot be read).
    static func read(_ path: String) -> String {
        guard let data = FileManager.default.contents(atPath: path) else { return "" }
        return String(decoding: data, as: UTF8.self)
    }
}
