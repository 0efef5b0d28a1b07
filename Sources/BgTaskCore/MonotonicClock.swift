/// The clock the core reads. The daemon injects CLOCK_MONOTONIC; tests inject a
/// manual clock that only moves when told to.
public protocol MonotonicClock {
    /// The current instant.
    var now: MonotonicInstant { get }
}
