/// What a plain timer buys at each cost: the naive policy run at a series of
/// floors, from often (expensive, fresh) to rarely (cheap, stale). A planner
/// is judged against it at equal cost: naive's staleness interpolated at the
/// planner's own `fetch_wakes` (or `wake_events`), not naive's at one floor
/// that costs something else.
public struct NaiveCurve: Sendable {
    /// One naive run.
    public struct Point: Sendable, Equatable {
        public var floor: Double
        public var fetchWakes: Int
        public var wakeEvents: Int
        public var meanStaleness: Double
        public var p90Staleness: Double

        public init(floor: Double, fetchWakes: Int, wakeEvents: Int, meanStaleness: Double, p90Staleness: Double) {
            self.floor = floor
            self.fetchWakes = fetchWakes
            self.wakeEvents = wakeEvents
            self.meanStaleness = meanStaleness
            self.p90Staleness = p90Staleness
        }
    }

    /// Naive staleness at some cost.
    public struct Staleness: Sendable, Equatable {
        public var mean: Double
        public var p90: Double

        public init(mean: Double, p90: Double) {
            self.mean = mean
            self.p90 = p90
        }
    }

    /// The runs, by floor.
    public let points: [Point]

    /// Floors from `floor` up to a day: ×1, 4/3, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 96.
    public static func floors(from floor: Double) -> [Double] {
        [1, 4.0 / 3, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 96].map { floor * $0 }
    }

    /// Runs naive over `trace` at each of `floors`.
    public init(trace: Trace, floors: [Double]) {
        points = floors.sorted().map { floor in
            let metrics = SimulationPolicy.naive.run(trace, floor: floor).metrics
            return Point(
                floor: floor, fetchWakes: metrics.fetchWakes, wakeEvents: metrics.wakeEvents,
                meanStaleness: metrics.meanStalenessS, p90Staleness: metrics.p90StalenessS)
        }
    }

    /// A curve of given points (for tests).
    public init(points: [Point]) {
        self.points = points.sorted { $0.floor < $1.floor }
    }

    /// Naive's staleness at `fetchWakes` background fetches, interpolated
    /// linearly between the two floors whose costs bracket it; nil when no
    /// floor of the curve is that cheap or that dear.
    public func staleness(atFetchWakes cost: Int) -> Staleness? {
        interpolate(Double(cost)) { Double($0.fetchWakes) }
    }

    /// Naive's staleness at `wakeEvents` moments of background work (as above).
    public func staleness(atWakeEvents cost: Int) -> Staleness? {
        interpolate(Double(cost)) { Double($0.wakeEvents) }
    }

    /// The timer's `wake_events` at `fetchWakes` background fetches (as above).
    public func wakeEvents(atFetchWakes cost: Int) -> Double? {
        let sorted = points.sorted { $0.fetchWakes < $1.fetchWakes }
        for (low, high) in zip(sorted, sorted.dropFirst()) where cost >= low.fetchWakes && cost <= high.fetchWakes {
            let span = Double(high.fetchWakes - low.fetchWakes)
            let share = span > 0 ? Double(cost - low.fetchWakes) / span : 0
            return Double(low.wakeEvents) + share * Double(high.wakeEvents - low.wakeEvents)
        }
        return sorted.count == 1 && sorted[0].fetchWakes == cost ? Double(sorted[0].wakeEvents) : nil
    }

    private func interpolate(_ cost: Double, by measure: (Point) -> Double) -> Staleness? {
        // Cheapest first: the cost falls as the floor grows.
        let sorted = points.sorted { measure($0) < measure($1) }
        guard let first = sorted.first, let last = sorted.last, cost >= measure(first), cost <= measure(last) else { return nil }
        for (low, high) in zip(sorted, sorted.dropFirst()) where cost >= measure(low) && cost <= measure(high) {
            let span = measure(high) - measure(low)
            let share = span > 0 ? (cost - measure(low)) / span : 0
            return Staleness(
                mean: low.meanStaleness + share * (high.meanStaleness - low.meanStaleness),
                p90: low.p90Staleness + share * (high.p90Staleness - low.p90Staleness))
        }
        return Staleness(mean: first.meanStaleness, p90: first.p90Staleness)
    }
}
