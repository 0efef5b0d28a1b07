import ArgumentParser
import SDBus

/// Figure 2: many open tasks held by many connections. Measures the daemon's
/// resident memory while they are held, and the latency of a Begin call on a
/// separate connection meanwhile (sequential Begin+End pairs, Begin timed alone).
///
/// The held tasks belong to active apps, so no deadline runs: what is measured
/// is the cost of holding the state, not of expiring it.
struct HoldCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "hold",
        abstract: "Daemon RSS and Begin latency while many connections hold many open tasks.")

    @OptionGroup var target: BusOptions

    @Option(help: "Client connections that hold the tasks.")
    var connections = 100

    @Option(help: "Open tasks in all, spread evenly over the connections (Tasks.MaxPerConnection is 100 by default).")
    var tasks = 10_000

    @Option(help: "Sequential Begin+End pairs timed while the tasks are held.")
    var samples = 5000

    @Option(help: "Target: the largest acceptable daemon VmRSS while the tasks are held, in MiB.")
    var maxRSSMiB = 64.0

    @Option(help: "Target: the largest acceptable p99 of Begin while the tasks are held, in ms.")
    var maxP99Ms = 2.0

    func validate() throws {
        guard connections >= 1, tasks >= connections else { throw ValidationError("need at least one task per connection") }
        guard samples >= 100 else { throw ValidationError("--samples must be at least 100") }
    }

    func run() throws {
        let probe = try target.connect()
        let daemon = try target.daemon(via: probe)
        say("hold: daemon pid \(daemon.pid); \(tasks) tasks on \(connections) connections; \(samples) timed Begin+End pairs")

        // The same measurement with nothing held, for comparison.
        _ = try measure(on: probe, count: 200)
        let (emptyBegin, _) = try measure(on: probe, count: samples)
        let rssEmpty = daemon.residentMiB ?? .nan
        say("  nothing held:   Begin \(emptyBegin.summaryInMilliseconds); daemon VmRSS \(format(rssEmpty, 1)) MiB")

        // Open the connections and their tasks.
        let start = MonotonicTime.nanoseconds()
        var holders: [ManagerClient] = []
        holders.reserveCapacity(connections)
        var opened = 0
        for index in 0..<connections {
            let holder = try target.connect()
            let share = tasks / connections + (index < tasks % connections ? 1 : 0)
            for number in 0..<share {
                _ = try holder.begin("held-\(index)-\(number)")
                opened += 1
            }
            holders.append(holder)
        }
        let openSeconds = MonotonicTime.microseconds(since: start) / 1e6
        let rssHeld = daemon.residentMiB ?? .nan
        say("  opened \(opened) tasks on \(holders.count) connections in \(format(openSeconds, 2)) s;"
            + " daemon VmRSS \(format(rssHeld, 1)) MiB")

        // Begin latency while they are held.
        let measuring = CPUTimes.now()
        let (heldBegin, heldEnd) = try measure(on: probe, count: samples)
        let machine = CPUTimes.brief(since: measuring)
        say("  " + (CPUTimes.now()?.summary(since: measuring) ?? ""))
        let rssAfter = daemon.residentMiB ?? .nan
        let rss = max(rssHeld, rssAfter)
        let peak = daemon.peakResidentMiB ?? .nan
        say("  \(opened) held:   Begin \(heldBegin.summaryInMilliseconds)")
        say("                  End   \(heldEnd.summaryInMilliseconds)")
        say("  daemon VmRSS while held \(format(rss, 1)) MiB (peak VmHWM so far \(format(peak, 1)) MiB);"
            + " \(format((rss - rssEmpty) * 1024 * 1024 / Double(opened), 0)) bytes per held task over the empty daemon")

        // Check that the daemon really holds them (after the memory readings: this reply is big).
        let getStart = MonotonicTime.nanoseconds()
        let reported = try probe.openTaskCount()
        say("  the Tasks property lists \(reported) open tasks (Get took \(milliseconds(MonotonicTime.microseconds(since: getStart))) ms)")

        holders.removeAll()
        MonotonicTime.sleep(seconds: 0.5)
        say("  after the holders disconnected: daemon VmRSS \(format(daemon.residentMiB ?? .nan, 1)) MiB")

        guard reported >= opened else {
            throw ValidationError("the daemon lists \(reported) open tasks, expected at least \(opened)")
        }
        Figure.atMost("hold-rss", "daemon VmRSS, \(opened) tasks on \(connections) connections",
                      value: rss, limit: maxRSSMiB, unit: "MiB", decimals: 1, machine: machine).report()
        Figure.atMost("hold-p99", "Begin p99 while held (n=\(heldBegin.count), p50 \(milliseconds(heldBegin.median)) ms)",
                      value: heldBegin.p99 / 1000, limit: maxP99Ms, unit: "ms", decimals: 3, machine: machine).report()
    }

    /// `count` sequential Begin+End pairs; the latency of each Begin and each End in µs.
    private func measure(on client: ManagerClient, count: Int) throws -> (begin: LatencyStats, end: LatencyStats) {
        var begins: [Double] = []
        var ends: [Double] = []
        begins.reserveCapacity(count)
        ends.reserveCapacity(count)
        for _ in 0..<count {
            let a = MonotonicTime.nanoseconds()
            let task = try client.begin("probe")
            let b = MonotonicTime.nanoseconds()
            try client.end(task.id)
            let c = MonotonicTime.nanoseconds()
            begins.append(Double(b - a) / 1000)
            ends.append(Double(c - b) / 1000)
        }
        return (LatencyStats(begins), LatencyStats(ends))
    }
}
