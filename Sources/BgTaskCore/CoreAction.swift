public import BgTaskProtocol
/// Something the shell must do because the core's state changed. The core
/// decides; the shell carries out (sends, signals, launches) and never decides.
public enum CoreAction: Equatable, Sendable {
    /// Send `TaskExpiring(task, secondsLeft)` to the task's owner only.
    case sendTaskExpiring(ConnectionID, task: UInt32, secondsLeft: Double)
    /// Send `TaskExpired(task)` to the task's owner only.
    case sendTaskExpired(ConnectionID, task: UInt32)
    /// Signal an overstaying app's process: SIGTERM, or SIGKILL if it is still alive.
    case signalProcess(ProcessRef, ProcessSignal, app: AppKey)
    /// An expired task's owner was not signalled: its process neither asked
    /// for the background nor was launched by the daemon (another process of
    /// the user put the app there), so nothing ties it to the overstay.
    case spareProcess(ProcessRef, app: AppKey)
    /// The set of open tasks changed (the `Tasks` property).
    case tasksChanged
    /// The machine went to sleep or woke up (the `Sleeping` property).
    case sleepingChanged(Bool)
    /// Freeze these processes of the app (the ones the daemon can tie to it):
    /// the app is suspended.
    case freeze(AppKey, [ProcessRef])
    /// Thaw them: the app runs again. Always before an event is handed to it
    /// or a signal is sent to it.
    case thaw(AppKey, [ProcessRef])
    /// Draining the backlog after a wake began, moved on or ended (the
    /// `Draining` and `Backlog` properties).
    case drainChanged

    /// Start the app in the background for `reason`; report back with
    /// `launchStarted` or `launchFailed`.
    case launch(AppID, reason: String)
    /// The app can take the wake now: tell `plugin` to send its event to `connection`.
    case deliverWake(token: String, plugin: String, app: AppID, connection: ConnectionID)
    /// The app completed the wake in time.
    case wakeCompleted(token: String, plugin: String, app: AppID)
    /// The wake's budget ran out (or the app died before taking it): an offence.
    case wakeExpired(token: String, plugin: String, app: AppID)
    /// Launching the app failed; the wake is dropped.
    case wakeFailed(token: String, plugin: String, app: AppID, reason: String)
    /// A connection checked in as the app.
    case appCheckedIn(AppID, ConnectionID, reason: String)
    /// A connection checked in as the app again: what waits for the app
    /// goes to it, as at its first check-in; nothing else is new.
    case appCheckedInAgain(AppID, ConnectionID, reason: String)
    /// The app moved to another state.
    case appStateChanged(AppID, ApplicationState)
    /// The app's last connection and process are gone.
    case appGone(AppID)
}

/// How the core asks for an overstaying process to end.
public enum ProcessSignal: String, Sendable, Equatable {
    /// SIGTERM: asks the process to end.
    case terminate
    /// SIGKILL, sent only if the process is still alive after the grace period.
    case kill
}
