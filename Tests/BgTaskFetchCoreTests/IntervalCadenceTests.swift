import BgTaskFetchCore
import BgTaskCore
import Testing

/// The beats of the interval timer the adaptive planner keeps time with.
@Suite struct IntervalCadenceTests {
    static let interval: UInt64 = 900_000_000
    static func s(_ seconds: UInt64) -> UInt64 { seconds * 1_000_000 }

    @Test func beatsEveryIntervalFromTheStart() {
        let cadence = IntervalCadence(startingAt: Self.s(100))
        #expect(cadence.next(atOrAfter: Self.s(0), interval: Self.interval) == Self.s(100))
        #expect(cadence.next(atOrAfter: Self.s(100), interval: Self.interval) == Self.s(100))
        #expect(cadence.next(atOrAfter: Self.s(101), interval: Self.interval) == Self.s(1000))
        #expect(cadence.next(atOrAfter: Self.s(1901), interval: Self.interval) == Self.s(2800))
        #expect(cadence.next(atOrAfter: Self.s(5), interval: 0) == nil, "an interval of never has no beat")
        #expect(cadence.next(atOrAfter: .max - 5, interval: Self.interval) == nil, "past the end of time")
    }

    @Test func anOpenThatOutlastsABeatMovesTheBeatToTheClose() {
        var cadence = IntervalCadence(startingAt: Self.s(0))
        cadence.setAppOpen(true, at: Self.s(1000), interval: Self.interval)  // beat at 900 passed
        #expect(cadence.anchor == Self.s(900))
        cadence.setAppOpen(false, at: Self.s(2000), interval: Self.interval)  // 1800 fell due while open
        #expect(cadence.anchor == Self.s(2000))
        #expect(cadence.next(atOrAfter: Self.s(2001), interval: Self.interval) == Self.s(2900))
    }

    @Test func aShortOpenKeepsTheBeat() {
        var cadence = IntervalCadence(startingAt: Self.s(0))
        cadence.setAppOpen(true, at: Self.s(1000), interval: Self.interval)
        cadence.setAppOpen(false, at: Self.s(1500), interval: Self.interval)  // next beat 1800 not yet due
        #expect(cadence.anchor == Self.s(900))
        #expect(cadence.next(atOrAfter: Self.s(1500), interval: Self.interval) == Self.s(1800))
    }

    @Test func sleepAndAnOpenHoldTogether() {
        var cadence = IntervalCadence(startingAt: Self.s(0))
        cadence.setAppOpen(true, at: Self.s(100), interval: Self.interval)
        cadence.setMachineAsleep(true, at: Self.s(200), interval: Self.interval)
        cadence.setAppOpen(false, at: Self.s(5000), interval: Self.interval)
        #expect(cadence.isHeld, "still asleep")
        #expect(cadence.anchor == Self.s(0))
        cadence.setMachineAsleep(false, at: Self.s(9000), interval: Self.interval)
        #expect(!cadence.isHeld)
        #expect(cadence.anchor == Self.s(9000), "what fell due in the night beats at the wake")
    }
}
