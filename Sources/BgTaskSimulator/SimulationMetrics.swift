/// What a simulation cost and what users saw (docs/DESIGN.md §8).
///
/// Staleness is measured at each open: how long the app had been out of
/// date, i.e. the age of the oldest content it lacked, 0 if none. The p90 is
/// the nearest-rank percentile: the ⌈0.9·n⌉-th smallest of the n values.
public struct SimulationMetrics: Sendable, Equatable {
    /// Background fetches performed (`fetch_wakes`).
    public var fetchWakes: Int
    /// Distinct instants at which any background work ran (`wake_events`):
    /// fetches at one instant count once, with a push at that instant too.
    public var wakeEvents: Int
    /// Fetches that found nothing new (`nodata_fetches`).
    public var nodataFetches: Int
    /// Mean staleness at open, seconds (`mean_staleness_s`).
    public var meanStalenessS: Double
    /// 90th percentile (nearest rank) of staleness at open, seconds (`p90_staleness_s`).
    public var p90StalenessS: Double
    /// Opens in the trace (`opens`).
    public var opens: Int
    /// Fetches refused because they broke a rule (not in ``json``; 0 for a correct planner).
    public var ruleViolations: Int
    /// Silent pushes that woke an app (not in ``json``).
    public var pushWakes: Int

    public init(
        fetchWakes: Int, wakeEvents: Int, nodataFetches: Int, meanStalenessS: Double, p90StalenessS: Double,
        opens: Int, ruleViolations: Int = 0, pushWakes: Int = 0
    ) {
        self.fetchWakes = fetchWakes
        self.wakeEvents = wakeEvents
        self.nodataFetches = nodataFetches
        self.meanStalenessS = meanStalenessS
        self.p90StalenessS = p90StalenessS
        self.opens = opens
        self.ruleViolations = ruleViolations
        self.pushWakes = pushWakes
    }

    /// The JSON names of docs/DESIGN.md §8, in its order.
    public static let jsonKeys = ["fetch_wakes", "wake_events", "nodata_fetches", "mean_staleness_s", "p90_staleness_s", "opens"]

    /// One JSON object with exactly the six keys of docs/DESIGN.md §8 (seconds rounded to ms).
    public var json: String {
        let values = [
            String(fetchWakes), String(wakeEvents), String(nodataFetches),
            Self.seconds(meanStalenessS), Self.seconds(p90StalenessS), String(opens),
        ]
        return "{" + zip(Self.jsonKeys, values).map { "\"\($0)\":\($1)" }.joined(separator: ",") + "}"
    }

    /// A number of seconds rounded to the millisecond, as JSON.
    static func seconds(_ value: Double) -> String {
        TraceEvent.number((value * 1000).rounded() / 1000)
    }

    /// The nearest-rank percentile `p` (0…1) of `values`: the ⌈p·n⌉-th smallest; 0 when empty.
    public static func percentile(_ p: Double, of values: [Double]) -> Double {
        guard !values.isEmpty else { return 0 }
        let sorted = values.sorted()
        // The epsilon keeps 0.9 · 30 = 27.000000000000004 at rank 27.
        let rank = max(1, Int((p * Double(sorted.count) - 1e-9).rounded(.up)))
        return sorted[min(rank, sorted.count) - 1]
    }

    /// The mean of `values`; 0 when empty.
    public static func mean(of values: [Double]) -> Double {
        values.isEmpty ? 0 : values.reduce(0, +) / Double(values.count)
    }
}
