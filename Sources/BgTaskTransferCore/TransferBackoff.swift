/// How long a transfer waits before trying again after the network failed it
/// or the server answered 5xx/429: 1 s, doubling, at most 5 minutes, or what
/// the server's Retry-After asks (at most an hour).
public enum TransferBackoff {
    public static let first: Double = 1
    public static let longest: Double = 300
    public static let longestRetryAfter: Double = 3600

    /// Seconds to wait after the `attempt`-th failure (1-based).
    public static func delay(afterAttempt attempt: Int, retryAfter: Double? = nil) -> Double {
        if let retryAfter, retryAfter.isFinite, retryAfter >= 0 { return min(retryAfter, longestRetryAfter) }
        let exponent = min(max(attempt - 1, 0), 30)
        return min(first * Double(1 << exponent), longest)
    }

    /// Whether an HTTP status is worth another attempt (the server may recover).
    public static func isTransient(status: Int) -> Bool { status == 408 || status == 429 || (500...599).contains(status) }
}
