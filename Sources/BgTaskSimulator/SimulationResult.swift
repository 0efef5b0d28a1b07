/// Everything a simulation measured: the metrics, and the detail behind
/// them for tests and figures.
public struct SimulationResult: Sendable {
    public var metrics: SimulationMetrics
    /// Every fetch and push that ran, in time order.
    public var runs: [BackgroundRun]
    /// Every fetch refused for breaking a rule, in time order.
    public var violations: [RuleViolation]
    /// Staleness at each open (seconds), per app, per trace day (day d is t ∈ [d·86400, (d+1)·86400)).
    public var staleness: [String: [[Double]]]
    /// Every open, in time order.
    public var opens: [OpenSample]

    public init(metrics: SimulationMetrics, runs: [BackgroundRun], violations: [RuleViolation], staleness: [String: [[Double]]],
                opens: [OpenSample] = []) {
        self.metrics = metrics
        self.runs = runs
        self.violations = violations
        self.staleness = staleness
        self.opens = opens
    }

    /// The app's mean staleness at open for each day; nil for a day without opens.
    public func dailyMeanStaleness(of app: String, days: Int) -> [Double?] {
        let perDay = staleness[app] ?? []
        return (0..<days).map { day in
            day < perDay.count && !perDay[day].isEmpty ? SimulationMetrics.mean(of: perDay[day]) : nil
        }
    }
}
