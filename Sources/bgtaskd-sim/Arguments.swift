import ArgumentParser

// Small parsers for option values that ArgumentParser does not know.
enum Arguments {
    /// What `--floor` takes: a minute to about 116 days. Below a minute a
    /// timer's ticks made a simulation run without bound (at 1 µs it grew past
    /// 6 GB); at 0 the timer fired only at events, fewer times than at 900 s.
    static let floors = 60.0...1e7
    /// The longest trace `generate` and `figures` make.
    static let maximumDays = 366
    /// The most apps `generate` and `figures` make.
    static let maximumApps = 10_000
    /// The highest rate of content or pushes an app may have (one a minute).
    static let maximumPerDay = 1440.0

    static func checkFloor(_ floor: Double) throws {
        guard floors.contains(floor) else {
            throw ValidationError("--floor must be a number of seconds from 60 to 1e7 (Fetch.MinimumIntervalSec), not \(floor)")
        }
    }

    static func checkSize(apps: Int, days: Int, minimumDays: Int = 1) throws {
        guard (1...maximumApps).contains(apps) else { throw ValidationError("--apps must be from 1 to \(maximumApps), not \(apps)") }
        guard (minimumDays...maximumDays).contains(days) else {
            throw ValidationError("--days must be from \(minimumDays) to \(maximumDays), not \(days)")
        }
    }

    /// "HH:MM" as seconds after midnight.
    static func clock(_ text: String) -> Int? {
        let parts = text.split(separator: ":")
        guard parts.count == 2, let h = Int(parts[0]), let m = Int(parts[1]), (0..<24).contains(h), (0..<60).contains(m) else { return nil }
        return h * 3600 + m * 60
    }

    /// "A-B" (or a single "A") as a closed range.
    static func range(_ text: String) -> ClosedRange<Double>? {
        let parts = text.split(separator: "-", omittingEmptySubsequences: false)
        guard (1...2).contains(parts.count), let low = Double(parts[0]), let high = Double(parts.last!),
            low.isFinite, high.isFinite, low >= 0, low <= high
        else { return nil }
        return low...high
    }
}
