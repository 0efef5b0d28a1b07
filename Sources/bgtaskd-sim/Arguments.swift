// Small parsers for option values that ArgumentParser does not know.
enum Arguments {
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
