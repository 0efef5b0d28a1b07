import BgTaskFetchCore
import BgTaskCore

/// The fetch policies `bgtaskd-sim` compares (docs/DESIGN.md §8).
public enum SimulationPolicy: String, Sendable, CaseIterable {
    /// bgtaskd's own ``BgTaskCore/AdaptivePlanner``, as the daemon runs it.
    case adaptive
    /// ``NaivePlanner``: every app at its interval, no learning, no coalescing.
    case naive
    /// ``OraclePlanner``: knows the trace, fetches right before the opens that need it.
    case oracle

    /// Simulates `trace` under this policy (`tuning` applies to adaptive).
    public func run(_ trace: Trace, floor: Double, tuning: PlannerTuning = .init()) -> SimulationResult {
        let simulator = Simulator(trace: trace, floor: floor)
        switch self {
        case .adaptive:
            var planner = AdaptivePlanner(floor: floor, utcOffset: 0)
            tuning.apply(to: &planner)
            return simulator.run(&planner)
        case .naive:
            var planner = NaivePlanner(floor: floor)
            return simulator.run(&planner)
        case .oracle:
            var planner = OraclePlanner(trace: trace, floor: floor)
            return simulator.run(&planner)
        }
    }
}
