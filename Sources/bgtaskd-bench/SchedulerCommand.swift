import ArgumentParser
import BgTaskCore

/// Figure: with many registered apps, planning the next fetch wake after a
/// change costs little. In-process, no bus: the fetch plugin's own
/// ``FetchSchedule`` (BgTaskCore) on a virtual realtime clock.
///
/// `--apps` apps are registered (a mix of `minimum`, custom and `never`
/// intervals, each with some history, registered at random instants of the
/// last day). Then, `--changes` times, one app's record changes as the plugin
/// changes it — a fetch ended (`lastFetchAt` and an outcome), the app asked
/// for another interval, or it missed its budget (an offence) — and the
/// cost of `set(app, record)` followed by `nextWake()` is timed alone on
/// CLOCK_MONOTONIC. Building the new record value is the caller's work and
/// is not timed; releasing the old one is.
///
/// Then the wake path: on a fresh schedule of the same size, virtual time
/// jumps from wake to wake (`now = nextWake()`); each wake's `takeDue(at:)`,
/// with the default 60 s coalescing window, is timed, and so is the whole
/// cycle the plugin runs after it (every due app put back with its new
/// `lastFetchAt`, then `nextWake()`). How many apps each wake takes and how
/// many wakes coalescing saves are printed too.
struct SchedulerCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "scheduler",
        abstract: "Cost of a fetch-schedule change (set + nextWake) and of takeDue with many apps (in-process, no bus).")

    @Option(help: "Registered apps.")
    var apps = 10_000

    @Option(help: "Timed changes (set + nextWake).")
    var changes = 100_000

    @Option(help: "Untimed changes before the timed ones.")
    var warmup = 10_000

    @Option(help: "Wakes of the takeDue run (each takes every app due within the coalescing window).")
    var wakes = 2_000

    @Option(help: "Outcomes in each app's history at registration (the plugin keeps at most 64).")
    var history = 16

    @Option(help: "Fetch.MinimumIntervalSec of the schedule.")
    var floor = 900.0

    @Option(help: "Seed of the pseudo-random apps and changes.")
    var seed: UInt64 = 1

    @Option(help: "Target: the largest acceptable p99 of one change (set + nextWake), in µs.")
    var maxP99Us = 100.0

    func validate() throws {
        guard apps >= 1, changes >= 100, wakes >= 1 else {
            throw ValidationError("need at least 1 app, 100 changes and 1 wake")
        }
    }

    func run() throws {
        // Options are read through ArgumentParser's wrappers: copied once, out of the loops.
        let (apps, changes, warmup, wakes, maxP99Us) = (apps, changes, warmup, wakes, maxP99Us)
        var random = SplitMix64(seed: seed)
        say("scheduler: \(apps) apps, \(changes) timed changes after \(warmup) untimed, \(wakes) wakes; floor \(format(floor, 0)) s")

        // --- Registration -----------------------------------------------------
        let start: UInt64 = 1_750_000_000_000_000  // a realtime instant, µs
        var now = start
        var schedule = FetchSchedule(floor: floor)
        let names = (0..<apps).map { "org.bgtaskd.Bench.App\($0)" }
        let records = names.map { _ in makeRecord(&random, now: now) }
        let buildStart = MonotonicTime.nanoseconds()
        for (name, record) in zip(names, records) { schedule.set(name, record) }
        _ = schedule.nextWake()
        let buildMs = MonotonicTime.microseconds(since: buildStart) / 1000
        let scheduled = names.filter { schedule.nextFetch(of: $0) != nil }.count
        say("  registered \(apps) apps (\(scheduled) with an interval, \(apps - scheduled) never) in \(format(buildMs, 2)) ms"
            + " (\(format(buildMs * 1000 / Double(apps), 2)) µs per app)")

        // --- Changes: set + nextWake ------------------------------------------
        var samples: [Double] = []
        samples.reserveCapacity(changes)
        var checksum: UInt64 = 0
        var kinds = (fetched: 0, interval: 0, offence: 0)
        let measuring = CPUTimes.now()
        for index in 0..<(warmup + changes) {
            now &+= 500_000  // half a second of virtual time per change
            let app = names[Int(random.next() % UInt64(apps))]
            var record = schedule.records[app]!
            let roll = random.next() % 10
            if roll < 6 {
                record.lastFetchAt = now
                record.record(FetchRecord.Outcome(at: now, result: random.next() % 3 == 0 ? .newData : .noData))
                if index >= warmup { kinds.fetched += 1 }
            } else if roll < 8 {
                record.interval = Self.randomInterval(&random)
                record.registeredAt = now
                if index >= warmup { kinds.interval += 1 }
            } else {
                record.lastFetchAt = now
                record.record(FetchRecord.Outcome(at: now, result: nil))
                if index >= warmup { kinds.offence += 1 }
            }
            let a = MonotonicTime.nanoseconds()
            schedule.set(app, record)
            let next = schedule.nextWake()
            let b = MonotonicTime.nanoseconds()
            checksum &+= next ?? 0
            if index >= warmup { samples.append(Double(b - a) / 1000) }
        }
        let changeMachine = CPUTimes.brief(since: measuring)
        let change = LatencyStats(samples)
        let mean = samples.reduce(0, +) / Double(samples.count)
        let over = samples.filter { $0 > maxP99Us }.count
        say("  \(change.count) changes (\(kinds.fetched) fetches ended, \(kinds.interval) new intervals, \(kinds.offence) offences):")
        say("    set + nextWake: p50 \(format(change.median, 3)) µs, p90 \(format(change.p90, 3)) µs,"
            + " p99 \(format(change.p99, 3)) µs, p99.9 \(format(change.percentile(99.9), 3)) µs,"
            + " max \(format(change.max, 1)) µs, mean \(format(mean, 3)) µs; \(over) above \(format(maxP99Us, 0)) µs")
        let slowest = samples.indices.filter { samples[$0] > maxP99Us }
        if !slowest.isEmpty {
            say("    changes above \(format(maxP99Us, 0)) µs (change number: µs): "
                + slowest.prefix(40).map { "\($0): \(format(samples[$0], 0))" }.joined(separator: ", "))
        }
        say("    " + (CPUTimes.now()?.summary(since: measuring) ?? ""))

        // --- Wakes: takeDue with coalescing -------------------------------------
        var wakeSchedule = FetchSchedule(floor: floor)
        now = start
        for (name, record) in zip(names, records) { wakeSchedule.set(name, record) }
        var takeSamples: [Double] = []
        var cycleSamples: [Double] = []
        var groupSizes: [Double] = []
        var perAppTake: [Double] = []
        var fetched = 0
        var firstWake: UInt64?
        var lastWake: UInt64 = 0
        let wakeLoad = CPUTimes.now()
        for _ in 0..<wakes {
            guard let next = wakeSchedule.nextWake() else { break }
            now = max(now, next)
            firstWake = firstWake ?? now
            lastWake = now
            let a = MonotonicTime.nanoseconds()
            let due = wakeSchedule.takeDue(at: now)
            let b = MonotonicTime.nanoseconds()
            // What the plugin does for each woken app: note the fetch, put it back in line.
            for app in due {
                var record = wakeSchedule.records[app]!
                record.lastFetchAt = now
                wakeSchedule.set(app, record)
            }
            checksum &+= wakeSchedule.nextWake() ?? 0
            let c = MonotonicTime.nanoseconds()
            takeSamples.append(Double(b - a) / 1000)
            cycleSamples.append(Double(c - a) / 1000)
            groupSizes.append(Double(due.count))
            if !due.isEmpty { perAppTake.append(Double(b - a) / 1000 / Double(due.count)) }
            fetched += due.count
        }
        let take = LatencyStats(takeSamples)
        let cycle = LatencyStats(cycleSamples)
        let groups = LatencyStats(groupSizes)
        let perApp = LatencyStats(perAppTake)
        let hours = Double((lastWake &- (firstWake ?? lastWake))) / 3.6e9
        say("  \(takeSamples.count) wakes over \(format(hours, 1)) h of virtual time fetched \(fetched) apps:"
            + " apps per wake p50 \(format(groups.median, 0)), p90 \(format(groups.p90, 0)), max \(format(groups.max, 0))"
            + " (coalescing window \(format(wakeSchedule.coalesceWindow, 0)) s: \(format(Double(fetched) / Double(max(1, takeSamples.count)), 1)) fetches per wake)")
        say("    takeDue:                     p50 \(format(take.median, 2)) µs, p99 \(format(take.p99, 2)) µs, max \(format(take.max, 1)) µs;"
            + " per app taken p50 \(format(perApp.median, 3)) µs")
        say("    takeDue + set each + nextWake: p50 \(format(cycle.median, 2)) µs, p99 \(format(cycle.p99, 2)) µs, max \(format(cycle.max, 1)) µs")
        say("    " + (CPUTimes.now()?.summary(since: wakeLoad) ?? ""))
        say("  (checksum \(checksum % 1000))")

        Figure.atMost("scheduler-p99", "FetchSchedule set+nextWake, \(apps) apps, p99 of \(change.count) (p50 \(format(change.median, 2)) µs, max \(format(change.max, 0)) µs)",
                      value: change.p99, limit: maxP99Us, unit: "µs", decimals: 2, machine: changeMachine).report()
        Figure.info("scheduler-takedue", "takeDue, 60 s coalescing, p50 of \(take.count) wakes (p99 \(format(take.p99, 0)) µs; \(format(perApp.median, 2)) µs per app taken; apps per wake p50 \(format(groups.median, 0)), max \(format(groups.max, 0)))",
                    value: format(take.median, 1) + " µs", machine: CPUTimes.brief(since: wakeLoad)).report()
    }

    /// A registered app: mostly `minimum` or custom intervals, a few `never`,
    /// with some history; its last fetch (or registration) lies at a random
    /// point of its interval, so that the apps fall due evenly from now on
    /// and the first wake is not a catch-up of every app at once.
    private func makeRecord(_ random: inout SplitMix64, now: UInt64) -> FetchRecord {
        let interval = Self.randomInterval(&random)
        let span = UInt64((interval.effectiveSeconds(floor: floor) ?? 86_400) * 1_000_000)
        let last = now - random.next() % span
        var record = FetchRecord(interval: interval, registeredAt: last - UInt64(history + 1) * 1_000_000)
        for step in 0..<history {
            let at = record.registeredAt + UInt64(step + 1) * 1_000_000
            record.record(FetchRecord.Outcome(at: at, result: random.next() % 4 == 0 ? .newData : .noData))
        }
        record.lastFetchAt = last
        return record
    }

    /// 40 % minimum, 50 % custom (30 min … 1 day), 10 % never.
    private static func randomInterval(_ random: inout SplitMix64) -> FetchInterval {
        let roll = random.next() % 10
        if roll < 4 { return .minimum }
        if roll < 9 { return .custom([1800.0, 3600, 7200, 14_400, 43_200, 86_400][Int(random.next() % 6)]) }
        return .never
    }
}

/// A small seeded generator, so that every run registers the same apps and makes the same changes.
struct SplitMix64 {
    private var state: UInt64

    init(seed: UInt64) { state = seed }

    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
