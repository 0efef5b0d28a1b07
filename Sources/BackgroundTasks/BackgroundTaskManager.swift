public import Foundation
public import BgTaskProtocol
import SDBus
import Synchronization

/// An app's line to bgtaskd: background tasks, the app's state and its
/// background time, as `UIApplication` offers them on iOS.
///
/// One manager is one bus connection. Create it once, when the app starts,
/// and keep it for the app's life: the daemon ties tasks to the connection,
/// so closing it (or the process exiting) ends every task it holds.
///
/// ```swift
/// import BackgroundTasks
///
/// let manager = try await BackgroundTaskManager.connect(appID: "org.example.Notes")
///
/// // The window was closed: finish saving before the app is suspended.
/// try await manager.setApplicationState(.background)
/// try await manager.withBackgroundTask(name: "save") {
///     try await document.save()
/// }
/// ```
///
/// All methods may be called from any thread or task. The manager runs a
/// thread of its own for the bus; expiration handlers and observers run on it.
/// Two consequences:
/// - a handler must return soon, and must not wait for a call of the SDK
///   (that thread answers calls and runs their timeouts: waiting there for
///   one hangs every call); start a `Task` for longer work;
/// - a handler that captures the manager strongly keeps it alive, with its
///   thread and its connection (and the daemon keeps the connection's
///   tasks): capture it weakly (`[weak manager]`) or call ``close()``.
///
/// The manager survives restarts of the daemon. When a new process takes
/// the daemon's bus name (bgtaskd crashed and was restarted, or was
/// upgraded), the SDK checks in again with the same app id, tells the new
/// daemon the state the app last asked for (unless the app's own call
/// follows the check-in), and carries on:
/// fetches, pushes, location events and task warnings of the new daemon
/// reach the same handlers, and the app does nothing. The app's open
/// background tasks are begun again in the new daemon, under the ids the app
/// holds and with their expiration handlers (the background time the old
/// daemon had counted is not kept: the new one counts afresh; a task it
/// refuses, for want of time, runs its expiration handler). What lived only
/// in the old daemon is gone: the wakes it had handed out
/// (completing them answers `.noSuchToken`; the new daemon delivers pushes
/// and location events that were not completed again). ``onReconnect`` says
/// when it happened.
public final class BackgroundTaskManager: Sendable {
    /// What ``backgroundTimeRemaining`` answers while the app is not in the
    /// background: `Double.greatestFiniteMagnitude`, as iOS's
    /// `UIApplication.backgroundTimeRemaining` does.
    ///
    /// ```swift
    /// if try await manager.backgroundTimeRemaining == BackgroundTaskManager.unlimitedTime {
    ///     print("in the foreground: no deadline")
    /// }
    /// ```
    public static let unlimitedTime: TimeInterval = BgTaskNames.unlimitedTime

    /// This manager's unique name on the bus (`:1.42`): the owner the daemon
    /// shows in its `Tasks` property for an app that did not check in, and
    /// what tools such as `busctl` call the connection.
    ///
    /// ```swift
    /// print("connected as \(manager.uniqueName)")
    /// ```
    public let uniqueName: String

    /// What `CheckIn` answered when ``connect(bus:appID:)`` checked in (it
    /// was given an app id, or found one in `BGTASKD_APP_ID`); nil otherwise.
    ///
    /// ```swift
    /// if manager.launch?.reason == .fetch { await refreshContent() }
    /// ```
    public let launch: LaunchInfo?

    /// Why bgtaskd launched this process, from `BGTASKD_LAUNCH_REASON` in its
    /// environment (`.fetch`, `.remoteNotification`, `.location`); nil when
    /// the daemon did not launch it (the user did). Readable before
    /// connecting, to decide early whether to show a window.
    ///
    /// ```swift
    /// if BackgroundTaskManager.launchReasonFromEnvironment == nil {
    ///     showMainWindow()  // started by the user
    /// }
    /// ```
    public static var launchReasonFromEnvironment: LaunchReason? {
        LaunchEnvironment.reason
    }

    let connection: BusConnection
    /// `PerformFetch` tokens waiting for, and going to, the fetch handler.
    let fetchDispatcher: FetchDispatcher
    /// `NotificationReceived` signals waiting for, and going to, the notification handler.
    let notificationDispatcher: NotificationDispatcher
    /// `RegionEvent` and `SignificantLocationChange` signals waiting for, and going to, the location handler.
    let locationDispatcher: LocationDispatcher
    /// `TransferFinished` signals waiting for, and going to, the transfer handler.
    let transferDispatcher: TransferDispatcher
    /// How many results of each transfer wake the app has not completed yet.
    let transferTokens = Mutex<[String: Int]>([:])

    /// The app's handlers, read on the SDK's thread when signals arrive.
    struct Callbacks {
        var onTaskExpiring: (@Sendable (BackgroundTaskIdentifier, TimeInterval) -> Void)?
        var onTaskExpired: (@Sendable (BackgroundTaskIdentifier) -> Void)?
        var onPerformFetch: (@Sendable (String) -> Void)?
        var onFetchCompleted: (@Sendable (String, FetchResult, BackgroundTasksError?) -> Void)?
        var onNotificationReceived: (@Sendable (String, RemoteNotification) -> Void)?
        var onNotificationCompleted: (@Sendable (String, FetchResult, BackgroundTasksError?) -> Void)?
        var onLocationEventReceived: (@Sendable (String, LocationEvent) -> Void)?
        var onLocationEventCompleted: (@Sendable (String, LocationEvent, BackgroundTasksError?) -> Void)?
        var onReconnect: (@Sendable (LaunchInfo?, BackgroundTasksError?) -> Void)?
        var onRemoteNotificationEndpointChanged: (@Sendable (String?) -> Void)?
        var onTransferProgress: (@Sendable (String, UInt64, UInt64) -> Void)?
    }

    let callbacks = Mutex(Callbacks())
    /// The app's open tasks, begun again when the daemon restarts.
    let openTasks = Mutex(OpenTasks())

    /// What the SDK tells a restarted daemon again (see `+Restart`).
    struct Session {
        /// The app id this connection checked in as; nil before any check-in.
        var appID: String?
        /// The state the app last asked for (as its call went out, whether or
        /// not the daemon took it: one asked for while the daemon was down is
        /// what the app wants the restarted one to know), or was launched in;
        /// nil for the daemon's default (`active`).
        var state: ApplicationState?
        /// Bumped as each of the app's `SetApplicationState` calls goes out,
        /// so that a re-check-in can tell whether one followed it.
        var stateCalls = 0
        /// ``stateCalls`` as the latest re-check-in went out, with its owner generation.
        var stateCallsAtReCheckIn: (generation: Int, calls: Int)?
        /// Bumped whenever the daemon's name changes hands, so that a
        /// re-check-in that answers after the next change is ignored.
        var ownerGeneration = 0
    }

    let session = Mutex(Session())

    private init(
        connection: BusConnection, launch: LaunchInfo?, appID: String?,
        fetchDispatcher: FetchDispatcher, notificationDispatcher: NotificationDispatcher,
        locationDispatcher: LocationDispatcher, transferDispatcher: TransferDispatcher
    ) {
        self.connection = connection
        self.launch = launch
        self.fetchDispatcher = fetchDispatcher
        self.notificationDispatcher = notificationDispatcher
        self.locationDispatcher = locationDispatcher
        self.transferDispatcher = transferDispatcher
        uniqueName = connection.uniqueName
        session.withLock { session in
            session.appID = launch == nil ? nil : appID
            // A launched app starts in the background (docs/DESIGN.md §4).
            if let launch, launch.reason != .user { session.state = .background }
        }
        subscribeToTaskSignals()
        subscribeToDaemonRestarts()
    }

    deinit {
        connection.close()
    }

    // MARK: Connecting

    /// Connects to the bus and, when `appID` is given, checks in as that app.
    ///
    /// Checking in names the app the daemon should count this connection's
    /// background time against, and tells it why the process was started
    /// (``launch``). A sandboxed (Flatpak) or systemd-launched app is known to
    /// the daemon already and may only check in as itself.
    ///
    /// Without an `appID`, the SDK checks in with `BGTASKD_APP_ID` from the
    /// environment when it is set, which it is when bgtaskd launched the
    /// process for a background event: such an app checks in without doing
    /// anything, and receives its waiting events right after. Install the
    /// fetch, notification and location handlers (`setFetchHandler`,
    /// `setNotificationHandler`, `setLocationHandler`) soon after connecting;
    /// events that arrive before they are installed are kept for them.
    ///
    /// Once checked in, the manager checks in again by itself, with the same
    /// id, whenever the daemon restarts (see ``onReconnect``).
    ///
    /// Connecting does not need the daemon to be running; calls made while it
    /// is not fail with ``BackgroundTasksError/Code/daemonUnavailable`` within
    /// 10 seconds at most (at once when the bus knows the name has no owner).
    ///
    /// ```swift
    /// let manager = try await BackgroundTaskManager.connect(appID: "org.example.Weather")
    /// let test = try await BackgroundTaskManager.connect(bus: .address("unix:path=/tmp/bus"))
    /// ```
    ///
    /// - Parameters:
    ///   - bus: The bus the daemon runs on; the session bus by default.
    ///   - appID: The app's desktop-file id, such as `org.example.Weather`;
    ///     nil for `BGTASKD_APP_ID` if set, else no check-in.
    /// - Throws: ``BackgroundTasksError``: `.daemonUnavailable` when there is
    ///   no bus; with an `appID`, whatever `CheckIn` answers (`.notPermitted`,
    ///   `.invalidArgument`, `.daemonUnavailable` …). The connection is closed
    ///   again when it throws.
    public static func connect(bus: BusAddress = .session, appID: String? = nil) async throws -> BackgroundTaskManager {
        let connection = try await BusConnection.open(bus)
        // Listen for PerformFetch, NotificationReceived and the location
        // signals before checking in:
        // the daemon sends the waiting events right after the CheckIn reply,
        // and the SDK's thread takes jobs in order, so the subscriptions are
        // in place by then.
        let fetchDispatcher = FetchDispatcher(maxQueued: 64)
        subscribeToFetchSignals(on: connection, dispatcher: fetchDispatcher)
        let notificationDispatcher = NotificationDispatcher(maxQueued: 1000)
        subscribeToNotificationSignals(on: connection, dispatcher: notificationDispatcher)
        let locationDispatcher = LocationDispatcher(maxQueued: 1000)
        subscribeToLocationSignals(on: connection, dispatcher: locationDispatcher)
        let transferDispatcher = TransferDispatcher(maxQueued: 10_000)
        subscribeToTransferSignals(on: connection, dispatcher: transferDispatcher)
        let appID = appID ?? LaunchEnvironment.appID
        var launch: LaunchInfo?
        if let appID {
            do {
                launch = try await checkIn(appID: appID, on: connection)
            } catch {
                connection.close()
                throw error
            }
        }
        return BackgroundTaskManager(
            connection: connection, launch: launch, appID: appID,
            fetchDispatcher: fetchDispatcher, notificationDispatcher: notificationDispatcher,
            locationDispatcher: locationDispatcher, transferDispatcher: transferDispatcher)
    }

    /// Binds this connection to an app (`CheckIn`) and returns what the daemon
    /// knows of the launch. Checking in again with the same id is harmless;
    /// the connection cannot move to another app. From then on the SDK
    /// checks in again by itself after a daemon restart (``onReconnect``).
    ///
    /// ```swift
    /// let launch = try await manager.checkIn(appID: "org.example.Weather")
    /// print(launch.reason, launch.pending)
    /// ```
    ///
    /// - Throws: ``BackgroundTasksError``: `.invalidArgument` for a malformed
    ///   id, `.notPermitted` for an id that is not the caller's.
    public func checkIn(appID: String) async throws -> LaunchInfo {
        let launch = try await Self.checkIn(appID: appID, on: connection)
        session.withLock { session in
            session.appID = appID
            if launch.reason != .user, session.state == nil { session.state = .background }
        }
        return launch
    }

    static func checkIn(appID: String, on connection: BusConnection) async throws(BackgroundTasksError) -> LaunchInfo {
        try await connection.call(
            ManagerInterface.Method.checkIn.rawValue, arguments: { (call) throws(BusError) in try call.append(appID) },
            decode: { (reply) throws(BusError) in LaunchInfo(launchDictionary: try reply.readOptions()) })
    }

    /// Closes the bus connection. The daemon then closes every task this
    /// manager holds, at once; calls still waiting, and every later call,
    /// fail with ``BackgroundTasksError/Code/disconnected``. Called for you
    /// when the manager is released. Safe to call more than once.
    ///
    /// ```swift
    /// manager.close()
    /// ```
    public func close() {
        connection.close()
    }

    // MARK: Application state

    /// Tells the daemon where the app stands. Switching to `.background`
    /// starts the app's background clock (``backgroundTimeRemaining`` then
    /// counts down for all its open tasks); `.active` pauses it, and gives the
    /// budget back once no task is open. The SDK remembers the state (also
    /// when the call fails because the daemon is down: it is what the app
    /// wants) and tells a restarted daemon again (``onReconnect``).
    ///
    /// ```swift
    /// // Last window closed:
    /// try await manager.setApplicationState(.background)
    /// // A window is shown again:
    /// try await manager.setApplicationState(.active)
    /// ```
    ///
    /// - Throws: ``BackgroundTasksError`` (`.daemonUnavailable`, `.disconnected` …).
    public func setApplicationState(_ state: ApplicationState) async throws {
        try await connection.call(
            ManagerInterface.Method.setApplicationState.rawValue,
            arguments: { [self] (call) throws(BusError) in
                // Recorded on the SDK's thread as the call goes out, in the
                // order of the calls, for a re-check-in (see restoreSession).
                session.withLock { session in
                    session.state = state
                    session.stateCalls += 1
                }
                try call.append(state.rawValue)
            },
            decode: { (_) throws(BusError) in })
    }

    /// The app's background time left, in seconds:
    /// ``unlimitedTime`` while the app is not in the background, else the
    /// time until the daemon expires its open tasks (one deadline for the
    /// whole app, as on iOS).
    ///
    /// ```swift
    /// let left = try await manager.backgroundTimeRemaining
    /// if left < 5 { saveDraftQuickly() }
    /// ```
    ///
    /// - Throws: ``BackgroundTasksError`` (`.daemonUnavailable`, `.disconnected` …).
    public var backgroundTimeRemaining: TimeInterval {
        get async throws {
            try await connection.call(ManagerInterface.Method.getBackgroundTimeRemaining.rawValue) { (reply) throws(BusError) in try reply.readDouble() }
        }
    }

    // MARK: Background App Refresh

    /// Whether the app may be woken for background fetch, as iOS's
    /// `UIApplication.backgroundRefreshStatus`: `.denied` when the user
    /// switched Background App Refresh off for all apps or for this one,
    /// `.restricted` while the system saves power, else `.available`.
    /// Without a check-in it answers for the global switch and the power state.
    ///
    /// ```swift
    /// if try await manager.backgroundRefreshStatus() != .available {
    ///     showHint("Content refreshes only while the app is open")
    /// }
    /// ```
    ///
    /// - Throws: ``BackgroundTasksError`` (`.daemonUnavailable`, `.disconnected` …).
    public func backgroundRefreshStatus() async throws -> BackgroundRefreshStatus {
        try await connection.call(ManagerInterface.Method.getBackgroundRefreshStatus.rawValue) { (reply) throws(BusError) in
            let text = try reply.readString()
            guard let status = BackgroundRefreshStatus(rawValue: text) else {
                throw BusError.invalidArgs("unknown status '\(text.prefix(64))'")
            }
            return status
        }
    }
}
