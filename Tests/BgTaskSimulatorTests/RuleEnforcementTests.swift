import BgTaskFetchCore
import BgTaskProtocol
import BgTaskCore
import BgTaskSimulator
import Testing

/// A planner that breaks every rule: it asks for the app and an unregistered
/// one every minute, whatever happens.
private struct GreedyPlanner: FetchPlanner {
    let floor = 900.0
    var lastPoll: UInt64 = Trace.realtime(0)
    var reported: [(String, FetchResult?, UInt64)] = []

    mutating func register(_ app: String, interval: FetchInterval, at now: UInt64) {}
    mutating func opened(_ app: String, at now: UInt64) {}
    mutating func closed(_ app: String, at now: UInt64) {}
    mutating func fetched(_ app: String, result: FetchResult?, at now: UInt64) { reported.append((app, result, now)) }
    mutating func setEligible(_ app: String, _ eligible: Bool, at now: UInt64) {}
    mutating func setSleeping(_ sleeping: Bool, at now: UInt64) {}
    mutating func nextWake() -> UInt64? { lastPoll + 60_000_000 }
    mutating func appsToFetch(at now: UInt64) -> [String] {
        lastPoll = now
        return ["org.example.A", "org.example.Ghost"]
    }
    func plan(for app: String, at now: UInt64) -> FetchPlan? { nil }
}

/// A planner that plans a wake in the past and then fetches nothing.
private struct StuckPlanner: FetchPlanner {
    let floor = 900.0
    var polls = 0
    mutating func register(_ app: String, interval: FetchInterval, at now: UInt64) {}
    mutating func opened(_ app: String, at now: UInt64) {}
    mutating func closed(_ app: String, at now: UInt64) {}
    mutating func fetched(_ app: String, result: FetchResult?, at now: UInt64) {}
    mutating func setEligible(_ app: String, _ eligible: Bool, at now: UInt64) {}
    mutating func setSleeping(_ sleeping: Bool, at now: UInt64) {}
    mutating func nextWake() -> UInt64? { 1 }
    mutating func appsToFetch(at now: UInt64) -> [String] {
        polls += 1
        return []
    }
    func plan(for app: String, at now: UInt64) -> FetchPlan? { nil }
}

@Suite struct RuleEnforcementTests {
    static let a = "org.example.A"
    /// A registers at 0 (interval minimum, floor 900 s), is open 300–400, the machine sleeps 1000–2000.
    static let trace = try! Trace(events: [
        TraceEvent(t: 0, .register(app: a, interval: 0)),
        TraceEvent(t: 300, .open(app: a)),
        TraceEvent(t: 400, .close(app: a)),
        TraceEvent(t: 1000, .sleep),
        TraceEvent(t: 2000, .wake),
        TraceEvent(t: 3000, .content(app: a)),
    ])

    @Test func refusesFetchesThatBreakARule() {
        var planner = GreedyPlanner()
        let result = Simulator(trace: Self.trace, floor: 900).run(&planner)
        // Polled every minute from 60 to 3000 s: 50 polls × 2 apps. A is allowed at 60 (first),
        // 960 (900 s later), 2040 (the first poll awake after the sleep) and 2940 (900 s later);
        // the content at 3000 comes too late for it.
        #expect(result.runs.map { Trace.seconds($0.at) } == [60, 960, 2040, 2940])
        #expect(result.runs.map(\.result) == [.noData, .noData, .noData, .noData])
        #expect(result.metrics.fetchWakes == 4)
        #expect(result.metrics.wakeEvents == 4)
        #expect(result.metrics.ruleViolations == 96)
        #expect(result.violations.count == 96)
        let rules = result.violations.map(\.rule)
        #expect(rules.contains(.appOpen))
        #expect(rules.contains(.machineSleeping))
        #expect(rules.contains(.notRegistered))
        #expect(rules.contains { if case .withinInterval = $0 { true } else { false } })
        #expect(result.violations.first?.description == "t=60: org.example.Ghost fetched without a fetch interval")
        // Refused fetches are not reported to the planner.
        #expect(planner.reported.map { Trace.seconds($0.2) } == [60, 960, 2040, 2940])
    }

    @Test func aPastWakeThatFetchesNothingDoesNotStall() {
        var planner = StuckPlanner()
        let result = Simulator(trace: Self.trace, floor: 900).run(&planner)
        #expect(result.metrics.fetchWakes == 0)
        // Polled at most once per trace event, not forever at the same instant.
        #expect(planner.polls <= Self.trace.events.count)
    }
}
