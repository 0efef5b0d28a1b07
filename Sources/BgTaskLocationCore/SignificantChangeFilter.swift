/// Which fixes are significant location changes: the first after monitoring
/// starts, then one that is at least ``minimumDistance`` from the last one
/// reported and at least ``minimumInterval`` after it. A fix whose accuracy
/// is worse than ``minimumDistance`` counts for nothing, the first included.
/// A fix far enough that came too soon is not dropped: it is ``deferred``,
/// and reported when the interval is over (``takeDeferred(at:)``) unless a
/// later fix back near the last reported one cancels it; GeoClue reports
/// only movement, so a device that stopped after a big move would otherwise
/// never have its new position reported.
public struct SignificantChangeFilter: Sendable, Equatable {
    /// Metres (`Location.SignificantChangeM`).
    public var minimumDistance: Double
    /// Realtime µs (`Location.SignificantChangeMinIntervalSec`).
    public var minimumInterval: UInt64
    /// The last fix reported.
    public private(set) var lastReported: LocationFix?
    /// The latest fix far enough from ``lastReported`` that came before the
    /// interval was over; not stored (after a restart the next move reports).
    public private(set) var deferred: LocationFix?

    /// When ``deferred`` is due.
    public var deferredDue: UInt64? {
        guard deferred != nil, let last = lastReported else { return nil }
        let (due, overflow) = last.time.addingReportingOverflow(minimumInterval)
        return overflow ? .max : due
    }

    public init(minimumDistance: Double, minimumInterval: UInt64) {
        self.minimumDistance = minimumDistance
        self.minimumInterval = minimumInterval
    }

    /// Takes `fix` as the last one reported (restored after a restart).
    public mutating func restore(_ fix: LocationFix) {
        lastReported = fix
    }

    /// Whether `fix` is to be reported; if so, it becomes the last reported.
    public mutating func consider(_ fix: LocationFix) -> Bool {
        takeBackFuture(fix.time)
        if let last = lastReported {
            guard fix.accuracy <= minimumDistance else { return false }
            guard last.coordinate.distance(to: fix.coordinate) >= minimumDistance else {
                // Back near the last reported position: the move it deferred is undone.
                deferred = nil
                return false
            }
            guard fix.time - last.time >= minimumInterval else {
                deferred = fix
                return false
            }
        } else if !(fix.accuracy <= minimumDistance) {
            // A first position less sure than a significant distance says nothing yet.
            return false
        }
        lastReported = fix
        deferred = nil
        return true
    }

    /// The deferred fix, once it is due at `now`, as reported at `now` (it
    /// becomes the last reported); nil before, or when there is none.
    public mutating func takeDeferred(at now: UInt64) -> LocationFix? {
        takeBackFuture(now)
        guard let fix = deferred, let due = deferredDue, now >= due else { return nil }
        let reported = LocationFix(coordinate: fix.coordinate, accuracy: fix.accuracy, time: now)
        lastReported = reported
        deferred = nil
        return reported
    }

    /// Times after `now` are from a clock that ran ahead and was set back (or
    /// from a damaged record): taken as `now`, so that the interval counts
    /// from there, not from a time that may be years away.
    private mutating func takeBackFuture(_ now: UInt64) {
        if let last = lastReported, last.time > now {
            lastReported = LocationFix(coordinate: last.coordinate, accuracy: last.accuracy, time: now)
        }
        if let fix = deferred, fix.time > now {
            deferred = LocationFix(coordinate: fix.coordinate, accuracy: fix.accuracy, time: now)
        }
    }
}
