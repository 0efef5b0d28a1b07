import BgTaskLocationCore
import Testing

/// Significant changes: 500 m from the last reported position, and at most one per 300 s.
struct SignificantChangeFilterTests {
    static let second: UInt64 = 1_000_000
    let start = GeoCoordinate(latitude: 40.4168, longitude: -3.7038)

    func fix(_ metres: Double, at seconds: UInt64, accuracy: Double = 30) -> LocationFix {
        LocationFix(coordinate: start.moved(metres: metres, bearing: 45), accuracy: accuracy, time: seconds * Self.second)
    }

    @Test func distanceAndIntervalBothCount() {
        var filter = SignificantChangeFilter(minimumDistance: 500, minimumInterval: 300 * Self.second)
        let reported = [
            fix(0, at: 0),  // the first fix after starting
            fix(2000, at: 100),  // far, but too soon
            fix(400, at: 400),  // late enough, but not far enough
            fix(2000, at: 400),
            fix(2300, at: 800),  // 300 m from the last reported one
            fix(2600, at: 800),
        ].map { filter.consider($0) }
        #expect(reported == [true, false, false, true, false, true])
    }

    /// A big move during the interval was dropped for good: with GeoClue
    /// reporting only movement, a device that stopped there never had its
    /// new position reported. It is reported when the interval is over,
    /// unless the device came back meanwhile.
    @Test func aMoveTooSoonIsReportedWhenTheIntervalIsOver() {
        var filter = SignificantChangeFilter(minimumDistance: 500, minimumInterval: 300 * Self.second)
        let first = filter.consider(fix(0, at: 0))
        let tooSoon = filter.consider(fix(2000, at: 100))
        #expect(first && !tooSoon)
        #expect(filter.deferredDue == 300 * Self.second)
        let early = filter.takeDeferred(at: 299 * Self.second)
        #expect(early == nil)
        let reported = filter.takeDeferred(at: 300 * Self.second)
        #expect(reported?.coordinate == fix(2000, at: 0).coordinate && reported?.time == 300 * Self.second)
        #expect(filter.deferred == nil && filter.lastReported == reported)
        // Came back before the interval was over: nothing to report.
        let away = filter.consider(fix(4000, at: 400))
        let back = filter.consider(fix(2100, at: 450))
        #expect(!away && !back)
        let none = filter.takeDeferred(at: 600 * Self.second)
        #expect(none == nil)
    }

    /// The last report stored while the clock ran ahead, then the clock set
    /// back: the interval counts from the first fix after that. Before, no
    /// fix earlier than the stored one counted, until the clock caught up.
    @Test func aClockSetBackCountsTheIntervalFromTheNextFix() {
        var filter = SignificantChangeFilter(minimumDistance: 500, minimumInterval: 300 * Self.second)
        filter.restore(fix(0, at: 10_000))
        let moved = filter.consider(fix(5000, at: 5000))
        #expect(!moved, "within the interval of the report, as far as anyone can tell")
        let early = filter.takeDeferred(at: 5299 * Self.second)
        let due = filter.takeDeferred(at: 5300 * Self.second)
        #expect(early == nil && due?.time == 5300 * Self.second)
        let next = filter.consider(fix(10_000, at: 5600))
        #expect(next)
    }

    @Test func inaccurateFixesProveNothing() {
        var filter = SignificantChangeFilter(minimumDistance: 500, minimumInterval: 0)
        let reported = [
            fix(0, at: 0, accuracy: .nan), fix(0, at: 0, accuracy: .greatestFiniteMagnitude), fix(0, at: 0, accuracy: 501),
            fix(0, at: 0), fix(800, at: 10, accuracy: 900), fix(800, at: 10, accuracy: 50),
        ].map { filter.consider($0) }
        #expect(reported == [false, false, false, true, false, true])
    }
}
