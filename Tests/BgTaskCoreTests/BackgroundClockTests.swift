import BgTaskCore
import Testing

@Suite struct BackgroundClockTests {
    let t0 = MonotonicInstant(microseconds: 5_000_000)

    @Test func drainsOnlyWhileRunning() {
        var clock = BackgroundClock(budget: .seconds(10))
        #expect(clock.remaining(at: t0) == .seconds(10))
        #expect(clock.deadline == nil)
        clock.start(at: t0)
        #expect(clock.deadline == t0 + .seconds(10))
        clock.pause(at: t0 + .seconds(4))
        #expect(clock.remaining(at: t0 + .seconds(100)) == .seconds(6))
        clock.start(at: t0 + .seconds(100))
        #expect(clock.deadline == t0 + .seconds(106))
        #expect(clock.remaining(at: t0 + .seconds(200)) == .zero)
        clock.reset()
        #expect(clock.remaining(at: t0) == .seconds(10))
        #expect(!clock.isRunning)
    }

    @Test func instantArithmeticSaturates() {
        #expect(MonotonicInstant(microseconds: 5) - .seconds(1) == MonotonicInstant(microseconds: 0))
        #expect(MonotonicInstant(microseconds: .max - 1) + .seconds(1) == MonotonicInstant(microseconds: .max))
        #expect(t0.duration(since: t0 + .seconds(1)) == .zero)
        #expect((t0 + .milliseconds(1500)).duration(since: t0) == .milliseconds(1500))
    }
}
