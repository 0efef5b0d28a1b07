/// Order statistics of a set of latency samples in microseconds.
///
/// Percentiles use the nearest-rank method: p99 of 2,000 samples is the
/// 1,980th smallest, so 20 samples lie above it.
struct LatencyStats {
    private let sorted: [Double]

    init(_ samples: [Double]) {
        sorted = samples.sorted()
    }

    var count: Int { sorted.count }
    var median: Double { percentile(50) }
    var p90: Double { percentile(90) }
    var p99: Double { percentile(99) }
    var max: Double { sorted.last ?? .nan }
    var min: Double { sorted.first ?? .nan }

    /// The smallest sample with at least `p` percent of the samples at or below it.
    func percentile(_ p: Double) -> Double {
        guard !sorted.isEmpty else { return .nan }
        let rank = Int((p / 100 * Double(sorted.count)).rounded(.up))
        return sorted[Swift.max(0, Swift.min(sorted.count - 1, rank - 1))]
    }

    /// `p50=… p90=… p99=… max=…` in milliseconds.
    var summaryInMilliseconds: String {
        "n=\(count) p50=\(milliseconds(median)) p90=\(milliseconds(p90)) p99=\(milliseconds(p99)) max=\(milliseconds(max)) ms"
    }

    /// The median of plain values (for the median of rounds): the middle
    /// one, or the mean of the two middle ones for an even count.
    static func median(_ values: [Double]) -> Double {
        let sorted = values.sorted()
        guard !sorted.isEmpty else { return .nan }
        let middle = sorted.count / 2
        return sorted.count % 2 == 1 ? sorted[middle] : (sorted[middle - 1] + sorted[middle]) / 2
    }
}
