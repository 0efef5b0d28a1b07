// Implementation notes
//
// Until the adaptive scheduler, an app is fetched at its interval: the
// interval in force is the requested one floored at Fetch.MinimumIntervalSec
// ("minimum" is the floor itself), counted from its last fetch (or from when
// it registered). Each offence not yet redeemed doubles the interval, up to
// 8×, so an app that keeps missing its budget is woken less. When the earliest
// app falls due, every app due within the next minute is woken with it: one
// wake of the machine instead of several.
//
// Times are CLOCK_REALTIME µs: fetch intervals are wall-clock promises that
// survive restarts, and a realtime timer fires right after a suspend that
// outlasted it.

/// Which apps to fetch when: one entry per registered app, ordered by time,
/// so finding the next wake after a change is O(log n).
public struct FetchSchedule: Sendable {
    /// `Fetch.MinimumIntervalSec`.
    public var floor: Double
    /// Apps due within this many seconds of the earliest are woken with it.
    public var coalesceWindow: Double
    private(set) public var records: [String: FetchRecord] = [:]
    /// The queue orders small integers, not app ids: its position bookkeeping
    /// then hashes integers instead of strings on every move.
    private var queue = DeadlineQueue<Int, UInt64>()
    private var numbers: [String: Int] = [:]
    private var names: [String] = []
    /// Apps held out of the schedule (refresh off, in the foreground…), until released.
    private var held: Set<String> = []

    public init(floor: Double, coalesceWindow: Double = 60) {
        self.floor = floor
        self.coalesceWindow = coalesceWindow
    }

    /// The interval in force for a record, offences included; nil for never.
    public func effectiveInterval(of record: FetchRecord) -> Double? {
        guard let base = record.interval.effectiveSeconds(floor: floor) else { return nil }
        return base * Double(1 << min(record.offences, 3))
    }

    /// When the app is next due (realtime µs), nil when it is never fetched.
    public func nextFetch(of app: String) -> UInt64? {
        guard let record = records[app], let interval = effectiveInterval(of: record) else { return nil }
        let base = record.lastFetchAt ?? record.registeredAt
        return base &+ UInt64(min(interval, 1e12) * 1_000_000)
    }

    /// Adds or replaces an app's record and reschedules it.
    public mutating func set(_ app: String, _ record: FetchRecord) {
        records[app] = record
        reschedule(app)
    }

    /// Forgets an app.
    public mutating func remove(_ app: String) {
        records[app] = nil
        held.remove(app)
        if let number = numbers[app] { queue.cancel(number) }
    }

    /// Keeps an app out of the schedule until ``release(_:)`` (it is not eligible now).
    public mutating func hold(_ app: String) {
        held.insert(app)
        if let number = numbers[app] { queue.cancel(number) }
    }

    private mutating func number(of app: String) -> Int {
        if let number = numbers[app] { return number }
        names.append(app)
        numbers[app] = names.count - 1
        return names.count - 1
    }

    /// Puts a held app back into the schedule.
    public mutating func release(_ app: String) {
        guard held.remove(app) != nil else { return }
        reschedule(app)
    }

    public func isHeld(_ app: String) -> Bool { held.contains(app) }

    private mutating func reschedule(_ app: String) {
        let number = number(of: app)
        if !held.contains(app), let next = nextFetch(of: app) {
            queue.schedule(number, at: next)
        } else {
            queue.cancel(number)
        }
    }

    /// When the machine next needs to wake for a fetch (realtime µs).
    public mutating func nextWake() -> UInt64? {
        queue.earliest()
    }

    /// The apps to wake at `now`: every app due by now plus the coalescing
    /// window, if any app is due by now; they leave the queue (``set(_:_:)``
    /// after the wake puts them back).
    public mutating func takeDue(at now: UInt64) -> [String] {
        guard let earliest = queue.earliest(), earliest <= now else { return [] }
        let horizon = now &+ UInt64(coalesceWindow * 1_000_000)
        var due: [String] = []
        while let number = queue.popDue(at: horizon) { due.append(names[number]) }
        return due
    }
}
