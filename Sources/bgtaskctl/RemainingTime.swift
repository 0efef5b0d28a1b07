import BgTaskProtocol

/// Formats background time left the way people read it: `59.3s`,
/// `4m 59.3s`, `1h 0m 5.0s`, `2d 3h 0m 0.0s`, and `∞ (active)` for the
/// DBL_MAX the daemon reports while an app is not in the background.
enum RemainingTime {
    static func text(seconds: Double) -> String {
        if seconds.isNaN { return "?" }
        // Run out (the daemon sends small negatives; -inf from an impostor trapped the conversion below).
        if seconds <= 0 { return "0.0s" }
        if seconds >= BgTaskNames.unlimitedTime { return "∞ (active)" }
        // Beyond 30 000 years nobody counts the tenths (and Int would overflow).
        if seconds > 1e12 { return "∞" }
        // Round once, to tenths, so 299.96 s reads 5m 0.0s and not 4m 60.0s.
        let tenths = max(0, Int((seconds * 10).rounded()))
        let secondsText = "\(tenths % 600 / 10).\(tenths % 10)s"
        let minutes = tenths / 600
        if minutes == 0 { return secondsText }
        let hours = minutes / 60
        if hours == 0 { return "\(minutes)m \(secondsText)" }
        let days = hours / 24
        if days == 0 { return "\(hours)h \(minutes % 60)m \(secondsText)" }
        return "\(days)d \(hours % 24)h \(minutes % 60)m \(secondsText)"
    }
}
