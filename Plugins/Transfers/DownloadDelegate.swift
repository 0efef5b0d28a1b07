import AsyncHTTPClient
import BgTaskTransferCore
import Glibc
import NIOCore
import NIOHTTP1

/// Writes one download attempt's body into its partial file, straight from
/// the HTTP client's event loop: no hop per chunk, as fast as the socket
/// and the disk allow. Decides from the response head whether the bytes
/// continue the partial file (206 from where it ends), replace it (200), or
/// cannot be used (any other status: the body is read and dropped).
final class DownloadDelegate: HTTPClientResponseDelegate, @unchecked Sendable {
    typealias Response = TransferOutcome

    // Touched only on the request's event loop (the client calls a delegate there, in order).
    private let job: TransferJob
    private let fd: Int32
    private var have: UInt64
    private let report: @Sendable (TransferReport) -> Void
    /// Set when the head or a write decided how the attempt ends; read once the request is over.
    private(set) var verdict: TransferOutcome?
    private var done: UInt64 = 0
    private var total: UInt64 = 0
    private var lastReport: UInt64 = 0
    private var status = 0
    /// Where write-behind has started the disk on its way (see ``writeBehind``).
    private var flushedTo: UInt64 = 0
    /// Bytes between two write-behind requests.
    static let writeBehind: UInt64 = 8 << 20

    init(job: TransferJob, fd: Int32, have: UInt64, report: @escaping @Sendable (TransferReport) -> Void) {
        self.job = job
        self.fd = fd
        self.have = have
        self.report = report
    }

    func didReceiveHead(task: HTTPClient.Task<Response>, _ head: HTTPResponseHead) -> EventLoopFuture<Void> {
        decide(head)
        // A body that will be dropped is not worth reading (a whole file sent instead of a range).
        if verdict != nil { task.cancel() }
        return task.eventLoop.makeSucceededVoidFuture()
    }

    /// Sets ``verdict`` when the answer cannot continue the partial file;
    /// otherwise positions the file and reports the start.
    private func decide(_ head: HTTPResponseHead) {
        let status = Int(head.status.code)
        self.status = status
        var restarted = false
        switch status {
        case 206 where have > 0:
            guard let range = head.headers.first(name: "Content-Range").flatMap(ContentRange.init), range.start == have else {
                // Not the bytes asked for: the next attempt starts from zero.
                _ = ftruncate(fd, 0)
                verdict = .network("the server answered a range that does not continue the partial file")
                return
            }
            total = range.total ?? 0
        case 200...299:
            if have > 0 {
                restarted = true
                have = 0
            }
            guard ftruncate(fd, 0) == 0 else {
                verdict = .fatal("cannot truncate \(job.partial): \(String(cString: strerror(errno)))")
                return
            }
            total = head.headers.first(name: "Content-Length").flatMap { UInt64($0) } ?? 0
        case 416:
            _ = ftruncate(fd, 0)
            verdict = .network("the server cannot continue from byte \(have) (416): starting again")
            return
        default:
            verdict = .status(status, retryAfter: head.headers.first(name: "Retry-After").flatMap { Double($0) })
            return
        }
        guard lseek(fd, off_t(have), SEEK_SET) >= 0 else {
            verdict = .fatal("cannot seek in \(job.partial)")
            return
        }
        done = have
        flushedTo = have
        report(.started(id: job.id, status: status, validator: HTTPTransferRunner.validator(of: head.headers), done: have, total: total,
                        resumed: have > 0, restarted: restarted))
    }

    func didReceiveBodyPart(task: HTTPClient.Task<Response>, _ buffer: ByteBuffer) -> EventLoopFuture<Void> {
        guard verdict == nil else { return task.eventLoop.makeSucceededVoidFuture() }
        let written = buffer.withUnsafeReadableBytes { HTTPTransferRunner.writeAll(fd, $0) }
        guard written else {
            verdict = .fatal("cannot write \(job.partial): \(String(cString: strerror(errno)))")
            task.cancel()
            return task.eventLoop.makeSucceededVoidFuture()
        }
        done += UInt64(buffer.readableBytes)
        if done - flushedTo >= Self.writeBehind {
            // Start writing what came so far to disk now, not all at the final fsync,
            // and let the page cache drop it once written: the app reads the file later, if at all.
            _ = posix_fadvise(fd, off_t(flushedTo), off_t(done - flushedTo), POSIX_FADV_DONTNEED)
            flushedTo = done
        }
        let now = NIODeadline.now().uptimeNanoseconds
        if now &- lastReport >= HTTPTransferRunner.progressInterval {
            lastReport = now
            report(.progress(id: job.id, done: done, total: total))
        }
        return task.eventLoop.makeSucceededVoidFuture()
    }

    func didReceiveError(task: HTTPClient.Task<Response>, _ error: any Error) {}

    func didFinishRequest(task: HTTPClient.Task<Response>) throws -> TransferOutcome {
        if let verdict { return verdict }
        if total > 0, done != total { return .network("the body ended after \(done) of \(total) bytes") }
        guard fsync(fd) == 0 else { return .fatal("cannot flush \(job.partial): \(String(cString: strerror(errno)))") }
        report(.progress(id: job.id, done: done, total: total == 0 ? done : total))
        return .success(status: status, bytes: done)
    }

    /// Bytes on disk so far, for the error of an attempt that broke.
    var bytesDone: UInt64 { done }
}
