public import BgTaskFetchCore
public import BgTaskProtocol
import BgTaskCore

/// The baseline of docs/DESIGN.md §8: every app is fetched as soon as its floored
/// interval since its last fetch (or since it registered) has passed, as one
/// systemd timer per app would. No learning and no coalescing: apps share a
/// wake only when they fall due at the very same µs. A fetch that falls due
/// while the app is open, not eligible or the machine sleeps waits, and runs
/// as soon as that ends.
public struct NaivePlanner: FetchPlanner, Sendable {
    public let floor: Double

    private struct App {
        var interval: FetchInterval
        /// Realtime µs the interval counts from: the last fetch, else the registration.
        var since: UInt64
        var isOpen = false
        var eligible = true
    }

    private var apps: [String: App] = [:]
    private var sleeping = false

    public init(floor: Double) {
        self.floor = floor
    }

    /// When the app is due (realtime µs), ignoring whether it may run now; nil for never.
    private func due(_ app: App) -> UInt64? {
        guard let seconds = app.interval.effectiveSeconds(floor: floor) else { return nil }
        return app.since &+ UInt64(min(seconds, 1e12) * 1_000_000)
    }

    private func runnable(_ app: App) -> Bool { !app.isOpen && app.eligible }

    public mutating func register(_ app: String, interval: FetchInterval, at now: UInt64) {
        if interval == .never {
            apps[app] = nil
        } else if apps[app] != nil {
            apps[app]!.interval = interval
        } else {
            apps[app] = App(interval: interval, since: now)
        }
    }

    public mutating func opened(_ app: String, at now: UInt64) { apps[app]?.isOpen = true }
    public mutating func closed(_ app: String, at now: UInt64) { apps[app]?.isOpen = false }
    public mutating func fetched(_ app: String, result: FetchResult?, at now: UInt64) { apps[app]?.since = now }
    public mutating func setEligible(_ app: String, _ eligible: Bool, at now: UInt64) { apps[app]?.eligible = eligible }
    public mutating func setSleeping(_ sleeping: Bool, at now: UInt64) { self.sleeping = sleeping }

    public mutating func nextWake() -> UInt64? {
        guard !sleeping else { return nil }
        var earliest: UInt64?
        for app in apps.values where runnable(app) {
            if let due = due(app), due < earliest ?? .max { earliest = due }
        }
        return earliest
    }

    public mutating func appsToFetch(at now: UInt64) -> [String] {
        guard !sleeping else { return [] }
        return apps.compactMap { name, app in runnable(app) && (due(app).map { $0 <= now } ?? false) ? name : nil }.sorted()
    }

    public func plan(for app: String, at now: UInt64) -> FetchPlan? {
        guard let record = apps[app] else { return nil }
        guard let seconds = record.interval.effectiveSeconds(floor: floor) else { return FetchPlan(next: nil, reasons: [.never]) }
        if record.isOpen { return FetchPlan(next: nil, reasons: [.inForeground]) }
        if !record.eligible { return FetchPlan(next: nil, reasons: [.notEligible]) }
        return FetchPlan(next: due(record), reasons: [.atInterval(seconds: seconds)])
    }
}
