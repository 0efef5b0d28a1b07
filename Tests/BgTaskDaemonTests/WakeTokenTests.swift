@testable import BgTaskDaemon
import Testing

/// Wake tokens: what plugins hand apps to complete a wake with.
@Suite struct WakeTokenTests {
    @Test func tokensAre128RandomBitsInLowercaseHex() {
        // 1,000 tokens cross several refills of the pool (256 tokens each).
        let pool = RandomPool()
        let tokens = (0..<1000).map { _ in Daemon.newToken(from: pool) }
        #expect(tokens.allSatisfy { $0.utf8.count == 32 && $0.allSatisfy { "0123456789abcdef".contains($0) } })
        #expect(Set(tokens).count == tokens.count)
        // Every digit position varies (no fixed padding, no digit dropped).
        for position in 0..<32 {
            let digits = Set(tokens.map { Array($0.utf8)[position] })
            #expect(digits.count > 8, "position \(position) takes only \(digits.count) values")
        }
    }
}
