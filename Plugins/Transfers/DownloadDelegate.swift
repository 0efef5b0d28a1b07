import AsyncHTTPClient
import BgTaskTransferCore
import Glibc
import NIOCore
import NIOHTTP1

/// Writes one download attempt's body into its partial file, straight from
/// the HTTP client's event loop: no hop per chunk, as fast as the socket
/// and the disk allow. Decides from the response head whether the bytes
/// continue the partial file (206 from where it ends, of the same file),
/// replace it (200), or cannot be used (any other status: the body is read
/// and dropped); a body is whole only with every byte its head announced.
final class DownloadDelegate: HTTPClientResponseDelegate, @unchecked Sendable {
    typealias Response = TransferOutcome

    // Touched only on the request's event loop (the client calls a delegate there, in order).
    private let job: TransferJob
    private let fd: Int32
    private var have: UInt64
    private let report: @Sendable (TransferReport) -> Void
    /// Set when the head or a write decided how the attempt ends; read once the request is over.
    private(set) var verdict: TransferOutcome?
    /// A redirect's status and `Location`, for the runner to follow (see ``TransferRedirects``).
    private(set) var redirect: (status: Int, location: String)?
    private var done: UInt64 = 0
    private var total: UInt64 = 0
    /// Where the body must end in the file (a 206's range, a 200's Content-Length); nil while unknown.
    private var expected: UInt64?
    /// Whether the body, once whole, is the rest of the file (not a range that stops before its end).
    private var completes = true
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
        case 206:
            // A 206 must start at the byte asked for (0 when none was), and fit the file the bytes kept are of.
            guard let range = head.headers.first(name: "Content-Range").flatMap(ContentRange.init) else {
                return startAgain(status, "the server answered 206 without a usable Content-Range: starting again from zero")
            }
            if let problem = range.problem(continuing: have, knownTotal: job.total) {
                // Bytes of elsewhere, or of another file: the next attempt asks for the whole file.
                return startAgain(status, "\(problem): starting again from zero")
            }
            // A server that ignores If-Range answers with the file it has now:
            // another validator means other bytes, which must not follow ours.
            if have > 0, let now = HTTPTransferRunner.validator(of: head.headers), now != job.validator {
                return startAgain(status, "the server's file changed (\(now.prefix(80)) after \(job.validator?.prefix(80) ?? "none")): starting again from zero")
            }
            expected = range.end + 1
            completes = range.reachesEnd
            total = range.total ?? job.total
        case 200...299:
            if have > 0 {
                restarted = true
                have = 0
            }
            guard ftruncate(fd, 0) == 0 else {
                verdict = .fatal("cannot truncate \(job.partial): \(String(cString: strerror(errno)))")
                return
            }
            // A 204 has no body, whatever length it claims (a server's mistake; the parser reads none).
            expected = status == 204 ? 0 : head.headers.first(name: "Content-Length").flatMap { UInt64($0) }
            total = expected ?? 0
        case 416 where have > 0 && job.validator != nil:
            // The range asked for (see HTTPTransferRunner); without one, 416 is an error as any other.
            return startAgain(status, "the server cannot continue from byte \(have) (416): starting again")
        default:
            if TransferRedirects.statuses.contains(status), let location = head.headers.first(name: "Location") {
                redirect = (status, location)
            }
            verdict = .status(status, retryAfter: HTTPTransferRunner.retryAfter(in: head.headers))
            return
        }
        guard lseek(fd, off_t(have), SEEK_SET) >= 0 else {
            verdict = .fatal("cannot seek in \(job.partial)")
            return
        }
        done = have
        flushedTo = have
        // A 206 that names no validator continues the bytes of the one they came under (checked above when it names one).
        let named = HTTPTransferRunner.validator(of: head.headers)
        let validator = status == 206 && have > 0 ? named ?? job.validator : named
        report(.started(id: job.id, status: status, validator: validator, done: have, total: total,
                        resumed: have > 0, restarted: restarted))
    }

    /// Drops the bytes kept so that the next attempt asks for the whole file,
    /// and says the transfer started again when there were bytes to drop.
    private func startAgain(_ status: Int, _ why: String) {
        _ = ftruncate(fd, 0)
        verdict = .network(why)
        guard have > 0 else { return }
        have = 0
        report(.started(id: job.id, status: status, validator: nil, done: 0, total: 0, resumed: false, restarted: true))
    }

    func didReceiveBodyPart(task: HTTPClient.Task<Response>, _ buffer: ByteBuffer) -> EventLoopFuture<Void> {
        guard verdict == nil else { return task.eventLoop.makeSucceededVoidFuture() }
        var buffer = buffer
        // A body that ends with the connection may run past its range: what fits is kept, as of a dropped connection.
        let overrun = expected.map { done + UInt64(buffer.readableBytes) > $0 } ?? false
        if overrun, let expected { buffer = buffer.getSlice(at: buffer.readerIndex, length: Int(expected - done)) ?? ByteBuffer() }
        let written = buffer.withUnsafeReadableBytes { HTTPTransferRunner.writeAll(fd, $0) }
        // Cancelling only after the write: it lets the request's owner go on, and close the file.
        guard written else {
            verdict = .fatal("cannot write \(job.partial): \(String(cString: strerror(errno)))")
            // How far it got, not the last of the progress reports (four a second).
            var info = stat()
            if fstat(fd, &info) == 0 { report(.progress(id: job.id, done: UInt64(max(info.st_size, 0)), total: total)) }
            task.cancel()
            return task.eventLoop.makeSucceededVoidFuture()
        }
        done += UInt64(buffer.readableBytes)
        if overrun {
            verdict = .network("the server sent more than the \(done - have) bytes its answer holds")
            task.cancel()
            return task.eventLoop.makeSucceededVoidFuture()
        }
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
        if let expected, done != expected { return .network("the body ended after \(done) of \(expected) bytes") }
        // A range that stops before the file's end: the next attempt asks for the rest.
        guard completes else { return .network("the server sent the bytes up to \(done) of \(total): the rest follows") }
        guard fsync(fd) == 0 else { return .fatal("cannot flush \(job.partial): \(String(cString: strerror(errno)))") }
        report(.progress(id: job.id, done: done, total: total == 0 ? done : total))
        return .success(status: status, bytes: done)
    }

    /// Bytes on disk so far, for the error of an attempt that broke.
    var bytesDone: UInt64 { done }
}
