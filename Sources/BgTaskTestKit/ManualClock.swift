public import BgTaskCore

/// A clock that moves only when a test tells it to. A class, so the engine
/// under test and the test share one instance.
public final class ManualClock: MonotonicClock, @unchecked Sendable {
    /// The current instant; starts at 1000 s so that subtracting small durations stays positive.
    public private(set) var now: MonotonicInstant

    public init(start: MonotonicInstant = MonotonicInstant(microseconds: 1_000_000_000)) {
        now = start
    }

    /// Moves the clock forward by `duration`.
    public func advance(by duration: Duration) {
        now = now + duration
    }

    /// Moves the clock to `instant`, which must not be in the past.
    public func advance(to instant: MonotonicInstant) {
        precondition(instant >= now, "a monotonic clock does not go back")
        now = instant
    }
}
