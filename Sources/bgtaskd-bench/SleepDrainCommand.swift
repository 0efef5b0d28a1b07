import ArgumentParser
import Glibc

/// The backlog after a wake: `--apps` background apps with a task open, each
/// with `--work` seconds of work to do (started by a signal sent while they
/// are frozen, so all of it is left at the wake), are put to sleep (SimulateSleep) and woken
/// (SimulateWake). From the apps' own records of when they ran: the most apps
/// running at the same moment (the daemon's target: at most
/// Scheduler.MaxConcurrentWakes), how long until all had done their work, and
/// the delay from the wake to each app's first chunk. Run once against a
/// daemon with the default MaxConcurrentWakes and once with it above
/// `--apps` (thaw everything at once: the baseline).
struct SleepDrainCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "sleep-drain",
        abstract: "Apps running at once, drain time and first-chunk delay after a wake with a backlog (needs root, cgroup v2).")

    @OptionGroup var target: BusOptions

    @Option(help: "Background apps with work left.")
    var apps = 50

    @Option(help: "Seconds of work each app has left.")
    var work = 0.5

    @Option(help: "The daemon's Scheduler.MaxConcurrentWakes: the most apps that may run at once (the target); 0: no target (the baseline).")
    var maxConcurrent = 2

    @Option(help: "Names the run in the figures (e.g. chunked, thaw-all).")
    var label = "chunked"

    func validate() throws {
        guard apps >= 1, apps <= 1000, work > 0, work <= 60, maxConcurrent >= 0 else {
            throw ValidationError("--apps 1…1000, --work 0…60 s, --max-concurrent ≥ 0")
        }
    }

    func run() throws {
        if let why = AppScope.unavailable {
            Figure.info("sleep-drain-\(label)", "backlog drain after a wake: not measured", value: "skipped: \(why)").report()
            return
        }
        let client = try target.connect()
        say("sleep-drain (\(label)): \(apps) background apps with \(format(work, 2)) s of work each")
        let workers = try ScopedWorkers(count: apps, name: "Drain", bus: target.bus, arguments: ["--work", "\(work)", "--wait-for-go"])
        defer { workers.stop() }
        _ = try workers.waitForLines("ready", timeout: 60)

        try client.simulate(sleeping: true)
        let frozen = workers.scopes.filter(\.isFrozen).count
        say("  asleep: \(frozen) of \(apps) apps frozen")
        // Frozen, they take the go only when thawed: each has all its work left at the wake.
        for child in workers.children { kill(child.pid, SIGUSR1) }
        MonotonicTime.sleep(seconds: 0.2)
        let load = CPUTimes.now()
        let woke = MonotonicTime.nanoseconds()
        try client.simulate(sleeping: false)
        // Generous: the whole backlog one app at a time, plus start-up.
        let lines = try workers.waitForLines("ran ", timeout: Double(apps) * work * 3 + 60)
        let machine = CPUTimes.brief(since: load)

        // Each app's runs after the wake (a run before it ended with the sleep).
        let runs = lines.map { line in Self.parseRuns(line).filter { $0.start >= woke } }
        let most = Self.mostAtOnce(runs)
        let drained = Double((runs.compactMap { $0.last?.end }.max() ?? woke) - woke) / 1e6
        let first = LatencyStats(runs.compactMap { $0.first.map { Double($0.start - woke) / 1000 } })
        let turns = runs.map(\.count)
        say("  most apps running at once: \(most); all done \(format(drained, 0)) ms after the wake")
        say("  wake → an app's first chunk: \(first.summaryInMilliseconds)")
        say("  chunks per app: min \(turns.min() ?? 0), max \(turns.max() ?? 0)")
        guard frozen == apps else { throw ValidationError("only \(frozen) of \(apps) apps were frozen by SimulateSleep") }
        guard runs.allSatisfy({ !$0.isEmpty }) else { throw ValidationError("some apps did not run after the wake") }

        if maxConcurrent > 0 {
            Figure.atMost("sleep-drain-max", "most of \(apps) backlogged apps running at once after a wake (their own logs)",
                          value: Double(most), limit: Double(maxConcurrent), unit: "apps", decimals: 0, machine: machine).report()
        } else {
            Figure.info("sleep-\(label)-max", "same backlog, \(label): most apps running at once", value: "\(most) apps",
                        machine: machine).report()
        }
        Figure.info("sleep-\(label)-time", "\(label): wake → all \(apps) apps done (\(format(work, 2)) s of work each)",
                    value: "\(format(drained / 1000, 2)) s", machine: machine).report()
        Figure.info("sleep-\(label)-first", "\(label): wake → an app's first chunk, p50 / p99",
                    value: "\(milliseconds(first.median)) / \(milliseconds(first.p99)) ms", machine: machine).report()
    }

    /// `ran a-b,c-d…` → the runs.
    static func parseRuns(_ line: String) -> [(start: Int64, end: Int64)] {
        line.dropFirst("ran ".count).split(separator: ",").compactMap { run in
            let ends = run.split(separator: "-")
            guard ends.count == 2, let start = Int64(ends[0]), let end = Int64(ends[1]) else { return nil }
            return (start, end)
        }
    }

    /// The most runs (of different apps) that overlap at one instant.
    static func mostAtOnce(_ runs: [[(start: Int64, end: Int64)]]) -> Int {
        // Ends sort before starts at the same instant: touching runs do not overlap.
        var edges: [(at: Int64, change: Int)] = []
        for app in runs {
            for run in app { edges += [(run.start, 1), (run.end, -1)] }
        }
        edges.sort { $0.at != $1.at ? $0.at < $1.at : $0.change < $1.change }
        var now = 0, most = 0
        for (_, change) in edges {
            now += change
            most = max(most, now)
        }
        return most
    }
}
