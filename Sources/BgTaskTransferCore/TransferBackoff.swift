import Foundation

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

    /// Seconds a `Retry-After` value asks to wait from `now` (Unix seconds):
    /// delay-seconds, or an HTTP-date in its preferred form
    /// (`Fri, 27 Nov 2026 22:30:53 GMT`); nil for anything else. A date in
    /// the past asks for no wait.
    public static func retryAfter(_ value: String, now: Double) -> Double? {
        let text = value.trimmingCharacters(in: .whitespaces)
        if !text.isEmpty, text.utf8.allSatisfy({ (0x30...0x39).contains($0) }) { return Double(text) }
        guard let date = httpDate(text) else { return nil }
        return max(date - now, 0)
    }

    private static let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]

    /// An IMF-fixdate as Unix seconds, nil if `text` is none.
    static func httpDate(_ text: String) -> Double? {
        let parts = text.split(separator: " ")
        guard parts.count == 6, parts[0].count == 4, parts[0].hasSuffix(","), parts[5] == "GMT",
              let day = Int(parts[1]), (1...31).contains(day), let monthIndex = months.firstIndex(of: String(parts[2])),
              parts[3].count == 4, let year = Int(parts[3]), year >= 1970
        else { return nil }
        let clock = parts[4].split(separator: ":", omittingEmptySubsequences: false)
        guard clock.count == 3, clock.allSatisfy({ $0.count == 2 }), let hour = Int(clock[0]), let minute = Int(clock[1]),
              let second = Int(clock[2]), hour < 24, minute < 60, second < 61
        else { return nil }
        // Days since 1970-01-01 of a Gregorian date: years counted from March, in 400-year eras.
        let month = monthIndex + 1
        let y = month <= 2 ? year - 1 : year
        let era = y / 400
        let yearOfEra = y - era * 400
        let dayOfYear = (153 * (month + (month > 2 ? -3 : 9)) + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        let days = era * 146_097 + dayOfEra - 719_468
        return Double(days * 86400 + hour * 3600 + minute * 60 + second)
    }

    /// Whether an HTTP status is worth another attempt (the server may recover).
    public static func isTransient(status: Int) -> Bool { status == 408 || status == 429 || (500...599).contains(status) }
}
