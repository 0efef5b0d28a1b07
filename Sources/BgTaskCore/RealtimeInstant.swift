/// A point on the wall clock (CLOCK_REALTIME), in microseconds since the Unix
/// epoch: what plugins schedule with and usage history is recorded in. Unlike
/// ``MonotonicInstant`` it goes on while the machine sleeps, and may jump.
public struct RealtimeInstant: Comparable, Hashable, Sendable, CustomStringConvertible {
    public var microseconds: UInt64

    public init(microseconds: UInt64) {
        self.microseconds = microseconds
    }

    /// The instant `duration` later; negative durations move back; both saturate.
    public static func + (lhs: RealtimeInstant, rhs: Duration) -> RealtimeInstant {
        RealtimeInstant(microseconds: (MonotonicInstant(microseconds: lhs.microseconds) + rhs).microseconds)
    }

    public static func < (lhs: RealtimeInstant, rhs: RealtimeInstant) -> Bool { lhs.microseconds < rhs.microseconds }

    public var description: String { "\(microseconds) µs since the epoch" }
}
