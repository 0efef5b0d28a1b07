import BgTaskTransferCore
import Testing

/// Pausing a transfer to make room for another app's, with a manual clock.
@Suite struct RoomRespiteTests {
    static let second: UInt64 = 1_000_000

    @Test func aTransferNeverPausedMayBe() {
        #expect(RoomRespite().mayPause("t1", at: 5 * Self.second))
    }

    /// The respite runs from when the transfer got its slot back: one that
    /// waited longer than the respite for its slot was paused again at once.
    @Test func theRespiteRunsFromTheRestartNotFromThePause() {
        var respite = RoomRespite()
        respite.paused("t1")
        #expect(!respite.mayPause("t1", at: 0), "waiting for its slot, it is not running anyway")
        let restart = 300 * Self.second
        respite.started("t1", at: restart)
        #expect(!respite.mayPause("t1", at: restart))
        #expect(!respite.mayPause("t1", at: restart + RoomRespite.respite - 1))
        #expect(respite.mayPause("t1", at: restart + RoomRespite.respite))
        #expect(respite.mayPause("t2", at: restart), "others are not held back")
    }

    @Test func aStartThatWasNotAfterAPauseChangesNothing() {
        var respite = RoomRespite()
        respite.started("t1", at: 10 * Self.second)
        #expect(respite.mayPause("t1", at: 10 * Self.second))
        #expect(respite.count == 0)
    }

    @Test func aClockSetBackKeepsTheRespite() {
        var respite = RoomRespite()
        respite.paused("t1")
        respite.started("t1", at: 1_000 * Self.second)
        #expect(!respite.mayPause("t1", at: 10 * Self.second))
    }

    @Test func whatItKeepsIsForgottenAndPruned() {
        var respite = RoomRespite()
        respite.paused("a")
        respite.paused("b")
        respite.started("b", at: 0)
        respite.forget("a")
        #expect(respite.count == 1)
        respite.prune(at: RoomRespite.respite - 1)
        #expect(respite.count == 1)
        respite.prune(at: RoomRespite.respite)
        #expect(respite.count == 0)
    }
}
