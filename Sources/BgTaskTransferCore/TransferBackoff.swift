/// How long a transfer waits before trying again after the network failed it
/// or the server answered 5xx/429: 1 s, doubling, at most 5 minutes, or
/// longer when the server's Retry-After asks (at most an hour). A shorter
/// Retry-After does not cut the wait: `Retry-After: 0` on every answer made
/// a retry loop that took a core and wrote the database each time.
public enum TransferBackoff {
    public static let first: Double = 1
    public static let longest: Double = 300
    public static let longestRetryAfter: Double = 3600

    /// Seconds to wait after the `attempt`-th failure (1-based).
    public static func delay(afterAttempt attempt: Int, retryAfter: Double? = nil) -> Double {
        let exponent = min(max(attempt - 1, 0), 30)
        let own = min(first * Double(1 << exponent), longest)
        guard let retryAfter, retryAfter.isFinite else { return own }
        return max(own, min(retryAfter, longestRetryAfter))
    }

    /// Whether an HTTP status is worth another attempt (the server may recover).
    public static func isTransient(status: Int) -> Bool { status == 408 || status == 429 || (500...599).contains(status) }
}
