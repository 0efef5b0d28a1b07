/// The wall clock the shell reads, beside the core's ``MonotonicClock``. The
/// daemon injects CLOCK_REALTIME; tests inject a clock of their own.
public protocol WallClock: Sendable {
    /// The current instant.
    var now: RealtimeInstant { get }
}
