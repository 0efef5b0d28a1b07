import ArgumentParser
import Glibc

/// How soon bgtaskd lets the machine sleep: this tool plays logind on a
/// private system bus (``FakeLogind``) that the daemon follows, with
/// `--apps` busy background apps to freeze. Each cycle emits
/// PrepareForSleep(true) and times until the daemon's delay lock is closed
/// (logind waits at most InhibitDelayMaxUSec, 5 s, for it), checks that every
/// app is frozen by then, emits PrepareForSleep(false) and waits for the new
/// lock and for the apps to run again. Run the daemon with
/// Scheduler.MaxConcurrentWakes at least `--apps`, so that every app runs
/// again before the next sleep and each sleep has them all to freeze.
struct SleepReleaseCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "sleep-release",
        abstract: "PrepareForSleep(true) until bgtaskd closes its delay lock, with many apps to freeze (needs root, cgroup v2).")

    @OptionGroup var target: BusOptions

    @Option(help: ArgumentHelp("The private system bus the daemon was started on (its DBUS_SYSTEM_BUS_ADDRESS).", valueName: "ADDRESS"))
    var systemBus: String

    @Option(help: "Background apps to freeze.")
    var apps = 100

    @Option(help: "Sleep/wake cycles.")
    var cycles = 30

    @Option(help: "Target: the largest acceptable p99, in ms.")
    var maxP99Ms = 200.0

    func run() throws {
        if let why = AppScope.unavailable {
            Figure.info("sleep-release", "PrepareForSleep → delay lock released: not measured", value: "skipped: \(why)").report()
            return
        }
        let logind = try FakeLogind(address: systemBus)
        // The daemon follows logind's name: it asks for a lock as soon as the name is taken.
        guard try logind.waitForLocks(1, timeout: 10) else { throw BenchError("bgtaskd took no delay lock from the stand-in logind in 10 s") }
        say("sleep-release: \(cycles) cycles, \(apps) busy background apps to freeze each time")
        let workers = try ScopedWorkers(count: apps, name: "Release", bus: target.bus, arguments: ["--work", "100000"])
        defer { workers.stop() }
        _ = try workers.waitForLines("ready", timeout: 120) { try logind.process() }

        var releases: [Double] = []
        var leastFrozen = apps
        let load = CPUTimes.now()
        for cycle in 1...cycles {
            let asked = MonotonicTime.nanoseconds()
            try logind.prepareForSleep(true)
            guard let released = try logind.waitForRelease(timeout: 10) else {
                throw BenchError("cycle \(cycle): the delay lock was not released within 10 s")
            }
            releases.append(Double(released - asked) / 1000)
            leastFrozen = min(leastFrozen, workers.scopes.filter(\.isFrozen).count)
            try logind.prepareForSleep(false)
            guard try logind.waitForLocks(1, timeout: 10) else { throw BenchError("cycle \(cycle): no new lock after the resume") }
            // Every app runs again before the next sleep.
            let deadline = MonotonicTime.nanoseconds() + 10_000_000_000
            while workers.scopes.contains(where: \.isFrozen) {
                guard MonotonicTime.nanoseconds() < deadline else { throw BenchError("cycle \(cycle): apps still frozen 10 s after the resume") }
                try logind.process()
                MonotonicTime.sleep(seconds: 0.005)
            }
        }
        let machine = CPUTimes.brief(since: load)
        let stats = LatencyStats(releases)
        say("  PrepareForSleep(true) → lock closed: \(stats.summaryInMilliseconds)")
        say("  apps frozen when the lock was closed: at least \(leastFrozen) of \(apps)")
        guard leastFrozen == apps else { throw ValidationError("only \(leastFrozen) of \(apps) apps were frozen when the lock was released") }
        Figure.atMost("sleep-release-p99", "PrepareForSleep(true) → delay lock closed, \(apps) apps frozen, p99 of \(cycles) (p50 \(milliseconds(stats.median)) ms)",
                      value: stats.p99 / 1000, limit: maxP99Ms, unit: "ms", decimals: 1, machine: machine).report()
    }
}
