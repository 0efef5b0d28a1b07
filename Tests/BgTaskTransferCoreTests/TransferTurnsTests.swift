import BgTaskTransferCore
import Testing

/// Turns of transfers holding a slot, with a manual clock.
@Suite struct TransferTurnsTests {
    static let second: UInt64 = 1_000_000

    @Test func aTurnIsHadAfterItsLengthFromTheStart() {
        var turns = TransferTurns(turn: 300 * Self.second)
        #expect(!turns.hasHadTurn("t1", at: 0), "not running")
        turns.started("t1", at: 10 * Self.second)
        #expect(!turns.hasHadTurn("t1", at: 309 * Self.second))
        #expect(!turns.hasHadTurn("t1", at: 310 * Self.second - 1))
        #expect(turns.hasHadTurn("t1", at: 310 * Self.second))
        #expect(turns.startedAt("t1") == 10 * Self.second)
    }

    @Test func aNewAttemptStartsANewTurn() {
        var turns = TransferTurns(turn: 60 * Self.second)
        turns.started("t1", at: 0)
        turns.stopped("t1")
        #expect(!turns.hasHadTurn("t1", at: 100 * Self.second), "stopped: it holds no slot")
        turns.started("t1", at: 100 * Self.second)
        #expect(!turns.hasHadTurn("t1", at: 159 * Self.second))
        #expect(turns.hasHadTurn("t1", at: 160 * Self.second))
    }

    @Test func aClockSetBackIsNoTurnHad() {
        var turns = TransferTurns(turn: 60 * Self.second)
        turns.started("t1", at: 1_000 * Self.second)
        #expect(!turns.hasHadTurn("t1", at: 10 * Self.second))
    }

    @Test func whatItKeepsIsWhatRuns() {
        var turns = TransferTurns(turn: 1)
        turns.started("a", at: 0)
        turns.started("b", at: 0)
        turns.started("a", at: 5)
        #expect(turns.count == 2)
        turns.stopped("a")
        turns.stopped("b")
        turns.stopped("c")
        #expect(turns.count == 0)
    }
}
