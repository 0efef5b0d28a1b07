/// bgtaskd's fetch planner. (First cut: each app at its interval with the
/// one-minute coalescing of ``FetchSchedule``; the learning policy replaces it.)
public struct AdaptivePlanner: FetchPlanner, Sendable {
    public let floor: Double
    private var schedule: FetchSchedule
    private var open: Set<String> = []
    private var ineligible: Set<String> = []
    private var sleeping = false

    public init(floor: Double, utcOffset: Int = 0) {
        self.floor = floor
        schedule = FetchSchedule(floor: floor)
    }

    public mutating func register(_ app: String, interval: FetchInterval, at now: UInt64) {
        if interval == .never { return schedule.remove(app) }
        var record = schedule.records[app] ?? FetchRecord(interval: interval, registeredAt: now)
        record.interval = interval
        schedule.set(app, record)
    }

    public mutating func opened(_ app: String, at now: UInt64) {
        open.insert(app)
        schedule.hold(app)
    }

    public mutating func closed(_ app: String, at now: UInt64) {
        open.remove(app)
        if !ineligible.contains(app) { schedule.release(app) }
    }

    public mutating func fetched(_ app: String, result: FetchResult?, at now: UInt64) {
        guard var record = schedule.records[app] else { return }
        record.lastFetchAt = now
        record.record(.init(at: now, result: result))
        schedule.set(app, record)
        if open.contains(app) || ineligible.contains(app) { schedule.hold(app) }
    }

    public mutating func setEligible(_ app: String, _ eligible: Bool, at now: UInt64) {
        if eligible { ineligible.remove(app) } else { ineligible.insert(app) }
        if eligible && !open.contains(app) { schedule.release(app) } else { schedule.hold(app) }
    }

    public mutating func setSleeping(_ sleeping: Bool, at now: UInt64) {
        self.sleeping = sleeping
    }

    public mutating func nextWake() -> UInt64? {
        sleeping ? nil : schedule.nextWake()
    }

    public mutating func appsToFetch(at now: UInt64) -> [String] {
        sleeping ? [] : schedule.takeDue(at: now)
    }

    public func plan(for app: String, at now: UInt64) -> FetchPlan? {
        guard let record = schedule.records[app] else { return nil }
        guard let interval = schedule.effectiveInterval(of: record) else { return FetchPlan(next: nil, reasons: [.never]) }
        return FetchPlan(next: schedule.isHeld(app) ? nil : schedule.nextFetch(of: app), reasons: [.atInterval(seconds: interval)])
    }
}
