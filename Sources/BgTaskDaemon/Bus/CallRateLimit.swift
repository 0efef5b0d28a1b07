/// A token bucket per caller (unique bus name) for a call that costs the
/// daemon far more than its answer costs the caller to ask for: one client
/// pipelining thousands of them held every other caller up for tens of
/// seconds, and their replies piled up in memory. Calls beyond the bucket
/// are refused at once, which costs next to nothing.
struct CallRateLimit {
    /// Calls a caller may make at once.
    let burst: Double
    /// Calls a second a caller gets back.
    let perSecond: Double
    /// Tokens left and when they were counted (monotonic µs), by caller.
    private var buckets: [String: (tokens: Double, at: UInt64)] = [:]

    init(burst: Double, perSecond: Double) {
        self.burst = burst
        self.perSecond = perSecond
    }

    /// Whether `caller` may make the call at `now` (monotonic µs); takes a token if so.
    mutating func allow(_ caller: String, now: UInt64) -> Bool {
        var bucket = buckets[caller] ?? (burst, now)
        let elapsed = Double(now &- min(now, bucket.at)) / 1_000_000
        bucket = (min(burst, bucket.tokens + elapsed * perSecond), now)
        let allowed = bucket.tokens >= 1
        if allowed { bucket.tokens -= 1 }
        buckets[caller] = bucket
        if buckets.count > 4096 { forgetFull(now: now) }
        return allowed
    }

    /// Drops the callers whose buckets have filled up again (they are as if new).
    private mutating func forgetFull(now: UInt64) {
        buckets = buckets.filter { _, bucket in
            bucket.tokens + Double(now &- min(now, bucket.at)) / 1_000_000 * perSecond < burst
        }
    }
}
