import BgTaskProtocol
import SDBus

// Transfers: downloads and uploads the daemon carries out for the app, and
// the handler that hears how they ended.
//
// TransferFinished is subscribed to in connect(), before CheckIn, and goes
// to the manager's TransferDispatcher, which queues results until a handler
// is set: an app launched for finished transfers gets them right after
// CheckIn. One wake's token covers every transfer of the app finished by
// then; the SDK counts the results of each token it handed out and sends
// CompleteEvents once the app has completed them all.

extension BackgroundTaskManager {
    /// Hands a download to the daemon, as iOS's background
    /// `URLSession.downloadTask(with:)`: it runs even when the app exits, is
    /// retried and resumed after failures, daemon restarts and sleep, and
    /// lands atomically at `path`. When it is done the app is woken (or
    /// launched, ``LaunchReason/transfer``) and the transfer handler hears of it.
    ///
    /// `path` must be inside the app's own directories: its data and cache
    /// directories (`$XDG_DATA_HOME/APP`, `$XDG_CACHE_HOME/APP`), the
    /// download directory, or `~/.var/app/APP`; its directory must exist.
    /// The app must have checked in and declare the mode (`X-BgTaskd-Modes=transfer;`).
    ///
    /// ```swift
    /// let id = try await manager.startDownload(
    ///     from: "https://example.org/episode.mp3", to: cacheDirectory + "/episode.mp3", session: "podcasts")
    /// ```
    ///
    /// - Returns: The transfer's id, which names it in ``transfers(session:)``, results and ``cancelTransfer(_:)``.
    /// - Throws: ``BackgroundTasksError``: `.invalidArgument` (the URL, the
    ///   path, an option; the message says why), `.unknownApplication`,
    ///   `.modeNotDeclared`, `.limitExceeded`, `.storageFailed`, `.daemonUnavailable`.
    public func startDownload(
        from url: String, to path: String, session: String = "", options: TransferOptions = TransferOptions()
    ) async throws -> String {
        try await startTransfer(.startDownload, session: session, url: url, path: path, options: options)
    }

    /// Hands an upload of the file at `path` to the daemon (its body; `PUT`
    /// unless ``TransferOptions/method`` says `POST`), as iOS's background
    /// `URLSession.uploadTask(with:fromFile:)`. Leave the file in place until
    /// the result comes. Otherwise as ``startDownload(from:to:session:options:)``.
    ///
    /// ```swift
    /// let id = try await manager.startUpload(of: dataDirectory + "/photo.jpg", to: "https://example.org/photos")
    /// ```
    public func startUpload(
        of path: String, to url: String, session: String = "", options: TransferOptions = TransferOptions()
    ) async throws -> String {
        try await startTransfer(.startUpload, session: session, url: url, path: path, options: options)
    }

    private func startTransfer(
        _ method: TransfersInterface.Method, session: String, url: String, path: String, options: TransferOptions
    ) async throws -> String {
        let entries = Self.wire(options)
        return try await connection.call(
            method.rawValue, on: .transfers,
            arguments: { (call) throws(BusError) in
                try call.append(session)
                try call.append(url)
                try call.append(path)
                try call.append(value: entries)
            },
            decode: { (reply) throws(BusError) in try reply.readString() })
    }

    static func wire(_ options: TransferOptions) -> BusValue {
        typealias Key = TransfersInterface.OptionKey
        var entries: [BusValue.DictionaryEntry] = [
            .init(key: .string(Key.discretionary.rawValue), value: .variant(.bool(options.discretionary))),
            .init(key: .string(Key.allowMetered.rawValue), value: .variant(.bool(options.allowMetered))),
        ]
        if let timeout = options.resourceTimeout {
            entries.append(.init(key: .string(Key.resourceTimeout.rawValue), value: .variant(.double(timeout))))
        }
        if !options.headers.isEmpty {
            let headers = options.headers.sorted { $0.key < $1.key }.map { BusValue.DictionaryEntry(key: .string($0.key), value: .string($0.value)) }
            entries.append(.init(key: .string(Key.headers.rawValue), value: .variant(.dictionary(key: "s", value: "s", headers))))
        }
        if let method = options.method {
            entries.append(.init(key: .string(Key.method.rawValue), value: .variant(.string(method))))
        }
        return .dictionary(key: "s", value: "v", entries)
    }

    /// Stops a transfer and forgets it (a download's partial file is removed).
    ///
    /// ```swift
    /// try await manager.cancelTransfer(id)
    /// ```
    ///
    /// - Throws: ``BackgroundTasksError``: `.invalidArgument` when the app has no such transfer.
    public func cancelTransfer(_ id: String) async throws {
        try await connection.call(
            TransfersInterface.Method.cancel.rawValue, on: .transfers,
            arguments: { (call) throws(BusError) in try call.append(id) }, decode: { (_) throws(BusError) in })
    }

    /// The app's transfers not yet handed to it, oldest first: waiting,
    /// running, and finished ones whose result is on its way.
    ///
    /// ```swift
    /// for transfer in try await manager.transfers(session: "podcasts") { print(transfer.id, transfer.bytesDone) }
    /// ```
    ///
    /// - Parameter session: Only this session's; "" for all.
    public func transfers(session: String = "") async throws -> [TransferInfo] {
        try await connection.call(
            TransfersInterface.Method.listTransfers.rawValue, on: .transfers,
            arguments: { (call) throws(BusError) in try call.append(session) },
            decode: { (reply) throws(BusError) in
                guard case .array(_, let entries)? = try reply.readValue() else { return [] }
                return entries.map(TransferInfo.init)
            })
    }

    /// Installs the transfer handler, as iOS's
    /// `urlSession(_:task:didCompleteWithError:)` with
    /// `handleEventsForBackgroundURLSession`: it gets each finished transfer
    /// with a completion to call once the app has dealt with it (moved the
    /// file on, read the answer). When every result of a wake is completed
    /// the SDK tells the daemon (`CompleteEvents`), which forgets them; one
    /// not completed within `Transfers.WakeBudgetSec` (30 s) comes again at
    /// the app's next check-in.
    ///
    /// Results that came before the handler (an app launched for them) are
    /// handed over as soon as it is set. The handler runs on the SDK's
    /// thread: start the work and return.
    ///
    /// ```swift
    /// manager.setTransferHandler { result, completion in
    ///     if result.outcome == .success { library.add(result.transfer.path) }
    ///     completion()
    /// }
    /// ```
    public func setTransferHandler(
        _ handler: @escaping @Sendable (_ result: TransferResult, _ completion: @escaping @Sendable () -> Void) -> Void
    ) {
        transferDispatcher.setDeliver { [weak self] signal in
            guard let self else { return }
            self.handingOverTransferResult(token: signal.token, carried: signal.tokenTransfers)
            let latch = CompletionLatch()
            handler(signal.result) { [weak self] in
                guard latch.claim() else { return }
                self?.completedTransferResult(token: signal.token)
            }
        }
        connection.submit { [transferDispatcher] in transferDispatcher.drain() }
    }

    /// Installs an `async` transfer handler: each result is completed when `handler` returns.
    ///
    /// ```swift
    /// manager.setTransferHandler { result in await library.import(result.transfer.path) }
    /// ```
    public func setTransferHandler(_ handler: @escaping @Sendable (_ result: TransferResult) async -> Void) {
        setTransferHandler { result, completion in
            Task {
                await handler(result)
                completion()
            }
        }
    }

    /// Called with a transfer's id, bytes done and bytes in all (0 while
    /// unknown) as it moves, while the app is checked in: at most four
    /// times a second per transfer. Runs on the SDK's thread: keep it short.
    ///
    /// ```swift
    /// manager.onTransferProgress = { id, done, total in progressBar.update(id, done, total) }
    /// ```
    public var onTransferProgress: (@Sendable (_ id: String, _ done: UInt64, _ total: UInt64) -> Void)? {
        get { callbacks.withLock { $0.onTransferProgress } }
        set {
            callbacks.withLock { $0.onTransferProgress = newValue }
            connection.subscribe(interface: BgTaskNames.transfers, member: TransfersInterface.Signal.transferProgress.rawValue) {
                [weak self] (signal) throws(BusError) in
                let id = try signal.readString()
                let done = try signal.readUInt64()
                let total = try signal.readUInt64()
                self?.callbacks.withLock { $0.onTransferProgress }?(id, done, total)
            }
        }
    }

    // MARK: Signals

    /// Sends the daemon's `TransferFinished` signals on `connection` to
    /// `dispatcher`. Called by `connect` before `CheckIn`.
    static func subscribeToTransferSignals(on connection: BusConnection, dispatcher: TransferDispatcher) {
        connection.subscribe(interface: BgTaskNames.transfers, member: TransfersInterface.Signal.transferFinished.rawValue) {
            (signal) throws(BusError) in
            let token = try signal.readString()
            _ = try signal.readString()
            let outcome = TransferResult.Outcome(wire: try signal.readString())
            let info = TransferInfo(try signal.readValue() ?? .dictionary(key: "s", value: "v", []))
            let count = max(1, Int(clamping: info.resultsInWake ?? 1))
            dispatcher.received(TransferSignal(
                token: token, result: TransferResult(outcome: outcome, transfer: info), tokenTransfers: count))
        }
        connection.observeServiceOwner { _ in dispatcher.discardQueued() }
    }

    /// Notes, at the first result of `token`, how many results it carries
    /// (SDK thread, from the dispatcher's deliver): the wake is completed once
    /// the app has completed that many, not when the first of them is.
    func handingOverTransferResult(token: String, carried: Int) {
        transferTokens.withLock { counts in
            if counts[token] == nil { counts[token] = carried }
        }
    }

    /// One result of `token` was completed: the last one completes the wake.
    private func completedTransferResult(token: String) {
        let last = transferTokens.withLock { counts -> Bool in
            let left = (counts[token] ?? 1) - 1
            counts[token] = left > 0 ? left : nil
            return left <= 0
        }
        guard last else { return }
        connection.callInBackground(
            TransfersInterface.Method.completeEvents.rawValue, on: .transfers,
            arguments: { (call) throws(BusError) in try call.append(token) }, completion: { _ in })
    }
}
