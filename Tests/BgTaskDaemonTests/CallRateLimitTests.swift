@testable import BgTaskDaemon
import Testing

/// The per-caller token bucket of costly calls.
@Suite struct CallRateLimitTests {
    @Test func aCallerGetsItsBurstThenItsRateAndOthersTheirOwn() {
        var limit = CallRateLimit(burst: 3, perSecond: 2)
        var answers: [Bool] = []
        for _ in 0..<4 { answers.append(limit.allow(":1.1", now: 1_000_000)) }
        #expect(answers == [true, true, true, false])
        let other = limit.allow(":1.2", now: 1_000_000)
        #expect(other, "another caller has its own bucket")
        let early = limit.allow(":1.1", now: 1_400_000)
        #expect(!early, "0.8 of a call back after 0.4 s")
        let back = limit.allow(":1.1", now: 1_500_000)
        #expect(back, "one back after 0.5 s")
        answers = []
        for _ in 0..<4 { answers.append(limit.allow(":1.1", now: 100_000_000)) }
        #expect(answers == [true, true, true, false], "never more than the burst")
        let backwards = limit.allow(":1.1", now: 50)
        #expect(!backwards, "a time before the last call gives nothing back (and does not trap)")
    }
}
