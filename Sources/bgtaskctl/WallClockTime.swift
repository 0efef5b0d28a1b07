import Foundation

/// Formats a moment on the wall clock (CLOCK_REALTIME µs, as the daemon's
/// `*_usec` values) for people: local time and how far away it is,
/// `14:32:05 (in 14m)`, `Mar 3 09:00 (in 2d 3h)`, `14:02:11 (3m ago)`.
enum WallClockTime {
    static func text(microseconds: UInt64, now: Date = Date()) -> String {
        let date = Date(timeIntervalSince1970: TimeInterval(microseconds) / 1_000_000)
        return "\(clock(date, now: now)) (\(relative(date.timeIntervalSince(now))))"
    }

    /// `in 42s`, `in 14m`, `in 2h 5m`, `in 3d 4h`, `now`, `3m ago`.
    static func relative(_ seconds: TimeInterval) -> String {
        guard seconds.isFinite else { return "never" }
        if seconds.magnitude < 0.5 { return "now" }
        let span = span(seconds)
        return seconds > 0 ? "in \(span)" : "\(span) ago"
    }

    /// A duration without direction: `0s`, `42s`, `14m`, `2h 5m`, `3d 4h`.
    static func span(_ seconds: TimeInterval) -> String {
        // Beyond 30,000 years (a client's or a sender's extreme value) Int would overflow.
        guard seconds.isFinite, seconds.magnitude < 1e12 else { return "∞" }
        let whole = Int(seconds.magnitude.rounded())
        switch whole {
        case ..<60: return "\(whole)s"
        case ..<3600: return "\(whole / 60)m"
        case ..<86400: return whole % 3600 / 60 == 0 ? "\(whole / 3600)h" : "\(whole / 3600)h \(whole % 3600 / 60)m"
        default: return whole % 86400 / 3600 == 0 ? "\(whole / 86400)d" : "\(whole / 86400)d \(whole % 86400 / 3600)h"
        }
    }

    /// The local time of day for today, with the date otherwise (and the year, when it is not this one).
    private static func clock(_ date: Date, now: Date) -> String {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = .current
        let calendar = Calendar.current
        // The year when it is not this one: a far expiration read as a date in the next few months.
        formatter.dateFormat = calendar.isDate(date, inSameDayAs: now) ? "HH:mm:ss"
            : calendar.component(.year, from: date) == calendar.component(.year, from: now) ? "MMM d HH:mm" : "MMM d yyyy HH:mm"
        return formatter.string(from: date)
    }
}
