// Implementation notes
//
// The oracle reads the whole trace up front and plans one fetch per open
// that would otherwise find the app out of date: 1 s before the open, or, if
// the machine sleeps then, the latest moment before the open it is awake (the
// instant it woke, if that is before the open, else 1 s before it went to
// sleep). The fetch is planned only if it keeps the rules (the app registered
// by then, its floored interval passed since its last fetch) and would find
// something (content appeared after the app was last up to date and by the
// fetch). It tracks "up to date" exactly as the simulator does: opens, closes,
// silent pushes (held while the machine sleeps) and its own fetches.

public import BgTaskFetchCore
public import BgTaskProtocol
import BgTaskCore

/// A planner that knows the future: the lower bound of staleness for one
/// fetch per open (docs/DESIGN.md §8's `oracle`). Built from the trace it is run on.
public struct OraclePlanner: FetchPlanner, Sendable {
    public let floor: Double
    /// The planned fetches, by time (realtime µs).
    public private(set) var planned: [(at: UInt64, app: String)]
    private var next = 0

    public init(trace: Trace, floor: Double) {
        self.floor = floor
        planned = Self.plan(trace, floor: floor)
    }

    private struct App {
        var interval: FetchInterval?
        var registeredAt: UInt64 = 0
        var isOpen = false
        var lastFetch: UInt64?
        /// Content the app lacks (realtime µs), oldest first.
        var unseen: [UInt64] = []
    }

    private static func plan(_ trace: Trace, floor: Double) -> [(at: UInt64, app: String)] {
        var apps: [String: App] = [:]
        var sleeps: [(start: UInt64, end: UInt64?)] = []
        var pushesWaiting: [String] = []
        var plan: [(at: UInt64, app: String)] = []

        func upToDate(_ app: String) {
            if apps[app]?.isOpen == false || apps[app] == nil { apps[app, default: App()].unseen.removeAll() }
        }

        for event in trace.events {
            let now = Trace.realtime(event.t)
            switch event.kind {
            case .register(let app, let seconds):
                let interval = (try? FetchInterval(seconds: seconds)) ?? .never
                if apps[app]?.interval == nil { apps[app, default: App()].registeredAt = now }
                apps[app, default: App()].interval = interval == .never ? nil : interval
            case .open(let app):
                var state = apps[app, default: App()]
                if let oldest = state.unseen.first, let at = moment(before: now, sleeps: sleeps), oldest <= at,
                    let seconds = state.interval?.effectiveSeconds(floor: floor), at >= state.registeredAt,
                    state.lastFetch.map({ at - $0 >= UInt64(min(seconds, 1e12) * 1_000_000) }) ?? true
                {
                    plan.append((at, app))
                    state.lastFetch = at
                }
                state.unseen.removeAll()
                state.isOpen = true
                apps[app] = state
            case .close(let app):
                apps[app, default: App()].isOpen = false
            case .content(let app):
                if apps[app]?.isOpen != true { apps[app, default: App()].unseen.append(now) }
            case .sleep:
                sleeps.append((now, nil))
            case .wake:
                if !sleeps.isEmpty { sleeps[sleeps.count - 1].end = now }
                for app in pushesWaiting { upToDate(app) }
                pushesWaiting.removeAll()
            case .push(let app, let silent):
                guard silent else { break }
                if let last = sleeps.last, last.end == nil {
                    pushesWaiting.append(app)
                } else {
                    upToDate(app)
                }
            }
        }
        // Stable: apps planned at one instant keep the trace's order.
        return plan.enumerated().sorted { ($0.element.at, $0.offset) < ($1.element.at, $1.offset) }.map(\.element)
    }

    /// The latest moment before `open` at which the machine is awake, at most
    /// 1 s before it unless the machine woke within that second.
    private static func moment(before open: UInt64, sleeps: [(start: UInt64, end: UInt64?)]) -> UInt64? {
        guard open >= 1_000_000 else { return nil }
        var at = open - 1_000_000
        var index = sleeps.count - 1
        while index >= 0 {
            let sleep = sleeps[index]
            if sleep.start > at {
                index -= 1
                continue
            }
            if let end = sleep.end, at >= end { return at }  // awake at `at`
            // Asleep at `at`: the instant it woke, if before the open and not asleep again at once…
            if let end = sleep.end, end < open, index + 1 >= sleeps.count || sleeps[index + 1].start > end { return end }
            // …else 1 s before it went to sleep.
            guard sleep.start >= 1_000_000 else { return nil }
            at = sleep.start - 1_000_000
            index -= 1
        }
        return at
    }

    public mutating func register(_ app: String, interval: FetchInterval, at now: UInt64) {}
    public mutating func opened(_ app: String, at now: UInt64) {}
    public mutating func closed(_ app: String, at now: UInt64) {}
    public mutating func fetched(_ app: String, result: FetchResult?, at now: UInt64) {}
    public mutating func setEligible(_ app: String, _ eligible: Bool, at now: UInt64) {}
    public mutating func setSleeping(_ sleeping: Bool, at now: UInt64) {}

    public mutating func nextWake() -> UInt64? {
        next < planned.count ? planned[next].at : nil
    }

    public mutating func appsToFetch(at now: UInt64) -> [String] {
        var apps: [String] = []
        while next < planned.count, planned[next].at <= now {
            apps.append(planned[next].app)
            next += 1
        }
        return apps
    }

    public func plan(for app: String, at now: UInt64) -> FetchPlan? {
        let upcoming = planned[next...].first { $0.app == app }
        return FetchPlan(next: upcoming?.at, reasons: [])
    }
}
