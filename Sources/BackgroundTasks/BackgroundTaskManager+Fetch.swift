public import Foundation
public import BgTaskProtocol
import SDBus

// Background fetch: the interval, the registration, and the fetch handler.
//
// PerformFetch is subscribed to in connect(), before CheckIn, and goes to the
// manager's FetchDispatcher, which queues tokens until a handler is set (a
// launched app gets its waiting events right after CheckIn, usually before it
// has installed its handler). The dispatcher hands tokens over on the SDK's
// thread, one at a time. Each token gets a completion that sends
// CompleteFetch once; later calls of it do nothing (CompletionLatch). Tokens
// still queued when the daemon leaves the bus are dropped: they were the old
// daemon's. The subscription itself outlives a daemon restart (it is a match
// rule on the bus, not on the daemon), so fetches of a restarted daemon reach
// the same handler once the SDK has checked in again.

extension BackgroundTaskManager {
    /// Asks to be fetched "as often as the system thinks useful", as iOS's
    /// `UIApplication.backgroundFetchIntervalMinimum`: `0`. The daemon never
    /// wakes an app more often than its floor (`Fetch.MinimumIntervalSec`,
    /// 15 minutes by default).
    ///
    /// ```swift
    /// try await manager.setMinimumBackgroundFetchInterval(BackgroundTaskManager.minimumFetchInterval)
    /// ```
    public static let minimumFetchInterval: TimeInterval = 0

    /// Asks never to be fetched, as iOS's
    /// `UIApplication.backgroundFetchIntervalNever`: the default for every app.
    ///
    /// ```swift
    /// try await manager.setMinimumBackgroundFetchInterval(BackgroundTaskManager.fetchIntervalNever)
    /// ```
    public static let fetchIntervalNever = TimeInterval.infinity

    // MARK: Registering

    /// Registers the app for background fetch, as iOS's
    /// `setMinimumBackgroundFetchInterval(_:)`: the daemon then wakes the app
    /// (launching it in the background if it is not running) at most once per
    /// `interval`, and calls the fetch handler (`setFetchHandler`).
    ///
    /// The app must have checked in, and its desktop entry must declare the
    /// mode (`X-BgTaskd-Modes=fetch;`). The setting is stored by the daemon
    /// and survives restarts of the app and of the daemon.
    ///
    /// ```swift
    /// let manager = try await BackgroundTaskManager.connect(appID: "org.example.News")
    /// try await manager.setMinimumBackgroundFetchInterval(3600)  // at most hourly
    /// ```
    ///
    /// - Parameter interval: Seconds: ``minimumFetchInterval`` (0),
    ///   ``fetchIntervalNever`` (infinity; anything from 1e300 up means the
    ///   same), or the least time between fetches, raised to the system's floor.
    /// - Throws: ``BackgroundTasksError``: `.invalidArgument` for a negative
    ///   or NaN interval; `.unknownApplication` when the app did not check in
    ///   or has no desktop entry; `.modeNotDeclared`; `.daemonUnavailable`
    ///   (also when the daemon runs without its fetch plugin).
    public func setMinimumBackgroundFetchInterval(_ interval: TimeInterval) async throws {
        try await connection.call(
            FetchInterface.Method.setMinimumFetchInterval.rawValue, on: .fetch, arguments: { (call) throws(BusError) in try call.append(interval) },
            decode: { (_) throws(BusError) in })
    }

    /// The app's fetch registration as the daemon holds it: the policy, the
    /// interval in force, and when the next fetch is planned.
    ///
    /// ```swift
    /// let registration = try await manager.fetchRegistration()
    /// print(registration.policy, registration.seconds, registration.nextEarliest ?? "not planned")
    /// ```
    ///
    /// - Throws: ``BackgroundTasksError``: as ``setMinimumBackgroundFetchInterval(_:)``.
    public func fetchRegistration() async throws -> FetchRegistration {
        try await connection.call(
            FetchInterface.Method.getFetchRegistration.rawValue, on: .fetch,
            decode: { (reply) throws(BusError) in
                let policy = try reply.readString()
                let seconds = try reply.readDouble()
                let next = try reply.readUInt64()
                guard let registration = FetchRegistration(policy: policy, seconds: seconds, nextEarliestMicroseconds: next) else {
                    throw BusError.invalidArgs("unknown fetch policy '\(policy.prefix(64))'")
                }
                return registration
            })
    }

    // MARK: The fetch handler

    /// Installs the fetch handler, as iOS's
    /// `application(_:performFetchWithCompletionHandler:)`: called for every
    /// background fetch the daemon asks for (`PerformFetch`), with a
    /// completion to call once the fetch is done, with what it found.
    ///
    /// Call the completion within the wake's budget (`Fetch.WakeBudgetSec`,
    /// 30 s by default): an app that does not is terminated, and fetched less
    /// often afterwards. Calling it sends `CompleteFetch`; calling it again
    /// does nothing. It may be called from any thread.
    ///
    /// Fetches that arrive before a handler is set are kept and handed to it
    /// as soon as it is, so an app launched in the background loses none of
    /// the events that arrive right after it checks in. A later call replaces
    /// the handler.
    ///
    /// The handler runs on the SDK's thread and must return quickly: start
    /// the work (a `Task`, a queue) and call the completion from there.
    ///
    /// ```swift
    /// manager.setFetchHandler { completion in
    ///     Task {
    ///         do {
    ///             let changed = try await feed.refresh()
    ///             completion(changed ? .newData : .noData)
    ///         } catch {
    ///             completion(.failed)
    ///         }
    ///     }
    /// }
    /// ```
    ///
    /// - Parameter handler: Called once per fetch, with its completion.
    public func setFetchHandler(_ handler: @escaping @Sendable (_ completion: @escaping @Sendable (FetchResult) -> Void) -> Void) {
        fetchDispatcher.setDeliver { [weak self] token in
            self?.performFetch(token: token, handler: handler)
        }
        // Hand over what waited, on the SDK's thread like every other delivery.
        connection.submit { [fetchDispatcher] in fetchDispatcher.drain() }
    }

    /// Installs an `async` fetch handler: for every background fetch it runs
    /// `handler` in a new `Task` and completes the fetch with what it
    /// returns. Otherwise as the completion-handler form.
    ///
    /// ```swift
    /// manager.setFetchHandler {
    ///     guard let articles = try? await feed.download() else { return .failed }
    ///     return articles.isEmpty ? .noData : .newData
    /// }
    /// ```
    ///
    /// - Parameter handler: The fetch; returns what it found.
    public func setFetchHandler(_ handler: @escaping @Sendable () async -> FetchResult) {
        setFetchHandler { completion in
            Task { completion(await handler()) }
        }
    }

    // MARK: Observers

    /// Called with the wake's token whenever a fetch is handed to the fetch
    /// handler, just before the handler runs. For logs and tests: the token is
    /// what `CompleteFetch` and the daemon's log name. Runs on the SDK's
    /// thread: keep it short.
    ///
    /// ```swift
    /// manager.onPerformFetch = { token in log("fetch \(token) begins") }
    /// ```
    public var onPerformFetch: (@Sendable (_ token: String) -> Void)? {
        get { callbacks.withLock { $0.onPerformFetch } }
        set { callbacks.withLock { $0.onPerformFetch = newValue } }
    }

    /// Called once the daemon answered the `CompleteFetch` that a fetch
    /// completion sent: with the token, the result, and nil when the daemon
    /// took it, or the error it answered (`.noSuchToken` when the wake had
    /// expired already). Runs on the SDK's thread: keep it short.
    ///
    /// An app launched in the background can use it to know when it may
    /// exit: the daemon has its answer.
    ///
    /// ```swift
    /// manager.onFetchCompleted = { token, result, error in
    ///     if let error { log("fetch \(token) not recorded: \(error)") } else { log("fetch done: \(result)") }
    /// }
    /// ```
    public var onFetchCompleted: (@Sendable (_ token: String, _ result: FetchResult, _ error: BackgroundTasksError?) -> Void)? {
        get { callbacks.withLock { $0.onFetchCompleted } }
        set { callbacks.withLock { $0.onFetchCompleted = newValue } }
    }

    // MARK: Signals

    /// Sends the daemon's `PerformFetch` signals on `connection` to
    /// `dispatcher`, and drops its queue when the daemon leaves. Called by
    /// `connect` before `CheckIn`, so no fetch sent right after it is missed.
    static func subscribeToFetchSignals(on connection: BusConnection, dispatcher: FetchDispatcher) {
        connection.subscribe(interface: BgTaskNames.fetch, member: FetchInterface.Signal.performFetch.rawValue) { (signal) throws(BusError) in
            dispatcher.received(try signal.readString())
        }
        connection.observeServiceOwner { _ in dispatcher.discardQueued() }
    }

    /// Hands one fetch to the app's handler, with its completion (SDK thread).
    private func performFetch(
        token: String, handler: @Sendable (_ completion: @escaping @Sendable (FetchResult) -> Void) -> Void
    ) {
        let latch = CompletionLatch()
        let completion: @Sendable (FetchResult) -> Void = { [weak self] result in
            guard latch.claim() else { return }
            self?.completeFetch(token: token, result: result)
        }
        callbacks.withLock { $0.onPerformFetch }?(token)
        handler(completion)
    }

    /// Sends `CompleteFetch` and tells ``onFetchCompleted`` how it went.
    private func completeFetch(token: String, result: FetchResult) {
        connection.callInBackground(
            FetchInterface.Method.completeFetch.rawValue, on: .fetch,
            arguments: { (call) throws(BusError) in
                try call.append(token)
                try call.append(result.rawValue)
            },
            completion: { [weak self] outcome in
                guard let observer = self?.callbacks.withLock({ $0.onFetchCompleted }) else { return }
                switch outcome {
                case .success: observer(token, result, nil)
                case .failure(let error): observer(token, result, error)
                }
            })
    }
}
