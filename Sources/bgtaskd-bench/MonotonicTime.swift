import Glibc

/// CLOCK_MONOTONIC, which is system-wide: instants read in different
/// processes compare directly. It is the clock bgtaskd's deadlines run on.
enum MonotonicTime {
    /// Now, in nanoseconds.
    static func nanoseconds() -> Int64 {
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        return Int64(now.tv_sec) * 1_000_000_000 + Int64(now.tv_nsec)
    }

    /// Microseconds elapsed since `start` (nanoseconds) until now.
    static func microseconds(since start: Int64) -> Double {
        Double(nanoseconds() - start) / 1000
    }

    /// Sleeps `seconds` (restarting after signals).
    static func sleep(seconds: Double) {
        var request = timespec(tv_sec: Int(seconds), tv_nsec: Int((seconds - seconds.rounded(.down)) * 1e9))
        var remaining = timespec()
        while nanosleep(&request, &remaining) != 0 && errno == EINTR { request = remaining }
    }
}
