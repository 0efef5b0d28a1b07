import Glibc
import NIOCore

/// An upload's body: the source file read in chunks as the client sends them,
/// never whole in memory; `sent` hears how far it got (throttled).
struct FileChunks: AsyncSequence, Sendable {
    typealias Element = ByteBuffer
    let fd: Int32
    let size: UInt64
    let chunk: Int
    let sent: @Sendable (UInt64) -> Void

    struct Iterator: AsyncIteratorProtocol {
        let source: FileChunks
        var offset: UInt64 = 0
        var lastReport: UInt64 = 0

        mutating func next() async throws -> ByteBuffer? {
            guard offset < source.size else { return nil }
            try Task.checkCancellation()
            let wanted = Int(Swift.min(UInt64(source.chunk), source.size - offset))
            var buffer = ByteBufferAllocator().buffer(capacity: wanted)
            let offset = self.offset
            let read = buffer.writeWithUnsafeMutableBytes(minimumWritableBytes: wanted) { bytes in
                Swift.max(0, pread(source.fd, bytes.baseAddress!, wanted, off_t(offset)))
            }
            // A file that shrank under us cannot fill the length promised: fail the attempt.
            guard read > 0 else { throw FileShrank() }
            self.offset += UInt64(read)
            let now = NIODeadline.now().uptimeNanoseconds
            if now &- lastReport >= HTTPTransferRunner.progressInterval {
                lastReport = now
                source.sent(self.offset)
            }
            return buffer
        }
    }

    struct FileShrank: Error, CustomStringConvertible {
        var description: String { "the source file shrank while it was being sent" }
    }

    func makeAsyncIterator() -> Iterator { Iterator(source: self) }
}
