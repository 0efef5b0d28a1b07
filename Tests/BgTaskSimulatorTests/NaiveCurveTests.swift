import BgTaskSimulator
import Testing

/// The timer's cost–staleness curve, and reading it at a planner's cost.
struct NaiveCurveTests {
    static let curve = NaiveCurve(points: [
        .init(floor: 1800, fetchWakes: 500, wakeEvents: 100, meanStaleness: 200, p90Staleness: 600),
        .init(floor: 900, fetchWakes: 1000, wakeEvents: 300, meanStaleness: 100, p90Staleness: 300),
        .init(floor: 3600, fetchWakes: 250, wakeEvents: 50, meanStaleness: 400, p90Staleness: 1200),
    ])

    @Test func readsBetweenTheFloorsThatBracketTheCost() {
        #expect(Self.curve.staleness(atFetchWakes: 1000) == .init(mean: 100, p90: 300))
        #expect(Self.curve.staleness(atFetchWakes: 750) == .init(mean: 150, p90: 450))
        #expect(Self.curve.staleness(atFetchWakes: 250) == .init(mean: 400, p90: 1200))
        #expect(Self.curve.staleness(atWakeEvents: 200) == .init(mean: 150, p90: 450))
    }

    @Test func saysNothingBeyondTheCurve() {
        #expect(Self.curve.staleness(atFetchWakes: 249) == nil, "cheaper than the rarest timer")
        #expect(Self.curve.staleness(atFetchWakes: 1001) == nil)
    }

    @Test func aLongerFloorCostsLessOnAGeneratedTrace() throws {
        var generator = TraceGenerator()
        generator.apps = 5
        generator.days = 3
        generator.seed = 2
        let trace = generator.generate()
        let curve = NaiveCurve(trace: trace, floors: NaiveCurve.floors(from: 900))
        #expect(curve.points.count == 13)
        let costs = curve.points.map(\.fetchWakes)
        #expect(costs == costs.sorted(by: >), "\(costs)")
    }
}
