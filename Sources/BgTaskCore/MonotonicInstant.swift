/// A point on the machine's monotonic clock (CLOCK_MONOTONIC), in microseconds.
///
/// Monotonic time stops while the machine is suspended, which is exactly the
/// time bgtaskd budgets: background time counts only while the machine is awake.
public struct MonotonicInstant: Comparable, Hashable, Sendable, CustomStringConvertible {
    /// Microseconds since an arbitrary, fixed origin (boot, for the real clock).
    public var microseconds: UInt64

    public init(microseconds: UInt64) {
        self.microseconds = microseconds
    }

    /// The instant `duration` later; negative durations move back, saturating at zero.
    public static func + (lhs: MonotonicInstant, rhs: Duration) -> MonotonicInstant {
        let delta = rhs.microseconds
        if delta >= 0 {
            let (sum, overflow) = lhs.microseconds.addingReportingOverflow(UInt64(delta))
            return MonotonicInstant(microseconds: overflow ? .max : sum)
        }
        let back = UInt64(-delta)
        return MonotonicInstant(microseconds: lhs.microseconds >= back ? lhs.microseconds - back : 0)
    }

    /// The instant `duration` earlier, saturating at zero.
    public static func - (lhs: MonotonicInstant, rhs: Duration) -> MonotonicInstant {
        lhs + (Duration.zero - rhs)
    }

    /// The time from `earlier` to `self`, zero if `earlier` is later.
    public func duration(since earlier: MonotonicInstant) -> Duration {
        microseconds > earlier.microseconds ? .microseconds(Int64(microseconds - earlier.microseconds)) : .zero
    }

    public static func < (lhs: MonotonicInstant, rhs: MonotonicInstant) -> Bool {
        lhs.microseconds < rhs.microseconds
    }

    public var description: String {
        "\(microseconds / 1_000_000).\(String(microseconds % 1_000_000).leftPadded(to: 6))s"
    }
}

extension Duration {
    /// The duration in whole microseconds (rounded toward zero).
    public var microseconds: Int64 {
        let (seconds, attoseconds) = components
        return seconds * 1_000_000 + attoseconds / 1_000_000_000_000
    }

    /// The duration in seconds, as D-Bus `d` values carry it.
    public var seconds: Double {
        let (seconds, attoseconds) = components
        return Double(seconds) + Double(attoseconds) / 1e18
    }

    /// A duration from seconds given as a `Double`, rounded to microseconds;
    /// saturates instead of trapping (NaN is zero).
    public static func seconds(double value: Double) -> Duration {
        let micros = (value * 1_000_000).rounded()
        if !(micros > -9.2e18) { return .microseconds(value.isNaN ? 0 : Int64.min) }
        if micros >= 9.2e18 { return .microseconds(Int64.max) }
        return .microseconds(Int64(micros))
    }
}

extension String {
    fileprivate func leftPadded(to width: Int) -> String {
        count >= width ? self : String(repeating: "0", count: width - count) + self
    }
}
