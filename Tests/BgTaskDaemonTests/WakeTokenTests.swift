@testable import BgTaskDaemon
import Glibc
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

    /// A short read and an interrupted one still fill the pool in order;
    /// every byte is handed out once and zeroed once taken.
    @Test func shortAndInterruptedReadsFillThePoolInOrder() {
        var calls = 0
        let pool = RandomPool { buffer, count in
            calls += 1
            switch calls {
            case 1:  // A short read: the first 1,000 bytes count 0, 1, 2…
                for i in 0..<1000 { buffer.storeBytes(of: UInt8(truncatingIfNeeded: i), toByteOffset: i, as: UInt8.self) }
                return 1000
            case 2: return -Int(EINTR)
            default:  // The rest, counting on.
                for i in 0..<count { buffer.storeBytes(of: UInt8(truncatingIfNeeded: 1000 + i), toByteOffset: i, as: UInt8.self) }
                return count
            }
        }
        var seen: [UInt8] = []
        for token in 0..<256 {
            let (a, b) = pool.next128()
            withUnsafeBytes(of: a.littleEndian) { seen += $0 }
            withUnsafeBytes(of: b.littleEndian) { seen += $0 }
            #expect(pool.bytes[(16 * token)..<(16 * token + 16)].allSatisfy { $0 == 0 }, "token \(token) left in the pool")
        }
        #expect(calls == 3)
        #expect(seen.count == 4096)
        #expect(seen.indices.first { seen[$0] != UInt8(truncatingIfNeeded: $0) } == nil, "the first byte out of order")
        // The 257th token refills.
        _ = pool.next128()
        #expect(calls == 4)
    }

    /// A read that fails (not EINTR) does not spin and hands out no byte
    /// it did not get: the rest comes from the standard library's generator.
    @Test func aFailingReadFallsBackInsteadOfSpinning() {
        var calls = 0
        let pool = RandomPool { buffer, _ in
            calls += 1
            guard calls == 1 else { return -Int(EIO) }
            buffer.initializeMemory(as: UInt8.self, repeating: 0xAB, count: 16)
            return 16
        }
        let first = pool.next128()
        #expect(first == (0xABAB_ABAB_ABAB_ABAB, 0xABAB_ABAB_ABAB_ABAB))
        #expect(calls == 2)
        // The rest of the pool is not zeros (what a failed read leaves) nor the first bytes again.
        let rest = (0..<255).map { _ in pool.next128() }
        #expect(Set(rest.map { "\($0.0)-\($0.1)" }).count == 255)
        #expect(!rest.contains { $0 == (0, 0) || $0 == first })
    }
}
