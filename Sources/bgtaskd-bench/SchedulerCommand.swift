import BgTaskFetchCore
import ArgumentParser
import BgTaskCore

/// Figure: with many registered apps, planning the next fetch wake after a
/// change costs little. In-process, no bus: the fetch plugin's own
/// ``AdaptivePlanner`` (BgTaskCore) on a virtual realtime clock.
///
/// `--apps` apps are registered (a mix of `minimum`, custom and `never`
/// intervals, each with some history, last fetched at random instants of its
/// interval), and `--habit-days` days of usage are played to them first (one
/// to three habitual opens a day each, ±20 min, a few minutes long), so that
/// the planner plans from learned habits as it does in the daemon after a
/// few days. Then, `--changes` times, one app's state changes as the plugin
/// changes it — a fetch ended (`newData`/`noData`), the app asked for another
/// interval, it missed its budget (an offence), or the user opened or closed
/// it — and the cost of that call followed by `nextWake()` is timed alone on
/// CLOCK_MONOTONIC.
///
/// Then the wake path: on a fresh planner of the same apps, virtual time
/// jumps from wake to wake (`now = nextWake()`); each wake's
/// `appsToFetch(at:)` (which coalesces) is timed, and so is the whole cycle
/// the plugin runs after it (every due app reported fetched, then
/// `nextWake()`). How many apps each wake takes is printed too.
struct SchedulerCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "scheduler",
        abstract: "Cost of an adaptive-planner change (+ nextWake) and of a coalesced wake with many apps (in-process, no bus).")

    @Option(help: "Registered apps.")
    var apps = 10_000

    @Option(help: "Timed changes (one planner call + nextWake).")
    var changes = 100_000

    @Option(help: "Untimed changes before the timed ones.")
    var warmup = 10_000

    @Option(help: "Wakes of the wake run (each takes the apps due, coalesced).")
    var wakes = 2_000

    @Option(help: "Outcomes in each app's history at registration (the plugin keeps at most 64).")
    var history = 16

    @Option(help: "Days of usage played to the planner before measuring (habits learned).")
    var habitDays = 4

    @Option(help: "Fetch.MinimumIntervalSec of the planner.")
    var floor = 900.0

    @Option(help: "Seed of the pseudo-random apps and changes.")
    var seed: UInt64 = 1

    @Option(help: "Target: the largest acceptable p99 of one change (call + nextWake), in µs.")
    var maxP99Us = 100.0

    func validate() throws {
        guard apps >= 1, changes >= 100, wakes >= 1, habitDays >= 0 else {
            throw ValidationError("need at least 1 app, 100 changes and 1 wake")
        }
    }

    func run() throws {
        // Options are read through ArgumentParser's wrappers: copied once, out of the loops.
        let (apps, changes, warmup, wakes, maxP99Us, habitDays) = (apps, changes, warmup, wakes, maxP99Us, habitDays)
        var random = SplitMix64(seed: seed)
        say("scheduler: AdaptivePlanner, \(apps) apps, \(habitDays) days of habits, \(changes) timed changes after \(warmup) untimed,"
            + " \(wakes) wakes; floor \(format(floor, 0)) s")

        // --- Registration and habits -------------------------------------------
        let day: UInt64 = 86_400_000_000
        let start: UInt64 = 1_750_032_000_000_000  // a realtime instant at 00:00 UTC, µs
        let names = (0..<apps).map { "org.bgtaskd.Bench.App\($0)" }
        let records = names.map { _ in makeRecord(&random, now: start) }
        // Habitual opens, seconds into the day: one to three per app, between 07:00 and 23:00.
        let habits = names.map { _ in (0..<(1 + Int(random.next() % 3))).map { _ in UInt64(25_200 + random.next() % 57_600) } }
        var usage: [(at: UInt64, app: Int, open: Bool)] = []
        for index in 0..<apps {
            for d in 0..<UInt64(habitDays) {
                for habit in habits[index] {
                    let open = start + d * day + habit * 1_000_000 + random.next() % 2_400_000_000 - 1_200_000_000
                    usage.append((open, index, true))
                    usage.append((open + 60_000_000 + random.next() % 600_000_000, index, false))
                }
            }
        }
        usage.sort { $0.at < $1.at }
        let buildStart = MonotonicTime.nanoseconds()
        var planner = makePlanner(names: names, records: records, habitsUntil: usage, at: start)
        var now = start + UInt64(habitDays) * day
        _ = planner.nextWake()
        let buildMs = MonotonicTime.microseconds(since: buildStart) / 1000
        let scheduled = names.filter { planner.plan(for: $0, at: now)?.next != nil }.count
        say("  registered \(apps) apps (\(scheduled) with a plan) and played \(usage.count) opens and closes in \(format(buildMs, 0)) ms")

        // --- Changes: one call + nextWake -----------------------------------------
        var samples: [Double] = []
        samples.reserveCapacity(changes)
        var checksum: UInt64 = 0
        var kinds = (fetched: 0, interval: 0, offence: 0, usage: 0)
        var byKind: [String: [Double]] = [:]
        var open = Set<Int>()
        let measuring = CPUTimes.now()
        for index in 0..<(warmup + changes) {
            now &+= 500_000  // half a second of virtual time per change
            let number = Int(random.next() % UInt64(apps))
            let app = names[number]
            let roll = random.next() % 10
            let timed = index >= warmup
            let a = MonotonicTime.nanoseconds()
            if roll < 5 {
                planner.fetched(app, result: random.next() % 3 == 0 ? .newData : .noData, at: now)
                if timed { kinds.fetched += 1 }
            } else if roll < 7 {
                planner.register(app, interval: Self.randomInterval(&random), at: now)
                if timed { kinds.interval += 1 }
            } else if roll < 8 {
                planner.fetched(app, result: nil, at: now)
                if timed { kinds.offence += 1 }
            } else {
                if open.remove(number) != nil { planner.closed(app, at: now) } else { open.insert(number); planner.opened(app, at: now) }
                if timed { kinds.usage += 1 }
            }
            let next = planner.nextWake()
            let b = MonotonicTime.nanoseconds()
            checksum &+= next ?? 0
            if timed {
                samples.append(Double(b - a) / 1000)
                byKind[roll < 5 ? "fetch ended" : roll < 7 ? "new interval" : roll < 8 ? "offence" : "open or close", default: []]
                    .append(Double(b - a) / 1000)
            }
        }
        let changeMachine = CPUTimes.brief(since: measuring)
        let change = LatencyStats(samples)
        let mean = samples.reduce(0, +) / Double(samples.count)
        let over = samples.filter { $0 > maxP99Us }.count
        say("  \(change.count) changes (\(kinds.fetched) fetches ended, \(kinds.interval) new intervals, \(kinds.offence) offences,"
            + " \(kinds.usage) opens or closes):")
        say("    call + nextWake: p50 \(format(change.median, 3)) µs, p90 \(format(change.p90, 3)) µs,"
            + " p99 \(format(change.p99, 3)) µs, p99.9 \(format(change.percentile(99.9), 3)) µs,"
            + " max \(format(change.max, 1)) µs, mean \(format(mean, 3)) µs; \(over) above \(format(maxP99Us, 0)) µs")
        for (kind, times) in byKind.sorted(by: { $0.key < $1.key }) {
            let stats = LatencyStats(times)
            say("    \(kind): p50 \(format(stats.median, 2)) µs, p99 \(format(stats.p99, 2)) µs, max \(format(stats.max, 1)) µs (\(times.count))")
        }
        say("    " + (CPUTimes.now()?.summary(since: measuring) ?? ""))

        // --- Wakes: appsToFetch with coalescing -----------------------------------
        var wakePlanner = makePlanner(names: names, records: records, habitsUntil: usage, at: start)
        now = start + UInt64(habitDays) * day
        var takeSamples: [Double] = []
        var cycleSamples: [Double] = []
        var groupSizes: [Double] = []
        var fetched = 0
        var firstWake: UInt64?
        var lastWake: UInt64 = 0
        let wakeLoad = CPUTimes.now()
        for _ in 0..<wakes {
            guard let next = wakePlanner.nextWake() else { break }
            now = max(now, next)
            firstWake = firstWake ?? now
            lastWake = now
            let a = MonotonicTime.nanoseconds()
            let due = wakePlanner.appsToFetch(at: now)
            let b = MonotonicTime.nanoseconds()
            // What the plugin does for each woken app once it answers.
            for app in due { wakePlanner.fetched(app, result: random.next() % 4 == 0 ? .newData : .noData, at: now) }
            checksum &+= wakePlanner.nextWake() ?? 0
            let c = MonotonicTime.nanoseconds()
            takeSamples.append(Double(b - a) / 1000)
            cycleSamples.append(Double(c - a) / 1000)
            groupSizes.append(Double(due.count))
            fetched += due.count
        }
        let take = LatencyStats(takeSamples)
        let cycle = LatencyStats(cycleSamples)
        let groups = LatencyStats(groupSizes)
        let hours = Double((lastWake &- (firstWake ?? lastWake))) / 3.6e9
        say("  \(takeSamples.count) wakes over \(format(hours, 1)) h of virtual time fetched \(fetched) apps:"
            + " apps per wake p50 \(format(groups.median, 0)), p90 \(format(groups.p90, 0)), max \(format(groups.max, 0))"
            + " (\(format(Double(fetched) / Double(max(1, takeSamples.count)), 1)) fetches per wake)")
        say("    appsToFetch:                      p50 \(format(take.median, 2)) µs, p99 \(format(take.p99, 2)) µs, max \(format(take.max, 1)) µs")
        say("    appsToFetch + fetched each + nextWake: p50 \(format(cycle.median, 2)) µs, p99 \(format(cycle.p99, 2)) µs, max \(format(cycle.max, 1)) µs")
        say("    " + (CPUTimes.now()?.summary(since: wakeLoad) ?? ""))
        say("  (checksum \(checksum))")

        Figure.atMost("scheduler-p99", "AdaptivePlanner call+nextWake, \(apps) apps with learned habits, p99 of \(change.count) (p50 \(format(change.median, 2)) µs, max \(format(change.max, 0)) µs)",
                      value: change.p99, limit: maxP99Us, unit: "µs", decimals: 2, machine: changeMachine).report()
        Figure.info("scheduler-wake", "appsToFetch + fetched each + nextWake, p50 of \(cycle.count) wakes (p99 \(format(cycle.p99, 0)) µs; apps per wake p50 \(format(groups.median, 0)), max \(format(groups.max, 0)))",
                    value: format(cycle.median, 1) + " µs", machine: CPUTimes.brief(since: wakeLoad)).report()
    }

    /// A planner with every app restored from its record, then the usage played to it.
    private func makePlanner(names: [String], records: [FetchRecord], habitsUntil usage: [(at: UInt64, app: Int, open: Bool)],
                             at start: UInt64) -> AdaptivePlanner {
        var planner = AdaptivePlanner(floor: floor)
        for (name, record) in zip(names, records) { planner.restore(name, record: record, learned: nil, at: start) }
        for event in usage {
            if event.open { planner.opened(names[event.app], at: event.at) } else { planner.closed(names[event.app], at: event.at) }
        }
        return planner
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
