import ArgumentParser
import BgTaskProtocol
import Glibc
import SDBus

/// Figures: the daemon with all its plugins loaded and many apps registered
/// for background fetch starts quickly and stays small.
///
/// `--apps` desktop entries declaring `fetch` are written into `--data-home`
/// (the daemon is started with it as XDG_DATA_HOME). The daemon is started
/// on `--state-dir` and every app registers as an app would: a short-lived
/// connection per app makes `CheckIn(app)` and `SetMinimumFetchInterval` (a
/// third `minimum`, the rest an hour), so the fetch plugin stores one record
/// per app. That daemon is stopped, and then started `--restarts` times on
/// the same state: each time the instant before `posix_spawn` and the instant
/// `NameOwnerChanged` for the bus name reaches a connection that subscribed
/// before the start are taken on CLOCK_MONOTONIC (the bus sends the signal
/// the moment the name is owned, so nothing is polled). After `--settle`
/// seconds its VmRSS is read, then it is stopped with SIGTERM by its pid.
///
/// A fresh registration is not what a daemon starts with after a few days:
/// the plugin keeps each app's last 64 outcomes. So, with `--history N`, the
/// daemon is started once more and every app gets N fetch wakes
/// (`SimulateFetch`, `PerformFetch` at the app's connection, `CompleteFetch`),
/// and the timed starts are repeated; the figures are those of this second,
/// steady-state phase, and the difference from the first is printed.
///
/// With `--baseline-service`, the C baseline's echo-service is started the
/// same way, interleaved in alternating order, for the floor of the machine
/// and the bus: exec, connect, own a name.
struct StartupCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "startup",
        abstract: "Start-up time to owning the bus name and settled RSS of bgtaskd with many fetch apps registered.",
        discussion: "Arguments after `--` are passed to bgtaskd (for example --log-level warning).")

    @OptionGroup var target: BusOptions

    @Option(help: ArgumentHelp("The bgtaskd executable (its plugins are loaded from beside it unless the daemon arguments say otherwise).", valueName: "PATH"))
    var bgtaskd: String

    @Option(help: ArgumentHelp("The daemon's --state-dir: registered once, reused by every restart.", valueName: "DIR"))
    var stateDir: String

    @Option(help: ArgumentHelp("XDG_DATA_HOME for the daemon; the apps' desktop entries are written there (default: $XDG_DATA_HOME).", valueName: "DIR"))
    var dataHome: String?

    @Option(help: "Apps with a desktop entry declaring fetch, each registered with SetMinimumFetchInterval.")
    var apps = 1000

    @Option(help: "Timed starts of the daemon, in each phase.")
    var restarts = 10

    @Option(help: "Fetch outcomes each app gets before the second phase of starts (the plugin keeps 64; 0: one phase only).")
    var history = 64

    @Option(help: "Seconds between owning the name and reading VmRSS.")
    var settle = 1.0

    @Option(help: ArgumentHelp("The baseline's echo-service, started the same way for comparison.", valueName: "PATH"))
    var baselineService: String?

    @Option(help: ArgumentHelp("File the started daemons' output is appended to (the baseline's goes to /dev/null).", valueName: "FILE"))
    var daemonLog = "/dev/null"

    @Option(help: "Target: the largest acceptable VmRSS after start-up, in MiB.")
    var maxRSSMiB = 64.0

    @Option(help: "Target: the largest acceptable time from exec to owning the bus name, in ms.")
    var maxStartMs = 300.0

    @Argument(parsing: .postTerminator, help: "Arguments for bgtaskd.")
    var daemonArguments: [String] = []

    static let baselineName = "org.bgtaskd.Baseline"

    func validate() throws {
        guard apps >= 0, restarts >= 1, settle >= 0 else { throw ValidationError("need --apps ≥ 0, --restarts ≥ 1 and --settle ≥ 0") }
    }

    /// Owner changes of one name, as the observer saw them.
    final class OwnerWatch {
        var owner: String?
        var changedAt: Int64 = 0
        var changes = 0
    }

    /// One start: time to the name, the service's pid, and its memory once settled.
    struct Start {
        var milliseconds: Double
        var rssMiB: Double = .nan
        var peakMiB: Double = .nan
        var stopMilliseconds: Double = .nan
    }

    /// What every start needs: the observer that sees the names being taken, and how to start each service.
    private struct Harness {
        let observer: ManagerClient
        let daemonWatch = OwnerWatch()
        let baselineWatch = OwnerWatch()
        let daemonArguments: [String]
        let environment: [String: String]
        let baseline: String?
    }

    func run() throws {
        let home = dataHome ?? DesktopEntries.defaultDataHome
        let ids = (0..<apps).map { "org.bgtaskd.Bench.Startup.App\($0)" }
        let writing = MonotonicTime.nanoseconds()
        var written = 0
        for id in ids where try DesktopEntries.write(id: id, modes: ["fetch"], dataHome: home) { written += 1 }
        say("startup: \(apps) desktop entries declaring fetch in \(home)/applications (\(written) written"
            + " in \(format(MonotonicTime.microseconds(since: writing) / 1000, 0)) ms); state \(stateDir)")

        // The observer subscribes before any start, so it sees each name being taken.
        let observer = try target.connect()
        guard try !observer.nameHasOwner(BgTaskNames.busName) else {
            throw ValidationError("\(BgTaskNames.busName) is already owned on this bus: stop that daemon first")
        }
        var baseline = baselineService
        if baseline != nil, try observer.nameHasOwner(Self.baselineName) {
            note("startup: \(Self.baselineName) is owned already; timing bgtaskd without the baseline")
            baseline = nil
        }
        let harness = Harness(
            observer: observer, daemonArguments: ["--bus", target.bus, "--state-dir", stateDir] + daemonArguments,
            environment: ["XDG_DATA_HOME": home], baseline: baseline)
        let daemonMatch = try observer.onNameOwnerChanged(BgTaskNames.busName) { Self.noteOwner($0, in: harness.daemonWatch) }
        let baselineMatch = try observer.onNameOwnerChanged(Self.baselineName) { Self.noteOwner($0, in: harness.baselineWatch) }
        defer {
            daemonMatch.cancel()
            baselineMatch.cancel()
        }

        // --- Registration: a connection per app, as apps do -----------------------
        try withDaemon(harness, "registration") { daemon in
            let registering = MonotonicTime.nanoseconds()
            for (index, id) in ids.enumerated() {
                let app = try target.connect()
                try app.checkIn(id)
                try app.setMinimumFetchInterval(index % 3 == 0 ? 0 : 3600)
            }
            let seconds = MonotonicTime.microseconds(since: registering) / 1e6
            let counts = try observer.applicationCounts()
            say("  \(apps) apps registered in \(format(seconds, 2)) s (\(format(seconds * 1e6 / Double(max(1, apps)), 0)) µs each);"
                + " the daemon lists \(counts.fetchRegistered) with a fetch interval; VmRSS \(format(daemon.residentMiB ?? .nan, 1)) MiB")
            guard counts.fetchRegistered >= apps else {
                throw ValidationError("only \(counts.fetchRegistered) of \(apps) apps are registered for fetch")
            }
        }
        var phase = try timedStarts(harness, label: "registered, no fetch history yet", verify: history == 0)

        // --- Steady state: every app with a full fetch history --------------------
        if history > 0 {
            try withDaemon(harness, "fetch history") { daemon in
                let filling = MonotonicTime.nanoseconds()
                let tool = try target.connect()
                for id in ids {
                    let app = try target.connect()
                    try app.checkIn(id)
                    try app.setState("background")
                    let probe = try FetchProbe(app: app, tool: tool, appID: id)
                    for number in 0..<history { _ = try probe.wake(result: number % 4 == 0 ? "newData" : "noData") }
                }
                let seconds = MonotonicTime.microseconds(since: filling) / 1e6
                say("  \(apps * history) fetch wakes (SimulateFetch, PerformFetch, CompleteFetch) gave every app \(history) outcomes"
                    + " in \(format(seconds, 1)) s; VmRSS \(format(daemon.residentMiB ?? .nan, 1)) MiB")
            }
            let fresh = phase
            phase = try timedStarts(harness, label: "registered, \(history) outcomes each", verify: true)
            say("  with \(history) outcomes per app start-up takes \(format(phase.time.median - fresh.time.median, 1)) ms"
                + " more (median) and VmRSS is \(format(phase.rss.max - fresh.rss.max, 1)) MiB higher (max) than with none")
        }

        let base = phase.baseline.count == 0 ? "" : "; C baseline \(format(phase.baseline.median, 1)) ms"
        let state = history > 0 ? "\(apps) fetch apps × \(history) outcomes" : "\(apps) fetch apps"
        Figure.atMost("startup-p50", "exec → bus name owned, median of \(phase.time.count) starts, \(state), plugins \(phase.plugins)\(base)",
                      value: phase.time.median, limit: maxStartMs, unit: "ms", decimals: 1, machine: phase.machine).report()
        Figure.atMost("startup-max", "exec → bus name owned, slowest of \(phase.time.count) starts",
                      value: phase.time.max, limit: maxStartMs, unit: "ms", decimals: 1, machine: phase.machine).report()
        Figure.atMost("startup-rss", "daemon VmRSS \(format(settle, 1)) s after start, \(state) (max of \(phase.rss.count); VmHWM max \(format(phase.peak.max, 1)))",
                      value: phase.rss.max, limit: maxRSSMiB, unit: "MiB", decimals: 1, machine: phase.machine).report()
    }

    /// Starts the daemon (untimed), runs `body` with its /proc view, stops it.
    private func withDaemon(_ harness: Harness, _ what: String, _ body: (ProcStatus) throws -> Void) throws {
        let daemon = try ServiceProcess(path: bgtaskd, arguments: harness.daemonArguments, environment: harness.environment, log: daemonLog)
        _ = try waitForOwner(harness.daemonWatch, of: daemon, observer: harness.observer, name: BgTaskNames.busName)
        try body(ProcStatus(pid: daemon.pid))
        let stopped = daemon.stop()
        guard stopped.status == 0 else { throw ValidationError("bgtaskd exited with status \(stopped.status) on SIGTERM after the \(what)") }
        try waitForRelease(harness.daemonWatch, observer: harness.observer)
    }

    /// What a series of timed starts measured.
    private struct Phase {
        var time: LatencyStats
        var rss: LatencyStats
        var peak: LatencyStats
        var baseline: LatencyStats
        var plugins: String
        var machine: String
    }

    /// `--restarts` timed starts of the daemon (and of the baseline, interleaved in alternating order).
    /// With `verify`, the last start is checked: every plugin beside bgtaskd loaded, every app registered.
    private func timedStarts(_ harness: Harness, label: String, verify: Bool) throws -> Phase {
        say("  \(restarts) timed starts (\(label)):")
        var starts: [Start] = []
        var baselineStarts: [Start] = []
        var loaded: [(name: String, version: String)] = []
        var listed = (listed: 0, fetchRegistered: 0)
        let load = CPUTimes.now()
        for round in 1...restarts {
            let order = round % 2 == 1 ? ["bgtaskd", "baseline"] : ["baseline", "bgtaskd"]
            for kind in order {
                if kind == "bgtaskd" {
                    let daemon = try ServiceProcess(path: bgtaskd, arguments: harness.daemonArguments, environment: harness.environment, log: daemonLog)
                    var start = Start(milliseconds: try waitForOwner(harness.daemonWatch, of: daemon, observer: harness.observer, name: BgTaskNames.busName))
                    let owner = try harness.observer.ownerPID(of: BgTaskNames.busName)
                    guard owner == daemon.pid else { throw ValidationError("\(BgTaskNames.busName) is owned by pid \(owner), not by \(daemon.pid)") }
                    MonotonicTime.sleep(seconds: settle)
                    let status = ProcStatus(pid: daemon.pid)
                    start.rssMiB = status.residentMiB ?? .nan
                    start.peakMiB = status.peakResidentMiB ?? .nan
                    if round == restarts {
                        // What was started: the plugins, and the registrations read back (after the RSS reading).
                        loaded = try harness.observer.plugins()
                        listed = try harness.observer.applicationCounts()
                    }
                    let stopped = daemon.stop()
                    guard stopped.status == 0 else { throw ValidationError("bgtaskd exited with status \(stopped.status) on SIGTERM") }
                    start.stopMilliseconds = stopped.milliseconds
                    try waitForRelease(harness.daemonWatch, observer: harness.observer)
                    starts.append(start)
                    say("    start \(round): name owned \(format(start.milliseconds, 1)) ms after exec;"
                        + " VmRSS \(format(start.rssMiB, 1)) MiB (VmHWM \(format(start.peakMiB, 1)) MiB) after \(format(settle, 1)) s;"
                        + " SIGTERM → exit \(format(stopped.milliseconds, 1)) ms")
                } else if let baseline = harness.baseline {
                    let service = try ServiceProcess(path: baseline, arguments: [], environment: harness.environment, log: "/dev/null")
                    var start = Start(milliseconds: try waitForOwner(harness.baselineWatch, of: service, observer: harness.observer, name: Self.baselineName))
                    start.rssMiB = ProcStatus(pid: service.pid).residentMiB ?? .nan
                    start.stopMilliseconds = service.stop().milliseconds
                    try waitForRelease(harness.baselineWatch, observer: harness.observer)
                    baselineStarts.append(start)
                }
            }
        }
        let phase = Phase(
            time: LatencyStats(starts.map(\.milliseconds)), rss: LatencyStats(starts.map(\.rssMiB)),
            peak: LatencyStats(starts.map(\.peakMiB)), baseline: LatencyStats(baselineStarts.map(\.milliseconds)),
            plugins: loaded.map(\.name).joined(separator: "+"), machine: CPUTimes.brief(since: load))
        let pluginFiles = Self.pluginFiles(beside: bgtaskd)
        let missing = pluginFiles.filter { file in !loaded.contains { $0.name == file } }
        say("    plugins loaded: \(loaded.map { "\($0.name) \($0.version)" }.joined(separator: ", "))"
            + " (plugin files beside bgtaskd: \(pluginFiles.joined(separator: ", ")));"
            + " the daemon lists \(listed.listed) apps, \(listed.fetchRegistered) with a fetch interval")
        say("    bgtaskd: exec → name owned median \(format(phase.time.median, 1)) ms, min \(format(phase.time.min, 1)),"
            + " max \(format(phase.time.max, 1)) ms; VmRSS median \(format(phase.rss.median, 1)), max \(format(phase.rss.max, 1)) MiB,"
            + " VmHWM max \(format(phase.peak.max, 1)) MiB")
        if !baselineStarts.isEmpty {
            say("    C baseline echo-service: exec → name owned median \(format(phase.baseline.median, 1)) ms,"
                + " max \(format(phase.baseline.max, 1)) ms; VmRSS \(format(LatencyStats(baselineStarts.map(\.rssMiB)).median, 1)) MiB")
        }
        say("    " + (CPUTimes.now()?.summary(since: load) ?? ""))
        if verify {
            guard missing.isEmpty else {
                throw ValidationError("plugins beside bgtaskd that the daemon did not load: \(missing.joined(separator: ", ")) (see its log)")
            }
            guard listed.fetchRegistered >= apps else {
                throw ValidationError("after the restarts only \(listed.fetchRegistered) of \(apps) apps are registered for fetch")
            }
        }
        return phase
    }

    private static func noteOwner(_ message: Message, in watch: OwnerWatch) {
        let at = MonotonicTime.nanoseconds()
        guard (try? message.readString()) != nil, (try? message.readString()) != nil,
              let newOwner = try? message.readString() else { return }
        watch.owner = newOwner.isEmpty ? nil : newOwner
        watch.changedAt = at
        watch.changes += 1
    }

    /// Waits until `name` has an owner; returns ms from `service`'s spawn to the signal's arrival.
    private func waitForOwner(_ watch: OwnerWatch, of service: ServiceProcess, observer: ManagerClient, name: String) throws -> Double {
        // The spawn instant: the caller made `service` just now, so take it from its creation.
        let spawned = service.spawnedAt
        while watch.owner == nil {
            try observer.process()
            if watch.owner != nil { break }
            if let status = service.poll() {
                throw ValidationError("\(name)'s service (pid \(service.pid)) exited with status \(status) during start-up (see --daemon-log)")
            }
            if MonotonicTime.microseconds(since: spawned) > 20e6 {
                throw ValidationError("\(name) was not owned 20 s after the start of pid \(service.pid)")
            }
            var descriptor = observer.pollDescriptor
            _ = Glibc.poll(&descriptor, 1, 100)
        }
        return Double(watch.changedAt - spawned) / 1e6
    }

    /// Waits until the name has no owner any more (the stopped service left the bus).
    private func waitForRelease(_ watch: OwnerWatch, observer: ManagerClient) throws {
        let start = MonotonicTime.nanoseconds()
        while watch.owner != nil {
            try observer.process()
            if watch.owner == nil { break }
            if MonotonicTime.microseconds(since: start) > 10e6 { throw ValidationError("the bus name was not released 10 s after the stop") }
            var descriptor = observer.pollDescriptor
            _ = Glibc.poll(&descriptor, 1, 100)
        }
    }

    /// The mode names of the `libbgtaskd-mode-<name>.so` files in bgtaskd's directory.
    private static func pluginFiles(beside executable: String) -> [String] {
        let directory = executable.contains("/") ? String(executable[..<executable.lastIndex(of: "/")!]) : "."
        guard let handle = opendir(directory) else { return [] }
        defer { closedir(handle) }
        var names: [String] = []
        while let entry = readdir(handle) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(cString: raw.bindMemory(to: CChar.self).baseAddress!)
            }
            let prefix = "libbgtaskd-mode-", suffix = ".so"
            if name.hasPrefix(prefix) && name.hasSuffix(suffix) && name.count > prefix.count + suffix.count {
                names.append(String(name.dropFirst(prefix.count).dropLast(suffix.count)))
            }
        }
        return names.sorted()
    }
}
