import Glibc
import NIOCore
import Synchronization

/// An upload's body: the source file read in chunks as the client sends them,
/// never whole in memory; `sent` hears how far it got (throttled).
///
/// The HTTP client may go on reading the body after the request has returned
/// (a server that answers 2xx before it has read the body), from a task of
/// its own. So the body owns its descriptor (a duplicate, closed when the
/// last reader lets it go: closed earlier, its number could be another file's
/// by then, sent to this server), and ``end()`` stops it once the upload has
/// its answer.
struct FileChunks: AsyncSequence, Sendable {
    typealias Element = ByteBuffer
    let source: Source
    let size: UInt64
    let chunk: Int
    let sent: @Sendable (UInt64) -> Void

    /// The body's own descriptor, and whether the upload has its answer.
    final class Source: Sendable {
        let fd: Int32
        private let ended = Mutex(false)
        /// When the client last asked for a chunk (NIO uptime ns), and
        /// whether it has had the whole body.
        private let lastAsked = Mutex(NIODeadline.now().uptimeNanoseconds)
        private let read = Mutex(false)

        /// Duplicates `fd`; nil when that fails.
        init?(duplicating fd: Int32) {
            let own = fcntl(fd, F_DUPFD_CLOEXEC, 0)
            guard own >= 0 else { return nil }
            self.fd = own
        }

        /// The client asked for more (it asks only as the server takes what it sent).
        func asked(all: Bool = false) {
            lastAsked.withLock { $0 = NIODeadline.now().uptimeNanoseconds }
            if all { read.withLock { $0 = true } }
        }

        /// Whether the whole body went to the client.
        var isRead: Bool { read.withLock { $0 } }

        /// Nanoseconds since the client last asked for a chunk.
        var idle: UInt64 { NIODeadline.now().uptimeNanoseconds &- lastAsked.withLock { $0 } }

        deinit { close(fd) }

        /// No more of the body is read: the upload has its answer.
        func end() { ended.withLock { $0 = true } }

        var hasEnded: Bool { ended.withLock { $0 } }
    }

    /// Ends the body (see ``Source/end()``).
    func end() { source.end() }

    struct Iterator: AsyncIteratorProtocol {
        let body: FileChunks
        var offset: UInt64 = 0
        var lastReport: UInt64 = 0

        mutating func next() async throws -> ByteBuffer? {
            body.source.asked(all: offset >= body.size)
            guard offset < body.size else { return nil }
            try Task.checkCancellation()
            // The server answered before it read everything: the rest is not sent.
            guard !body.source.hasEnded else { throw AnsweredEarly() }
            let wanted = Int(Swift.min(UInt64(body.chunk), body.size - offset))
            var buffer = ByteBufferAllocator().buffer(capacity: wanted)
            let offset = self.offset
            let fd = body.source.fd
            let read = buffer.writeWithUnsafeMutableBytes(minimumWritableBytes: wanted) { bytes in
                Swift.max(0, pread(fd, bytes.baseAddress!, wanted, off_t(offset)))
            }
            // A file that shrank under us cannot fill the length promised: fail the attempt.
            guard read > 0 else { throw FileShrank() }
            self.offset += UInt64(read)
            let now = NIODeadline.now().uptimeNanoseconds
            if now &- lastReport >= HTTPTransferRunner.progressInterval {
                lastReport = now
                body.sent(self.offset)
            }
            return buffer
        }
    }

    struct FileShrank: Error, CustomStringConvertible {
        var description: String { "the source file shrank while it was being sent" }
    }

    struct AnsweredEarly: Error, CustomStringConvertible {
        var description: String { "the server answered before it had read the whole body" }
    }

    func makeAsyncIterator() -> Iterator { Iterator(body: self) }
}
