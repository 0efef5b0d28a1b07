public import Foundation
import BgTaskProtocol
import SDBus

// Background tasks: begin, end, the expiry signals, and withBackgroundTask.
//
// An expiration handler is registered when the BeginBackgroundTask reply is
// decoded, on the SDK's thread, before the caller resumes. The daemon sends
// TaskExpiring only after that reply (even for a task begun inside the warning
// window), and the SDK's thread handles messages in order, so a handler can
// never miss its task's warning. It runs at most once, and is dropped when the
// app ends the task, when the task expires, and when a restarted daemon
// refuses to begin the task again (it runs then, as for a task out of time).
//
// The SDK keeps the open tasks (OpenTasks): when the daemon restarts, it
// begins each again in the new daemon after checking in (+Restart), under
// the id the app holds; the new daemon's id is mapped back to it.

/// What ``BackgroundTaskManager/withBackgroundTask(name:_:)``'s child tasks yield.
private enum ChildOutcome<Value: Sendable>: Sendable {
    case finished(Value)
    case expiring
}

extension BackgroundTaskManager {
    /// Asks for time to finish a piece of work in the background, as iOS's
    /// `beginBackgroundTask(withName:expirationHandler:)`.
    ///
    /// While the app is in the background, its open tasks run against one
    /// budget (`Tasks.BudgetSec`, 600 s by default). Shortly before it runs
    /// out (`Tasks.WarningSec`) the daemon warns and `expirationHandler`
    /// runs; the app must then stop the work and still call
    /// ``endBackgroundTask(_:)``. At the deadline the daemon closes the
    /// tasks and terminates the process (SIGTERM, then SIGKILL). Every task
    /// must be ended, expired or not; an active app is never expired.
    ///
    /// The handler runs on the SDK's thread (not the main thread, not an
    /// actor) and must be short: hand the work over (cancel a `Task`, signal a
    /// queue) and return; the SDK handles no other message meanwhile. It may
    /// run before this method returns to the caller, if the task is begun
    /// inside the warning window.
    ///
    /// ```swift
    /// let work = Task { try await upload(file) }
    /// let id = try await manager.beginBackgroundTask(name: "upload") {
    ///     work.cancel()  // time is up: stop, then end the task below
    /// }
    /// _ = await work.result
    /// try await manager.endBackgroundTask(id)
    /// ```
    ///
    /// - Parameters:
    ///   - name: Shown in the daemon's `Tasks` property and in `bgtaskctl`; at most 256 bytes.
    ///   - expirationHandler: Runs once when the task's time is about to run out.
    /// - Returns: The new task's id (never ``BackgroundTaskIdentifier/invalid``).
    /// - Throws: ``BackgroundTasksError``: `.limitExceeded` when this
    ///   connection holds too many open tasks, or when the app is in the
    ///   background with no time left (as iOS's `.invalid`: do the work
    ///   without a task, or not at all), `.invalidArgument` for too long
    ///   a name, `.storageFailed` when the daemon cannot store the next
    ///   block of task ids (a full disk; once in 65,536 tasks),
    ///   `.daemonUnavailable`, `.disconnected`.
    public func beginBackgroundTask(
        name: String = "", expirationHandler: (@Sendable () -> Void)? = nil
    ) async throws -> BackgroundTaskIdentifier {
        try await connection.call(
            ManagerInterface.Method.beginBackgroundTask.rawValue, arguments: { (call) throws(BusError) in try call.append(name) },
            decode: { [self] (reply) throws(BusError) in
                let id = try reply.readUInt32()
                _ = try reply.readDouble()  // seconds_remaining: the same as backgroundTimeRemaining
                let appsID = openTasks.withLock { $0.began(id, name: name, expirationHandler: expirationHandler) }
                return BackgroundTaskIdentifier(rawValue: appsID)
            })
    }

    /// Ends a task: the work is done (or was given up after the expiration
    /// handler ran). Call it exactly once for every task begun. The task's
    /// expiration handler will not run after this call.
    ///
    /// ```swift
    /// try await manager.endBackgroundTask(id)
    /// ```
    ///
    /// A task begun before the daemon restarted is ended in the new daemon,
    /// which the SDK asked for it again; one ended while that is under way
    /// (or while no daemon runs) needs no call. Ending
    /// ``BackgroundTaskIdentifier/invalid`` does nothing, as on iOS.
    ///
    /// - Throws: ``BackgroundTasksError``: `.noSuchTask` when the task already
    ///   expired, was ended, or is not this manager's; `.daemonUnavailable`,
    ///   `.disconnected`.
    public func endBackgroundTask(_ id: BackgroundTaskIdentifier) async throws {
        guard id != .invalid else { return }
        guard let daemonID = openTasks.withLock({ $0.end(id.rawValue) }) else { return }
        try await connection.call(
            ManagerInterface.Method.endBackgroundTask.rawValue, arguments: { (call) throws(BusError) in try call.append(daemonID) },
            decode: { (_) throws(BusError) in })
    }

    /// Runs `body` as a background task: begins one, runs `body` in a child
    /// task, cancels that child when the daemon warns that time runs out
    /// (cooperative cancellation: `body` should check `Task.isCancelled` or
    /// use cancellable APIs), and ends the task once `body` returns or throws.
    ///
    /// ```swift
    /// try await manager.setApplicationState(.background)
    /// let saved = try await manager.withBackgroundTask(name: "save") {
    ///     for chunk in chunks {
    ///         try Task.checkCancellation()
    ///         try await store(chunk)
    ///     }
    ///     return chunks.count
    /// }
    /// ```
    ///
    /// - Returns: What `body` returned.
    /// - Throws: What `body` threw (typically `CancellationError` after an
    ///   expiry), or a ``BackgroundTasksError`` from beginning the task or
    ///   from ending it. Ending a task that is already gone (it expired, or
    ///   the daemon or the connection went away) is not an error here.
    public func withBackgroundTask<T: Sendable>(name: String, _ body: @Sendable () async throws -> T) async throws -> T {
        let expiry = ExpirySignal()
        let id = try await beginBackgroundTask(name: name) { expiry.fire() }
        let outcome: Result<T, any Error>
        do {
            // The group waits for both children before it returns, so `body` never outlives this call.
            outcome = .success(try await withoutActuallyEscaping(body) { body in
                try await withThrowingTaskGroup(of: ChildOutcome<T>.self) { group in
                    group.addTask { .finished(try await body()) }
                    group.addTask {
                        await expiry.wait()
                        return .expiring
                    }
                    while let next = try await group.next() {
                        // Either the body is done (stop waiting for expiry) or time is up (cancel the body).
                        group.cancelAll()
                        if case .finished(let value) = next { return value }
                    }
                    preconditionFailure("the body's child always returns or throws")
                }
            })
        } catch {
            outcome = .failure(error)
        }
        do {
            try await endBackgroundTask(id)
        } catch let error as BackgroundTasksError where [.noSuchTask, .daemonUnavailable, .disconnected].contains(error.code) {
            // The task is gone already.
        } catch {
            if case .success = outcome { throw error }
        }
        return try outcome.get()
    }

    // MARK: Observers

    /// Called with the task and the seconds left whenever the daemon warns
    /// that a task's time is about to run out (`TaskExpiring`), for every
    /// task of this manager, before that task's own expiration handler. Runs
    /// on the SDK's thread: keep it short.
    ///
    /// ```swift
    /// manager.onTaskExpiring = { id, secondsLeft in
    ///     log("task \(id) expires in \(secondsLeft) s")
    /// }
    /// ```
    public var onTaskExpiring: (@Sendable (BackgroundTaskIdentifier, TimeInterval) -> Void)? {
        get { callbacks.withLock { $0.onTaskExpiring } }
        set { callbacks.withLock { $0.onTaskExpiring = newValue } }
    }

    /// Called when one of this manager's tasks passed its deadline without
    /// being ended (`TaskExpired`). The daemon has closed the task and is
    /// terminating the process: SIGTERM now, SIGKILL after a grace period.
    /// Runs on the SDK's thread: keep it short.
    ///
    /// ```swift
    /// manager.onTaskExpired = { id in
    ///     log("task \(id) expired: saving what we can")
    /// }
    /// ```
    public var onTaskExpired: (@Sendable (BackgroundTaskIdentifier) -> Void)? {
        get { callbacks.withLock { $0.onTaskExpired } }
        set { callbacks.withLock { $0.onTaskExpired = newValue } }
    }

    // MARK: Signals

    /// Hooks the Manager signals and the daemon's comings and goings up to
    /// this manager (held weakly: the connection must not keep it alive).
    func subscribeToTaskSignals() {
        connection.subscribe(interface: BgTaskNames.manager, member: ManagerInterface.Signal.taskExpiring.rawValue) { [weak self] (signal) throws(BusError) in
            let id = try signal.readUInt32()
            let secondsLeft = try signal.readDouble()
            self?.taskExpiring(id, secondsLeft: secondsLeft)
        }
        connection.subscribe(interface: BgTaskNames.manager, member: ManagerInterface.Signal.taskExpired.rawValue) { [weak self] (signal) throws(BusError) in
            let id = try signal.readUInt32()
            self?.taskExpired(id)
        }
        connection.observeServiceOwner { [weak self] _ in
            // Tasks live in the daemon: when it leaves or is replaced, none holds them until they are begun again.
            self?.openTasks.withLock { $0.detachAll() }
        }
    }

    private func taskExpiring(_ daemonID: UInt32, secondsLeft: Double) {
        let (id, handler) = openTasks.withLock { $0.takeExpirationHandler(daemonID: daemonID) }
        guard let id else { return }  // names a task of the app's that this daemon does not hold
        let observer = callbacks.withLock { $0.onTaskExpiring }
        observer?(BackgroundTaskIdentifier(rawValue: id), secondsLeft)
        handler?()
    }

    private func taskExpired(_ daemonID: UInt32) {
        guard let id = openTasks.withLock({ $0.expired(daemonID: daemonID) }) else { return }
        let observer = callbacks.withLock { $0.onTaskExpired }
        observer?(BackgroundTaskIdentifier(rawValue: id))
    }

    /// Begins the app's open tasks again in a daemon that restarted (SDK
    /// thread, right behind the check-in, so that an app the new daemon took
    /// over is not suspended as idle first): each keeps the id the app
    /// holds. A task the daemon refuses (no background time is left, say) is
    /// gone: its expiration handler runs, as for a task whose time ran out.
    /// One whose daemon went again waits for the next restore; one the
    /// present daemon did not answer (a timeout) is asked for again, twice
    /// at most, then given up as refused.
    func restoreTasks(generation: Int, owner: String, only: Set<UInt32>? = nil, attempt: Int = 1) {
        for (id, name) in openTasks.withLock({ $0.detached }) where only?.contains(id) ?? true {
            connection.callInBackground(
                ManagerInterface.Method.beginBackgroundTask.rawValue, on: .manager.at(owner),
                arguments: { (call) throws(BusError) in try call.append(name) },
                decode: { (reply) throws(BusError) in try reply.readUInt32() },
                completion: { [weak self] result in
                    guard let self else { return }
                    let current = session.withLock { $0.ownerGeneration == generation }
                    switch result {
                    case .success(let daemonID):
                        // Ended by the app meanwhile, or begun in a daemon that is not
                        // the present one's (the next restore asks that one): ended there.
                        if !current || !openTasks.withLock({ $0.reattach(id, as: daemonID) }) {
                            connection.callInBackground(
                                ManagerInterface.Method.endBackgroundTask.rawValue, on: .manager.at(owner),
                                arguments: { (call) throws(BusError) in try call.append(daemonID) }, completion: { _ in })
                        }
                    case .failure(let error) where !current || error.code == .disconnected:
                        break  // the next daemon's restore asks for it; a closed manager has no daemon
                    case .failure(let error) where error.code == .daemonUnavailable && attempt < 3:
                        restoreTasks(generation: generation, owner: owner, only: [id], attempt: attempt + 1)
                    case .failure:
                        let handler = openTasks.withLock { $0.lost(id) }
                        handler?()
                    }
                })
        }
    }
}
