@testable import BgTaskFetchCore
import Testing

/// The planner's spans are Durations; converting them to realtime µs
/// saturates instead of trapping, whatever a tunable or an interval holds.
struct PlannerSpanTests {
    @Test func spansConvertExactlyInRange() {
        #expect(AdaptivePlanner.micros(.seconds(600)) == 600_000_000)
        #expect(AdaptivePlanner.micros(.milliseconds(1500)) == 1_500_000)
        #expect(AdaptivePlanner.micros(seconds: 900) == 900_000_000)
        #expect(AdaptivePlanner.seconds(2_500_000) == 2.5)
        #expect(AdaptivePlanner.wholeSeconds(.milliseconds(5400_999)) == 5400)
    }

    @Test(arguments: [-1.0, -.infinity, .nan, 0])
    func negativeOrUnreadableSecondsAreZero(_ seconds: Double) {
        #expect(AdaptivePlanner.micros(seconds: seconds) == 0)
    }

    @Test func hugeSpansSaturate() {
        #expect(AdaptivePlanner.micros(seconds: .infinity) == 1_000_000_000_000_000_000)
        #expect(AdaptivePlanner.micros(seconds: 1e300) == 1_000_000_000_000_000_000)
        #expect(AdaptivePlanner.micros(.seconds(-10)) == 0)
    }

    @Test func tunablesAreDurations() {
        var planner = AdaptivePlanner(floor: 900, utcOffset: 0)
        #expect(planner.lead == .seconds(600) && planner.otherPullIn == .seconds(600) && planner.grid == .seconds(60))
        planner.margin = .seconds(3600)
        #expect(AdaptivePlanner.micros(planner.margin + .seconds(900)) == 4_500_000_000)
    }

    /// The converted spans follow every change of a tunable, and start converted.
    @Test func convertedSpansFollowTheTunables() {
        var planner = AdaptivePlanner(floor: 900, utcOffset: 0)
        #expect(planner.spans.grid == 60_000_000 && planner.spans.otherPullIn == 600_000_000)
        #expect(planner.spans.lead == 600 && planner.spans.afterClose == 2_700_000_000)
        planner.grid = .seconds(120)
        planner.lead = .seconds(60)
        planner.otherPullIn = .zero
        planner.fallbackCeiling = .seconds(7200)
        #expect(planner.spans.grid == 120_000_000 && planner.spans.lead == 60 && planner.spans.otherPullIn == 0)
        #expect(planner.spans.leadPlusMargin == 1860 && planner.spans.fallbackCeiling == 7200)
    }
}
