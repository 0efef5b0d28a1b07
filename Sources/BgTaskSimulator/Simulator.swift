// Implementation notes
//
// Virtual time: trace second t is realtime µs (base + t) · 10⁶. The loop goes
// to the earlier of the next trace event and the planner's next wake; trace
// events at an instant come before a wake at that instant, and a wake the
// planner planned in the past runs at once. A planner that keeps asking for a
// past wake after it was polled at this instant is not polled again until the
// next trace event (so a planner that plans a wake and then fetches nothing
// cannot stall the simulation).
//
// The simulator, not the planner, enforces docs/DESIGN.md §8's rules, the same for
// every policy: a fetch while the machine sleeps, while the app is open, for
// an app without a fetch interval, or within the app's floored interval since
// its last background fetch is refused — not performed, not counted, not
// reported to the planner — and recorded as a violation.
//
// Content: an app is up to date after a fetch, a silent push, or an open (and
// stays so while open: it refreshes itself in the foreground). A fetch finds
// newData if content for the app appeared after it was last up to date.
//
// A silent push wakes its app in the background: one wake event (shared with
// fetches at the same instant), the app up to date. The planner hears of it
// as pushed(app, result:, at:) (planners that do not tell pushes apart take
// it as a fetch); it is not a fetch for the interval rule.
// A push that arrives while the machine sleeps waits for the wake (docs/DESIGN.md §6);
// one for an open app, or a non-silent one, wakes nothing.

public import BgTaskFetchCore
import BgTaskProtocol
import BgTaskCore

/// Replays a trace through a ``FetchPlanner`` in virtual time and measures
/// the cost (wakes, fetches) and the staleness users saw.
public struct Simulator: Sendable {
    public var trace: Trace
    /// `Fetch.MinimumIntervalSec`: the floor of every app's interval, in seconds.
    public var floor: Double

    public init(trace: Trace, floor: Double = 900) {
        self.trace = trace
        self.floor = floor
    }

    private struct AppState {
        var interval: FetchInterval?
        var isOpen = false
        var lastFetch: UInt64?
        /// When the oldest content the app lacks appeared; nil when it is up to date.
        var oldestUnseen: UInt64?
    }

    /// Runs the whole trace through `planner`.
    public func run<Planner: FetchPlanner>(_ planner: inout Planner) -> SimulationResult {
        var state = Run(floor: floor)
        let events = trace.events
        var index = 0
        var now: UInt64 = events.isEmpty ? 0 : Trace.realtime(events[0].t)
        var polledAt: UInt64?
        var changedSincePoll = true
        while true {
            let eventTime = index < events.count ? Trace.realtime(events[index].t) : nil
            var wake = planner.nextWake()
            if let planned = wake, planned <= now, polledAt == now, !changedSincePoll { wake = nil }
            if let planned = wake, eventTime.map({ max(planned, now) < $0 }) ?? true {
                // Past the last event nothing more is measured.
                if eventTime == nil, planned > now { break }
                now = max(planned, now)
                polledAt = now
                changedSincePoll = false
                state.fetch(planner.appsToFetch(at: now), at: now, planner: &planner)
                continue
            }
            guard let time = eventTime else { break }
            now = time
            state.apply(events[index], at: now, planner: &planner)
            changedSincePoll = true
            index += 1
        }
        return state.result()
    }

    /// The state of one run.
    private struct Run {
        let floor: Double
        var apps: [String: AppState] = [:]
        var sleeping = false
        var pushesWaiting: [String] = []
        var lastWorkAt: UInt64?
        var fetchWakes = 0, wakeEvents = 0, nodataFetches = 0, opens = 0, pushWakes = 0
        var samples: [Double] = []
        var staleness: [String: [[Double]]] = [:]
        var openSamples: [OpenSample] = []
        var runs: [BackgroundRun] = []
        var violations: [RuleViolation] = []

        init(floor: Double) {
            self.floor = floor
        }

        mutating func apply<Planner: FetchPlanner>(_ event: TraceEvent, at now: UInt64, planner: inout Planner) {
            switch event.kind {
            case .register(let app, let seconds):
                // The trace was checked: the interval parses.
                let interval = (try? FetchInterval(seconds: seconds)) ?? .never
                apps[app, default: AppState()].interval = interval == .never ? nil : interval
                planner.register(app, interval: interval, at: now)
            case .open(let app):
                var app_ = apps[app, default: AppState()]
                let age = app_.oldestUnseen.map { Double(now - $0) / 1_000_000 } ?? 0
                samples.append(age)
                openSamples.append(OpenSample(app: app, at: now, staleness: age))
                let day = Int(event.t / 86_400)
                var perDay = staleness[app, default: []]
                while perDay.count <= day { perDay.append([]) }
                perDay[day].append(age)
                staleness[app] = perDay
                opens += 1
                app_.isOpen = true
                app_.oldestUnseen = nil
                apps[app] = app_
                planner.opened(app, at: now)
            case .close(let app):
                apps[app, default: AppState()].isOpen = false
                planner.closed(app, at: now)
            case .content(let app):
                var app_ = apps[app, default: AppState()]
                if !app_.isOpen, app_.oldestUnseen == nil { app_.oldestUnseen = now }
                apps[app] = app_
            case .sleep:
                sleeping = true
                planner.setSleeping(true, at: now)
            case .wake:
                sleeping = false
                planner.setSleeping(false, at: now)
                let waiting = pushesWaiting
                pushesWaiting = []
                for app in waiting { push(app, at: now, planner: &planner) }
            case .push(let app, let silent):
                guard silent else { break }
                if sleeping {
                    if !pushesWaiting.contains(app) { pushesWaiting.append(app) }
                } else {
                    push(app, at: now, planner: &planner)
                }
            }
        }

        mutating func push<Planner: FetchPlanner>(_ app: String, at now: UInt64, planner: inout Planner) {
            var app_ = apps[app, default: AppState()]
            guard !app_.isOpen else { return }
            let result: FetchResult = app_.oldestUnseen == nil ? .noData : .newData
            app_.oldestUnseen = nil
            apps[app] = app_
            pushWakes += 1
            worked(at: now)
            runs.append(BackgroundRun(app: app, at: now, kind: .push, result: result))
            planner.pushed(app, result: result, at: now)
        }

        mutating func fetch<Planner: FetchPlanner>(_ due: [String], at now: UInt64, planner: inout Planner) {
            for app in due {
                var app_ = apps[app, default: AppState()]
                if let rule = broken(by: app_, at: now) {
                    violations.append(RuleViolation(app: app, at: now, rule: rule))
                    continue
                }
                let result: FetchResult = app_.oldestUnseen == nil ? .noData : .newData
                app_.oldestUnseen = nil
                app_.lastFetch = now
                apps[app] = app_
                fetchWakes += 1
                if result == .noData { nodataFetches += 1 }
                worked(at: now)
                runs.append(BackgroundRun(app: app, at: now, kind: .fetch, result: result))
                planner.fetched(app, result: result, at: now)
            }
        }

        /// The rule a fetch of the app now would break, if any.
        func broken(by app: AppState, at now: UInt64) -> RuleViolation.Rule? {
            if sleeping { return .machineSleeping }
            guard let interval = app.interval, let seconds = interval.effectiveSeconds(floor: floor) else { return .notRegistered }
            if app.isOpen { return .appOpen }
            // Truncated to µs as the planners do, so a fetch exactly at the interval is allowed.
            if let last = app.lastFetch, now - last < UInt64(min(seconds, 1e12) * 1_000_000) {
                return .withinInterval(lastFetch: last, intervalSeconds: seconds)
            }
            return nil
        }

        /// Background work ran at `now`: a new wake event unless some already ran at this instant.
        mutating func worked(at now: UInt64) {
            if lastWorkAt != now {
                wakeEvents += 1
                lastWorkAt = now
            }
        }

        func result() -> SimulationResult {
            let metrics = SimulationMetrics(
                fetchWakes: fetchWakes, wakeEvents: wakeEvents, nodataFetches: nodataFetches,
                meanStalenessS: SimulationMetrics.mean(of: samples),
                p90StalenessS: SimulationMetrics.percentile(0.9, of: samples),
                opens: opens, ruleViolations: violations.count, pushWakes: pushWakes
            )
            return SimulationResult(metrics: metrics, runs: runs, violations: violations, staleness: staleness, opens: openSamples)
        }
    }
}
