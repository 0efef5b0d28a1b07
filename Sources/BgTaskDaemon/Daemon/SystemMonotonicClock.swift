import BgTaskCore
import CBgTaskShim

/// CLOCK_MONOTONIC, read live (not sd-event's per-iteration cache), so a
/// deadline that fires is judged by the time it actually fired.
struct SystemMonotonicClock: MonotonicClock {
    var now: MonotonicInstant { MonotonicInstant(microseconds: bgt_monotonic_usec()) }
}
