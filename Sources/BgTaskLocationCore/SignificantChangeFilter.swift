/// Which fixes are significant location changes: the first after monitoring
/// starts, then one that is at least ``minimumDistance`` from the last one
/// reported and at least ``minimumInterval`` after it. A fix whose accuracy
/// is worse than ``minimumDistance`` counts for nothing, the first included.
public struct SignificantChangeFilter: Sendable, Equatable {
    /// Metres (`Location.SignificantChangeM`).
    public var minimumDistance: Double
    /// Realtime µs (`Location.SignificantChangeMinIntervalSec`).
    public var minimumInterval: UInt64
    /// The last fix reported.
    public private(set) var lastReported: LocationFix?

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
        if let last = lastReported {
            guard fix.time >= last.time, fix.time - last.time >= minimumInterval else { return false }
            guard fix.accuracy <= minimumDistance,
                  last.coordinate.distance(to: fix.coordinate) >= minimumDistance else { return false }
        } else if !(fix.accuracy <= minimumDistance) {
            // A first position less sure than a significant distance says nothing yet.
            return false
        }
        lastReported = fix
        return true
    }
}
