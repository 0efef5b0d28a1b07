public import BgTaskProtocol
import SDBus

// Remote notifications: the notification handler.
//
// NotificationReceived is subscribed to in connect(), before CheckIn, and goes
// to the manager's NotificationDispatcher, which queues the pushes until a
// handler is set: an app launched for a push gets it right after CheckIn,
// usually before it has installed its handler. The dispatcher hands them over
// on the SDK's thread, one at a time, in the order the daemon sent them. The
// daemon sends one signal per push, each with a token of its own; each gets a
// completion that sends CompleteNotification once (CompletionLatch); later
// calls of it do nothing. Pushes still queued when the daemon leaves the bus
// are dropped: their tokens were the old daemon's, and the new one delivers
// the pushes again (it keeps every push until it is completed).

extension BackgroundTaskManager {
    // MARK: The notification handler

    /// Installs the notification handler, as iOS's
    /// `application(_:didReceiveRemoteNotification:fetchCompletionHandler:)`:
    /// called for every push the daemon delivers to the app
    /// (`NotificationReceived`), with the payload decoded and a completion to
    /// call once the app has handled it, with what it found.
    ///
    /// The app's desktop entry must declare the mode
    /// (`X-BgTaskd-Modes=remote-notification;`). A push for an app that is
    /// not running launches it in the background
    /// (``LaunchReason/remoteNotification``); the push then arrives right
    /// after the check-in. Silent pushes beyond the app's budget
    /// (`RemoteNotifications.SilentPerHour`) wait in the daemon and arrive
    /// together with the app's next wake of any kind, or when it checks in.
    ///
    /// Call the completion within the wake's budget
    /// (`RemoteNotifications.WakeBudgetSec`, 30 s by default): an app that
    /// does not is terminated, the offence is counted, and the push is
    /// delivered again on a later wake. Calling it sends
    /// `CompleteNotification`, after which the daemon forgets the push;
    /// calling it again does nothing. It may be called from any thread.
    ///
    /// Pushes that arrive before a handler is set are kept and handed to it
    /// as soon as it is. A later call replaces the handler.
    ///
    /// The handler runs on the SDK's thread and must return quickly: start
    /// the work (a `Task`, a queue) and call the completion from there.
    ///
    /// ```swift
    /// manager.setNotificationHandler { notification, completion in
    ///     guard let id = notification.data["content-id"]?.intValue else { return completion(.noData) }
    ///     Task {
    ///         do {
    ///             try await library.download(episode: id)
    ///             completion(.newData)
    ///         } catch {
    ///             completion(.failed)
    ///         }
    ///     }
    /// }
    /// ```
    ///
    /// - Parameter handler: Called once per push, with the push and its completion.
    public func setNotificationHandler(
        _ handler: @escaping @Sendable (
            _ notification: RemoteNotification, _ completion: @escaping @Sendable (FetchResult) -> Void
        ) -> Void
    ) {
        notificationDispatcher.setDeliver { [weak self] signal in
            self?.receiveNotification(signal, handler: handler)
        }
        // Hand over what waited, on the SDK's thread like every other delivery.
        connection.submit { [notificationDispatcher] in notificationDispatcher.drain() }
    }

    /// Installs an `async` notification handler: for every push it runs
    /// `handler` in a new `Task` and completes the push with what it
    /// returns. Otherwise as the completion-handler form.
    ///
    /// ```swift
    /// manager.setNotificationHandler { notification in
    ///     guard let id = notification.data["content-id"]?.intValue else { return .noData }
    ///     return (try? await library.download(episode: id)) != nil ? .newData : .failed
    /// }
    /// ```
    ///
    /// - Parameter handler: Handles one push; returns what it found.
    public func setNotificationHandler(_ handler: @escaping @Sendable (_ notification: RemoteNotification) async -> FetchResult) {
        setNotificationHandler { notification, completion in
            Task { completion(await handler(notification)) }
        }
    }

    // MARK: Observers

    /// Called with the wake's token and the push whenever a push is handed
    /// to the notification handler, just before the handler runs. For logs
    /// and tests: the token is what `CompleteNotification` and the daemon's
    /// log name. Runs on the SDK's thread: keep it short.
    ///
    /// ```swift
    /// manager.onNotificationReceived = { token, notification in log("push \(token): \(notification.json)") }
    /// ```
    public var onNotificationReceived: (@Sendable (_ token: String, _ notification: RemoteNotification) -> Void)? {
        get { callbacks.withLock { $0.onNotificationReceived } }
        set { callbacks.withLock { $0.onNotificationReceived = newValue } }
    }

    /// Called once the daemon answered the `CompleteNotification` that a
    /// notification completion sent: with the token, the result, and nil when
    /// the daemon took it, or the error it answered (`.noSuchToken` when the
    /// wake had expired already, or the daemon restarted meanwhile). Runs on
    /// the SDK's thread: keep it short.
    ///
    /// An app launched in the background can use it to know when it may
    /// exit: the daemon has its answer, and will not deliver that push again.
    ///
    /// ```swift
    /// manager.onNotificationCompleted = { token, result, error in
    ///     if let error { log("push \(token) not recorded: \(error)") } else { log("push handled: \(result)") }
    /// }
    /// ```
    public var onNotificationCompleted: (@Sendable (_ token: String, _ result: FetchResult, _ error: BackgroundTasksError?) -> Void)? {
        get { callbacks.withLock { $0.onNotificationCompleted } }
        set { callbacks.withLock { $0.onNotificationCompleted = newValue } }
    }

    // MARK: The push endpoint (UnifiedPush)

    /// The app's UnifiedPush endpoint: the URL its server posts a message to
    /// so that it reaches the app as a push, through the session's UnifiedPush
    /// distributor (ntfy, KUnifiedPush…), on which bgtaskd registers every
    /// app that declares the mode. nil while the app has none: no
    /// distributor runs, or it has not answered yet. Send it to your server
    /// whenever it changes (``onRemoteNotificationEndpointChanged``).
    ///
    /// A message that is a JSON object with `"aps"` arrives as that payload;
    /// any other arrives as a silent push whose `unifiedpush.message` holds
    /// it base64-encoded (and `unifiedpush.id` its id).
    ///
    /// ```swift
    /// if let endpoint = try await manager.remoteNotificationEndpoint() { try await server.register(endpoint) }
    /// ```
    ///
    /// - Throws: ``BackgroundTasksError``: `.notPermitted` before the app checked in.
    public func remoteNotificationEndpoint() async throws -> String? {
        try await connection.call(
            RemoteNotificationsInterface.Method.getEndpoint.rawValue, on: .remoteNotifications,
            arguments: { (call) throws(BusError) in try call.append("") },
            decode: { (reply) throws(BusError) in
                let endpoint = try reply.readString()
                return endpoint.isEmpty ? nil : endpoint
            })
    }

    /// Called with the app's new UnifiedPush endpoint whenever it changes
    /// (`EndpointChanged`), nil when the distributor dropped it. Runs on
    /// the SDK's thread: keep it short.
    ///
    /// ```swift
    /// manager.onRemoteNotificationEndpointChanged = { endpoint in
    ///     Task { if let endpoint { try? await server.register(endpoint) } else { try? await server.unregister() } }
    /// }
    /// ```
    public var onRemoteNotificationEndpointChanged: (@Sendable (_ endpoint: String?) -> Void)? {
        get { callbacks.withLock { $0.onRemoteNotificationEndpointChanged } }
        set {
            callbacks.withLock { $0.onRemoteNotificationEndpointChanged = newValue }
            connection.subscribe(
                interface: BgTaskNames.remoteNotifications, member: RemoteNotificationsInterface.Signal.endpointChanged.rawValue
            ) { [weak self] (signal) throws(BusError) in
                let endpoint = try signal.readString()
                self?.callbacks.withLock { $0.onRemoteNotificationEndpointChanged }?(endpoint.isEmpty ? nil : endpoint)
            }
        }
    }

    // MARK: Signals

    /// Sends the daemon's `NotificationReceived` signals on `connection` to
    /// `dispatcher`, and drops its queue when the daemon leaves. Called by
    /// `connect` before `CheckIn`, so no push sent right after it is missed.
    static func subscribeToNotificationSignals(on connection: BusConnection, dispatcher: NotificationDispatcher) {
        connection.subscribe(interface: BgTaskNames.remoteNotifications, member: RemoteNotificationsInterface.Signal.notificationReceived.rawValue) {
            (signal) throws(BusError) in
            let token = try signal.readString()
            let payload = try signal.readString()
            dispatcher.received(NotificationSignal(token: token, payloadJSON: payload))
        }
        connection.observeServiceOwner { _ in dispatcher.discardQueued() }
    }

    /// Hands one push to the app's handler, with its completion (SDK thread).
    private func receiveNotification(
        _ signal: NotificationSignal,
        handler: @Sendable (_ notification: RemoteNotification, _ completion: @escaping @Sendable (FetchResult) -> Void) -> Void
    ) {
        let notification = RemoteNotification(delivered: signal.payloadJSON)
        let latch = CompletionLatch()
        let token = signal.token
        let completion: @Sendable (FetchResult) -> Void = { [weak self] result in
            guard latch.claim() else { return }
            self?.completeNotification(token: token, result: result)
        }
        callbacks.withLock { $0.onNotificationReceived }?(token, notification)
        handler(notification, completion)
    }

    /// Sends `CompleteNotification` and tells ``onNotificationCompleted`` how it went.
    private func completeNotification(token: String, result: FetchResult) {
        connection.callInBackground(
            RemoteNotificationsInterface.Method.completeNotification.rawValue, on: .remoteNotifications,
            arguments: { (call) throws(BusError) in
                try call.append(token)
                try call.append(result.rawValue)
            },
            completion: { [weak self] outcome in
                guard let observer = self?.callbacks.withLock({ $0.onNotificationCompleted }) else { return }
                switch outcome {
                case .success: observer(token, result, nil)
                case .failure(let error): observer(token, result, error)
                }
            })
    }
}
