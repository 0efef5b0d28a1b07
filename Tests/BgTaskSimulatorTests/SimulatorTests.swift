import BgTaskCore
import BgTaskSimulator
import Testing

/// Two apps, one day, one night of sleep, worked out by hand.
///
///     t      event                         (A: interval 6 h, B: 8 h, floor 900 s)
///     0      register A 21600, register B 28800
///     1800   content A
///     3600   sleep
///     18000  content B
///     25200  wake
///     27000  open A    27600 close A
///     30000  content A
///     32400  open B    33000 close B
///     36000  content B
///     43200  content A
///     46800  open A    47400 close A
///     50400  push B (silent)
///     54000  content B
///     61200  open B    61800 close B
///     72000  content A
///     79200  open A    79800 close A   (the trace ends)
///
/// naive: A due at 21600, asleep → fetched at the wake 25200 (newData: 1800).
/// B due at 28800 → fetched (newData: 18000). open A 27000: 0; open B 32400: 0.
/// open A 46800 at the instant A falls due again (events first): stale since
/// 30000 → 16800 s; A waits for the close and is fetched at 47400 (noData).
/// push B 50400: newData (36000), a wake event, and naive restarts B's 8 h.
/// open B 61200: stale since 54000 → 7200 s. A due 47400+21600 = 69000: noData.
/// open A 79200: stale since 72000 → 7200 s; B falls due at 79200 too (50400+28800)
/// and is fetched after the open at that instant: noData.
/// fetch_wakes 5 (25200, 28800, 47400, 69000, 79200), wake_events 6 (+ the push),
/// nodata 3, staleness [0, 0, 16800, 7200, 7200]: mean 6240, p90 (5th of 5) 16800.
///
/// oracle: A fetched at 26999 (newData). B at 32399 (newData). open A 46800:
/// 46799 − 26999 = 19800 s < 6 h, no fetch → 16800 s stale. push B 50400
/// (newData). B at 61199, exactly 8 h after 32399 (allowed) → newData. A at
/// 79199 → newData. fetch_wakes 4, wake_events 5, nodata 0, staleness
/// [0, 0, 16800, 0, 0]: mean 3360, p90 16800.
@Suite struct SimulatorTests {
    static let trace: Trace = {
        let a = "org.example.A", b = "org.example.B"
        return try! Trace(events: [
            TraceEvent(t: 0, .register(app: a, interval: 21_600)),
            TraceEvent(t: 0, .register(app: b, interval: 28_800)),
            TraceEvent(t: 1800, .content(app: a)),
            TraceEvent(t: 3600, .sleep),
            TraceEvent(t: 18_000, .content(app: b)),
            TraceEvent(t: 25_200, .wake),
            TraceEvent(t: 27_000, .open(app: a)),
            TraceEvent(t: 27_600, .close(app: a)),
            TraceEvent(t: 30_000, .content(app: a)),
            TraceEvent(t: 32_400, .open(app: b)),
            TraceEvent(t: 33_000, .close(app: b)),
            TraceEvent(t: 36_000, .content(app: b)),
            TraceEvent(t: 43_200, .content(app: a)),
            TraceEvent(t: 46_800, .open(app: a)),
            TraceEvent(t: 47_400, .close(app: a)),
            TraceEvent(t: 50_400, .push(app: b, silent: true)),
            TraceEvent(t: 54_000, .content(app: b)),
            TraceEvent(t: 61_200, .open(app: b)),
            TraceEvent(t: 61_800, .close(app: b)),
            TraceEvent(t: 72_000, .content(app: a)),
            TraceEvent(t: 79_200, .open(app: a)),
            TraceEvent(t: 79_800, .close(app: a)),
        ])
    }()

    static func at(_ t: Double) -> UInt64 { Trace.realtime(t) }

    @Test func naiveByHand() {
        let result = SimulationPolicy.naive.run(Self.trace, floor: 900)
        #expect(result.metrics == SimulationMetrics(
            fetchWakes: 5, wakeEvents: 6, nodataFetches: 3, meanStalenessS: 6240, p90StalenessS: 16_800,
            opens: 5, ruleViolations: 0, pushWakes: 1
        ))
        #expect(result.runs.map { [Trace.seconds($0.at), $0.kind == .push ? 1 : 0, $0.result == .newData ? 1 : 0] } == [
            [25_200, 0, 1], [28_800, 0, 1], [47_400, 0, 0], [50_400, 1, 1], [69_000, 0, 0], [79_200, 0, 0],
        ])
        #expect(result.staleness["org.example.A"] == [[0, 16_800, 7200]])
        #expect(result.staleness["org.example.B"] == [[0, 7200]])
        #expect(result.metrics.json
            == #"{"fetch_wakes":5,"wake_events":6,"nodata_fetches":3,"mean_staleness_s":6240,"p90_staleness_s":16800,"opens":5}"#)
    }

    @Test func oracleByHand() {
        let result = SimulationPolicy.oracle.run(Self.trace, floor: 900)
        #expect(result.metrics == SimulationMetrics(
            fetchWakes: 4, wakeEvents: 5, nodataFetches: 0, meanStalenessS: 3360, p90StalenessS: 16_800,
            opens: 5, ruleViolations: 0, pushWakes: 1
        ))
        #expect(result.runs.filter { $0.kind == .fetch }.map { Trace.seconds($0.at) } == [26_999, 32_399, 61_199, 79_199])
    }

    @Test func adaptiveKeepsTheRulesOnTheSmallTrace() {
        let result = SimulationPolicy.adaptive.run(Self.trace, floor: 900)
        #expect(result.metrics.opens == 5)
        #expect(result.violations.isEmpty, "\(result.violations)")
    }

    /// The oracle fetches at the instant the machine woke when that is within the
    /// second before the open, and before the sleep when it wakes only at the open.
    @Test func oracleWorksAroundSleep() {
        let a = "org.example.A", b = "org.example.B"
        let trace = try! Trace(events: [
            TraceEvent(t: 0, .register(app: a, interval: 0)),
            TraceEvent(t: 0, .register(app: b, interval: 0)),
            TraceEvent(t: 10, .content(app: a)),
            TraceEvent(t: 10, .content(app: b)),
            TraceEvent(t: 100, .sleep),
            TraceEvent(t: 200, .wake),
            TraceEvent(t: 200, .open(app: b)),
            TraceEvent(t: 200.5, .open(app: a)),
        ])
        var oracle = OraclePlanner(trace: trace, floor: 900)
        #expect(oracle.planned.map { [Trace.seconds($0.at)] } == [[99], [200]])
        #expect(oracle.planned.map(\.app) == [b, a])
        let result = Simulator(trace: trace).run(&oracle)
        #expect(result.metrics.meanStalenessS == 0)
        #expect(result.metrics.wakeEvents == 2)
        #expect(result.violations.isEmpty)
    }

    /// Pushes that arrive while the machine sleeps wait for the wake and share its instant.
    @Test func pushesWaitForTheWake() {
        let a = "org.example.A", b = "org.example.B"
        let trace = try! Trace(events: [
            TraceEvent(t: 0, .register(app: a, interval: 0)),
            TraceEvent(t: 0, .sleep),
            TraceEvent(t: 10, .content(app: a)),
            TraceEvent(t: 20, .push(app: a, silent: true)),
            TraceEvent(t: 30, .push(app: b, silent: true)),
            TraceEvent(t: 40, .push(app: b, silent: false)),
            TraceEvent(t: 50, .wake),
            TraceEvent(t: 60, .open(app: a)),
        ])
        let result = SimulationPolicy.oracle.run(trace, floor: 900)
        #expect(result.runs == [
            BackgroundRun(app: a, at: Self.at(50), kind: .push, result: .newData),
            BackgroundRun(app: b, at: Self.at(50), kind: .push, result: .noData),
        ])
        #expect(result.metrics.wakeEvents == 1)
        #expect(result.metrics.fetchWakes == 0)
        #expect(result.metrics.meanStalenessS == 0)
    }

    @Test func percentileIsNearestRank() {
        #expect(SimulationMetrics.percentile(0.9, of: []) == 0)
        #expect(SimulationMetrics.percentile(0.9, of: [3]) == 3)
        #expect(SimulationMetrics.percentile(0.9, of: (1...10).map(Double.init)) == 9)
        #expect(SimulationMetrics.percentile(0.9, of: (1...30).map(Double.init).reversed()) == 27)
        #expect(SimulationMetrics.percentile(0.9, of: [5, 1, 4, 2, 3]) == 5)
    }
}
