import CBgTaskShim
import Glibc

/// Random bytes from the kernel's generator, read 4 KiB at a time.
///
/// A wake token takes 16 bytes, and a wake is on the path of every push and
/// every location event: one `getrandom(2)` per 256 tokens instead of two per
/// token. The bytes are as unguessable as the kernel's; each is handed out
/// once and overwritten with zero when taken. Loop-confined, like the daemon.
final class RandomPool {
    /// Reads up to `count` random bytes into the buffer: how many it read, or −errno.
    typealias Reader = (UnsafeMutableRawPointer, Int) -> Int

    private(set) var bytes = [UInt8](repeating: 0, count: 4096)
    private var next = 4096
    private let read: Reader

    /// A pool filled by `read` (the kernel's `getrandom(2)`; tests give their own).
    init(read: @escaping Reader = { bgt_getrandom($0, $1) }) {
        self.read = read
    }

    /// Two 64-bit random words, never handed out before.
    func next128() -> (UInt64, UInt64) {
        if next + 16 > bytes.count { refill() }
        defer { next += 16 }
        return bytes.withUnsafeMutableBytes { buffer in
            let words = (buffer.loadUnaligned(fromByteOffset: next, as: UInt64.self),
                         buffer.loadUnaligned(fromByteOffset: next + 8, as: UInt64.self))
            // Nothing handed out stays in memory to be read back later.
            buffer.baseAddress!.advanced(by: next).initializeMemory(as: UInt8.self, repeating: 0, count: 16)
            return words
        }
    }

    private func refill() {
        var filled = 0
        bytes.withUnsafeMutableBytes { buffer in
            while filled < buffer.count {
                let got = read(buffer.baseAddress! + filled, buffer.count - filled)
                if got > 0 { filled += got } else if got != -Int(EINTR) { break }
            }
        }
        if filled < bytes.count {
            // getrandom(2) failing is not expected on a kernel this daemon runs on
            // (3.17+); the standard library's generator traps rather than guesses.
            var generator = SystemRandomNumberGenerator()
            for index in filled..<bytes.count { bytes[index] = generator.next() }
        }
        next = 0
    }
}
