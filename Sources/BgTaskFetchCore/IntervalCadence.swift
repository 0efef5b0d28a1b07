import BgTaskProtocol
/// The moments a plain interval timer would fetch one app (one systemd timer
/// per app, the simulator's `naive` policy): every interval from when it
/// started, held while the app is open or the machine sleeps, and firing as
/// soon as that ends if it fell due meanwhile. It is only computed, never
/// run. The adaptive planner fetches on these moments near usual opens, so
/// that at such an open an app is never staler than under the timer.
public struct IntervalCadence: Sendable, Equatable {
    /// The timer's last firing (or its start), realtime µs.
    public private(set) var anchor: UInt64
    /// Why it is held (fires nothing): the app is open, the machine sleeps.
    public private(set) var appOpen = false
    public private(set) var machineAsleep = false

    public init(startingAt start: UInt64) {
        anchor = start
    }

    public var isHeld: Bool { appOpen || machineAsleep }

    /// Brings the anchor up to `now`: while running, the timer fired at every
    /// interval up to it. `interval` is in µs; 0 means it never fires.
    public mutating func advance(to now: UInt64, interval: UInt64) {
        guard !isHeld, interval > 0, now >= anchor else { return }
        anchor += (now - anchor) / interval * interval
    }

    /// The app was opened or closed at `now`.
    public mutating func setAppOpen(_ open: Bool, at now: UInt64, interval: UInt64) {
        update(at: now, interval: interval) { $0.appOpen = open }
    }

    /// The machine went to sleep or woke up at `now`.
    public mutating func setMachineAsleep(_ asleep: Bool, at now: UInt64, interval: UInt64) {
        update(at: now, interval: interval) { $0.machineAsleep = asleep }
    }

    /// The first firing at or after `time`, if nothing holds the timer from
    /// now on; nil if it never fires.
    public func next(atOrAfter time: UInt64, interval: UInt64) -> UInt64? {
        guard interval > 0 else { return nil }
        if time <= anchor { return anchor }
        let gap = time - anchor
        let steps = gap / interval + (gap % interval == 0 ? 0 : 1)
        let (span, overflow) = steps.multipliedReportingOverflow(by: interval)
        let (next, past) = anchor.addingReportingOverflow(span)
        return overflow || past ? nil : next
    }

    private mutating func update(at now: UInt64, interval: UInt64, _ change: (inout IntervalCadence) -> Void) {
        advance(to: now, interval: interval)
        let wasHeld = isHeld
        change(&self)
        // Released: what fell due while held fires at once.
        if wasHeld, !isHeld, interval > 0, now >= anchor, now - anchor >= interval { anchor = now }
    }
}
