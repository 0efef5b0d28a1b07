import AsyncHTTPClient
import BgTaskTransferCore
import Glibc
import NIOCore
import NIOHTTP1
import Synchronization

/// Moves the bytes: one HTTP attempt per ``run(_:report:)``, on the HTTP
/// client's threads, never the daemon's loop. Reports go through `report`,
/// which hands them to the loop. Downloads stream into the partial file
/// beside the destination and continue it with `Range`/`If-Range` when the
/// server still has the same file; uploads stream the source from disk.
final class HTTPTransferRunner: Sendable {
    private let client: HTTPClient
    /// Attempts in flight, by transfer id: cancelled by ``cancel(_:)`` and ``shutdown()``.
    private let tasks = Mutex<[String: Task<Void, Never>]>([:])
    /// Least time between two progress reports of one transfer, in ns.
    static let progressInterval: UInt64 = 250_000_000
    /// Bytes read from an upload's source per chunk.
    static let uploadChunk = 1 << 20

    init() {
        var configuration = HTTPClient.Configuration(
            // Followed here (TransferRedirects): the client would carry the app's headers to another host.
            redirectConfiguration: .disallow,
            // A stalled server is a network failure: retried, resumed.
            timeout: .init(connect: .seconds(20), read: .seconds(60)),
            decompression: .disabled)
        configuration.httpVersion = .automatic
        // A refused connection fails the attempt at once, to be retried by the
        // transfer's own backoff: the client's retries held a transfer slot
        // for the whole connect timeout (20 s) while other apps' transfers waited.
        configuration.connectionPool.retryConnectionEstablishment = false
        client = HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
    }

    /// Cancels every attempt and closes the client's connections.
    func shutdown() {
        let running = tasks.withLock { tasks in
            defer { tasks.removeAll() }
            return Array(tasks.values)
        }
        for task in running { task.cancel() }
        try? client.syncShutdown()
    }

    /// Stops the attempt of transfer `id`; it reports `.ended(.cancelled)` (or how it ended first).
    func cancel(_ id: String) {
        tasks.withLock { $0[id] }?.cancel()
    }

    /// Starts one attempt of `job`.
    func run(_ job: TransferJob, report: @escaping @Sendable (TransferReport) -> Void) {
        let client = self.client
        let task = Task.detached {
            let outcome: TransferOutcome
            switch job.kind {
            case .download: outcome = await Self.download(job, client: client, report: report)
            case .upload: outcome = await Self.upload(job, client: client, report: report)
            }
            // A download done and flushed stays done, even if a stop came at the last moment.
            if case .success = outcome {
                report(.ended(id: job.id, outcome))
            } else {
                report(.ended(id: job.id, Task.isCancelled ? .cancelled : outcome))
            }
        }
        tasks.withLock { $0[job.id] = task }
        // Forget it once done (the entry may already be replaced by a newer attempt).
        Task.detached { [weak self] in
            await task.value
            self?.tasks.withLock { tasks in
                if tasks[job.id] == task { tasks[job.id] = nil }
            }
        }
    }

    // MARK: Downloads

    private static func download(
        _ job: TransferJob, client: HTTPClient, report: @escaping @Sendable (TransferReport) -> Void
    ) async -> TransferOutcome {
        // O_NOFOLLOW: a link planted where the partial file goes is not followed.
        // 0666 less the umask, as any download tool leaves a file.
        // Relative to the directory checked on disk now, not to a path a link may have redirected since the start.
        let directory: Int32
        switch TransferDirectories.openParent(of: job.path, app: job.app) {
        case .success(let parent): directory = parent.fd
        case .failure(let problem): return .fatal("the file cannot be used any more: \(problem)")
        }
        defer { close(directory) }
        // O_NONBLOCK: a FIFO planted there must not hang the opening thread (it fails the type check below).
        let fd = openat(directory, job.partialName, O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0o666)
        guard fd >= 0 else { return .fatal("cannot open \(job.partial): \(String(cString: strerror(errno)))") }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG else { return .fatal("\(job.partial) is not a regular file") }
        // Bytes we have count only against the validator they came with.
        let have = job.validator == nil ? 0 : UInt64(info.st_size)
        if have == 0, info.st_size > 0 { _ = ftruncate(fd, 0) }
        // Every byte is here already: an earlier attempt finished, but its end
        // could not be stored (a full disk) and its file was put back. No
        // request: the server may not answer a range past the end.
        if have > 0, have == job.total {
            guard fsync(fd) == 0 else { return .fatal("cannot flush \(job.partial): \(String(cString: strerror(errno)))") }
            return .success(status: 0, bytes: have)
        }

        var redirects = TransferRedirects(url: job.url)
        var url = job.url
        while true {
            var headers = Self.headers(of: job, to: url, redirects: redirects)
            if have > 0, let validator = job.validator {
                headers.replaceOrAdd(name: "Range", value: "bytes=\(have)-")
                headers.replaceOrAdd(name: "If-Range", value: validator)
            }
            let request: HTTPClient.Request
            do {
                request = try HTTPClient.Request(url: url, method: .GET, headers: headers)
            } catch {
                return .fatal("cannot make a request of \(TransferURL.redacted(url).prefix(200)): \(error)")
            }
            // The body goes to disk from the client's event loop (DownloadDelegate): no hop per chunk.
            let delegate = DownloadDelegate(job: job, fd: fd, have: have, report: report)
            let task = client.execute(request: request, delegate: delegate)
            let outcome: TransferOutcome
            do {
                outcome = try await withTaskCancellationHandler {
                    try await task.futureResult.get()
                } onCancel: {
                    task.cancel()
                }
            } catch {
                // The delegate's own verdict (a write that failed, a redirect) says more than the cancellation it caused.
                guard let verdict = delegate.verdict else {
                    if Task.isCancelled { return .cancelled }
                    return TLSRefusal.reason(of: error).map(TransferOutcome.fatal)
                        ?? .network("the connection broke after \(delegate.bytesDone) bytes: \(error)")
                }
                outcome = verdict
            }
            guard let redirect = delegate.redirect, !Task.isCancelled else { return outcome }
            switch redirects.next(status: redirect.status, location: redirect.location, from: url) {
            case .none: return outcome
            case .refuse(let why): return .fatal(why)
            case .follow(let next): url = next
            }
        }
    }

    /// The app's headers, and the credentials of the URL's userinfo unless
    /// the app gave an `Authorization` of its own: only to the first URL's
    /// origin (see ``TransferRedirects``), nothing of the app's elsewhere.
    static func headers(of job: TransferJob, to url: String, redirects: TransferRedirects) -> HTTPHeaders {
        var headers = HTTPHeaders()
        guard redirects.mayCarryTheAppsHeaders(to: url) else { return headers }
        for (name, value) in job.headers { headers.add(name: name, value: value) }
        if !headers.contains(name: "Authorization"), let credentials = TransferURL.basicAuthorization(of: job.url) {
            headers.add(name: "Authorization", value: credentials)
        }
        return headers
    }

    /// The seconds an answer's `Retry-After` asks to wait (seconds or a date), if it asks.
    static func retryAfter(in headers: HTTPHeaders) -> Double? {
        guard let value = headers.first(name: "Retry-After") else { return nil }
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        return TransferBackoff.retryAfter(value, now: Double(now.tv_sec))
    }

    /// A strong ETag, else Last-Modified: what If-Range may send back.
    static func validator(of headers: HTTPHeaders) -> String? {
        if let etag = headers.first(name: "ETag"), !etag.hasPrefix("W/"), !etag.isEmpty { return etag }
        return headers.first(name: "Last-Modified")
    }

    static func writeAll(_ fd: Int32, _ bytes: UnsafeRawBufferPointer) -> Bool {
        var offset = 0
        while offset < bytes.count {
            let n = write(fd, bytes.baseAddress! + offset, bytes.count - offset)
            if n < 0 {
                if errno == EINTR { continue }
                return false
            }
            offset += n
        }
        return true
    }

    // MARK: Uploads

    /// How long a server may take none of an upload's body before the attempt fails.
    static let uploadStall: Duration = .seconds(60)

    /// The client's read timeout runs only once the whole request is sent,
    /// and its write timeout only while the connection can take more: a
    /// server that stops reading the body held the attempt (and its slot)
    /// until the transfer's resource timeout. This fails it after ``uploadStall``.
    private static func execute(_ request: HTTPClientRequest, on client: HTTPClient, watching body: FileChunks?) async throws -> HTTPClientResponse {
        guard let body else { return try await client.execute(request, timeout: .hours(24 * 365)) }
        return try await withThrowingTaskGroup(of: HTTPClientResponse?.self) { group in
            group.addTask { try await client.execute(request, timeout: .hours(24 * 365)) }
            group.addTask {
                let limit = UInt64(uploadStall.components.seconds) * 1_000_000_000
                while !body.source.isRead {
                    if body.source.idle > limit { throw UploadStalled() }
                    try await Task.sleep(for: .seconds(1))
                }
                return nil
            }
            while let answer = try await group.next() {
                guard let response = answer else { continue }
                group.cancelAll()
                return response
            }
            throw UploadStalled()
        }
    }

    struct UploadStalled: Error, CustomStringConvertible {
        var description: String { "the server took none of the upload for \(uploadStall.components.seconds) s" }
    }

    private static func upload(
        _ job: TransferJob, client: HTTPClient, report: @escaping @Sendable (TransferReport) -> Void
    ) async -> TransferOutcome {
        let parent: TransferDirectories.Parent
        switch TransferDirectories.openParent(of: job.path, app: job.app) {
        case .success(let opened): parent = opened
        case .failure(let problem): return .fatal("the file cannot be used any more: \(problem)")
        }
        defer { close(parent.fd) }
        let fd = openat(parent.fd, parent.name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK)
        guard fd >= 0 else { return .fatal("cannot open \(job.path): \(String(cString: strerror(errno)))") }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG else { return .fatal("\(job.path) is not a regular file") }
        let size = UInt64(info.st_size)
        report(.started(id: job.id, status: 0, validator: nil, done: 0, total: size, resumed: false, restarted: false))
        var redirects = TransferRedirects(url: job.url)
        var url = job.url
        var method = HTTPMethod(rawValue: job.method)
        while true {
            var request = HTTPClientRequest(url: url)
            request.method = method
            request.headers = Self.headers(of: job, to: url, redirects: redirects)
            // Sent again whole to a 307 or 308 (read from the file again from its first byte).
            let sendsBody = method != .GET
            var body: FileChunks?
            if sendsBody {
                guard let source = FileChunks.Source(duplicating: fd) else {
                    return .network("cannot duplicate the descriptor of \(job.path): \(String(cString: strerror(errno)))")
                }
                let chunks = FileChunks(source: source, size: size, chunk: uploadChunk) { sent in report(.progress(id: job.id, done: sent, total: size)) }
                request.body = .stream(chunks, length: .known(Int64(size)))
                body = chunks
            }
            // Once this request has its answer, nothing more of the file is sent.
            defer { body?.end() }
            do {
                let response = try await Self.execute(request, on: client, watching: body)
                body?.end()
                let status = Int(response.status.code)
                // The answer's body is not kept: drain a little of it, then let it go.
                _ = try? await response.body.collect(upTo: 64 * 1024)
                switch redirects.next(status: status, location: response.headers.first(name: "Location"), from: url) {
                case .refuse(let why):
                    return .fatal(why)
                case .follow(let next):
                    url = next
                    // As browsers and curl do: 303 asks for the answer with a GET; so do 301 and 302 after a POST.
                    if status == 303 || (method == .POST && (status == 301 || status == 302)) { method = .GET }
                    continue
                case .none:
                    break
                }
                guard (200...299).contains(status) else {
                    return .status(status, retryAfter: Self.retryAfter(in: response.headers))
                }
                return .success(status: status, bytes: size)
            } catch {
                if Task.isCancelled { return .cancelled }
                return TLSRefusal.reason(of: error).map(TransferOutcome.fatal) ?? .network("\(error)")
            }
        }
    }
}
