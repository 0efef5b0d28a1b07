import BgTaskProtocol
import SDBus

// Daemon restarts: checking in again.
//
// The daemon's state about this connection (its app id, its state, its tasks
// and the wakes handed to it) lives in the daemon process; a restarted daemon
// knows none of it. The bus tells the SDK when the daemon's name changes
// hands (NameOwnerChanged, followed by BusConnection), and on every new owner
// the SDK, on its own thread:
//   - drops what belonged to the old daemon: queued PerformFetch,
//     NotificationReceived and location events (+Fetch,
//     +RemoteNotifications, +Location), and notes that no daemon holds the
//     app's tasks (+Tasks), as the observers registered earlier do before
//     this one runs;
//   - checks in again with the app id it checked in with (calls the app
//     issued to the old daemon fail with .daemonUnavailable; one issued at
//     the very moment the new daemon appears may reach it just before the
//     CheckIn, as from a connection that has not checked in yet);
//   - tells the daemon the state the app last asked for, when it asked for
//     one (a connection starts active in a daemon that did not launch it,
//     and an instance the old daemon launched starts in the background),
//     unless the app's own SetApplicationState went out after the CheckIn:
//     sent behind that, the old state would undo it;
//   - begins the app's open tasks again, right behind the CheckIn, each
//     under the id the app holds (+Tasks);
//   - calls onReconnect.
// The match rules for the signals belong to the bus and stay in place, so
// the new daemon's signals reach the same handlers: the events it sends right
// after the CheckIn reply (held and undelivered pushes, due fetches) arrive
// as they do for an app it launched.

extension BackgroundTaskManager {
    /// Called whenever the SDK has checked in again after the daemon
    /// restarted (a new process took `org.bgtaskd.BackgroundTasks1`): with
    /// what the new daemon's `CheckIn` answered and nil, or with nil and the
    /// error it answered. A manager that never checked in gets (nil, nil).
    /// Runs on the SDK's thread: keep it short.
    ///
    /// Nothing needs doing in it: the handlers stay installed, the fetch
    /// interval is kept by the daemon, the app's state is sent again, and
    /// its open background tasks are begun again under the ids it holds
    /// (with a fresh budget: the old daemon's count is gone).
    ///
    /// ```swift
    /// manager.onReconnect = { launch, error in
    ///     if let error { log("bgtaskd restarted; checking in failed: \(error)") }
    ///     else { log("bgtaskd restarted; \(launch?.pending ?? 0) event(s) waiting") }
    /// }
    /// ```
    public var onReconnect: (@Sendable (_ launch: LaunchInfo?, _ error: BackgroundTasksError?) -> Void)? {
        get { callbacks.withLock { $0.onReconnect } }
        set { callbacks.withLock { $0.onReconnect = newValue } }
    }

    /// Follows the daemon's bus name (held weakly: the connection must not
    /// keep the manager alive). Registered after the other owner observers,
    /// so it runs after they dropped the old daemon's state.
    func subscribeToDaemonRestarts() {
        connection.observeServiceOwner { [weak self] owner in
            guard let self else { return }
            let generation = session.withLock { session in
                session.ownerGeneration += 1
                return session.ownerGeneration
            }
            if let owner { restoreSession(generation: generation, owner: owner) }
        }
    }

    /// Checks in again and restores the app's state (SDK thread).
    ///
    /// The calls go to `owner`, the new daemon's unique name, not to the
    /// well-known one: should that daemon end before the bus routes them,
    /// they would reach the next daemon, which gets its own restore, and an
    /// end of a task id the dead daemon gave would end one of the next's.
    ///
    /// The state sent is the one the app asked for last as the restoring
    /// call goes out, and none if the app's own `SetApplicationState` went
    /// out after the `CheckIn`: the daemon takes that one after the
    /// check-in, and a restore sent behind it would undo it (an app the user
    /// brought to the foreground meanwhile was put back in the background,
    /// and killed at its deadline).
    private func restoreSession(generation: Int, owner: String) {
        let appID = session.withLock { $0.appID }
        guard let appID else {
            restoreState(generation: generation, owner: owner)
            restoreTasks(generation: generation, owner: owner)
            reportReconnect(generation: generation, nil, nil)
            return
        }
        connection.callInBackground(
            ManagerInterface.Method.checkIn.rawValue, on: .manager.at(owner),
            arguments: { [weak self] (call) throws(BusError) in
                // As the CheckIn goes out (on the SDK's thread, in call order).
                self?.session.withLock { $0.stateCallsAtReCheckIn = (generation, $0.stateCalls) }
                try call.append(appID)
            },
            decode: { (reply) throws(BusError) in LaunchInfo(launchDictionary: try reply.readOptions()) },
            completion: { [weak self] result in
                guard let self else { return }
                switch result {
                case .success(let launch):
                    restoreState(generation: generation, owner: owner)
                    reportReconnect(generation: generation, launch, nil)
                case .failure(let error):
                    reportReconnect(generation: generation, nil, error)
                }
            })
        // Right behind the check-in, not after its answer: the daemon takes
        // them in order, so an app it took over is never idle in between (it
        // would be suspended). A check-in refused leaves them the connection's own.
        restoreTasks(generation: generation, owner: owner)
    }

    /// Sends the app's state again if the app set one: `active` too, which a
    /// connection starts in unless the restarted daemon took it over as
    /// launched by its predecessor (then it starts in the background).
    ///
    /// Decided as the call goes out (on the SDK's thread, in call order), not
    /// when it is posted: an app's own call posted meanwhile goes out first,
    /// and must not be undone.
    private func restoreState(generation: Int, owner: String) {
        connection.callInBackground(
            ManagerInterface.Method.setApplicationState.rawValue, on: .manager.at(owner),
            arguments: { [weak self] (call) throws(BusError) in
                let state: ApplicationState? = self?.session.withLock { session in
                    // The app's own call went out after the CheckIn: it stands.
                    if let mark = session.stateCallsAtReCheckIn, mark.generation == generation, mark.calls != session.stateCalls { return nil }
                    return session.state
                }
                // Thrown, the call is not sent (and nobody waits for its answer).
                guard let state else { throw BusError.failed("no state to restore") }
                try call.append(state.rawValue)
            },
            completion: { _ in })
    }

    private func reportReconnect(generation: Int, _ launch: LaunchInfo?, _ error: BackgroundTasksError?) {
        // Another owner came meanwhile: its own re-check-in reports.
        guard session.withLock({ $0.ownerGeneration == generation }) else { return }
        callbacks.withLock { $0.onReconnect }?(launch, error)
    }
}
