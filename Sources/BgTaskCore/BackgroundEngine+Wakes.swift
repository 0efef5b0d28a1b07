public import BgTaskProtocol
// Wakes and launches: see the implementation notes in BackgroundEngine.swift.

extension BackgroundEngine {
    // MARK: Queries

    /// Whether a connection checked in as the app.
    public func isRunning(_ app: AppID) -> Bool {
        !(apps[.app(app)]?.checkedIn.isEmpty ?? true)
    }

    /// Whether some process of the app is there: a connection, or a process
    /// the daemon launched. An app with neither is not running, and so not
    /// suspended either, whatever its events wait for.
    public func hasProcess(_ app: AppID) -> Bool {
        guard let record = apps[.app(app)] else { return false }
        return !record.connections.isEmpty || record.launch?.process != nil
    }

    /// Whether the app has a connection now (checked in, or identified by its sandbox or unit).
    public func isConnected(_ app: AppID) -> Bool {
        !(apps[.app(app)]?.connections.isEmpty ?? true)
    }

    /// Apps with a connection now (checked in or identified), by id.
    public var connectedApps: [AppID] {
        apps.compactMap { key, app in
            guard case .app(let id) = key, !app.connections.isEmpty else { return nil }
            return id
        }.sorted { $0.rawValue < $1.rawValue }
    }

    /// Whether the daemon is launching the app: it started it, and the app
    /// has not checked in yet (once it has, it is running, no longer launching).
    public func isLaunching(_ app: AppID) -> Bool {
        guard let record = apps[.app(app)], record.launch != nil else { return false }
        return record.connections.isEmpty
    }

    /// Why launches of the app are held back, while they are.
    public func launchBackoff(for app: AppID) -> LaunchBackoff? {
        backoffs[app]
    }

    /// Tokens of the app's pending wakes, oldest first.
    public func pendingWakes(of app: AppID) -> [String] {
        apps[.app(app)]?.wakes ?? []
    }

    // MARK: Calls

    /// Wakes an app for an event: a running app that checked in gets it at
    /// once (`deliverWake`), any other is launched (`launch`, unless a launch is
    /// under way) and gets it after its CheckIn. Either way the token must be
    /// completed within the budget.
    public mutating func requestWake(_ request: WakeRequest) throws(CoreError) -> [CoreAction] {
        guard wakes[request.token] == nil else {
            throw CoreError(.invalidArgs, "wake token already in use")
        }
        let key = AppKey.app(request.app)
        let now = clock.now
        let target = apps[key]?.checkedIn.last
        if target == nil, apps[key]?.launch == nil, let backoff = backoffs[request.app], now < backoff.retryAt {
            let wait = backoff.retryAt.duration(since: now)
            throw CoreError(.failed, "not launching \(request.app) for another \(Int(wait.seconds.rounded(.up))) s: its last launch failed: \(backoff.lastError)")
        }
        if apps[key] == nil { apps[key] = AppRecord(budget: policy.budget, owner: defaultOwner(request.app)) }
        wakes[request.token] = WakeRecord(
            token: request.token, app: request.app, reason: request.reason, plugin: request.plugin,
            clock: BackgroundClock(budget: request.budget), deliveredTo: nil)
        modifyApp(key) { $0.wakes.append(request.token) }
        var actions: [CoreAction] = []
        // While the machine sleeps the event waits for the wake (the backlog takes it).
        if isSleeping, isHeldBack(key) {
            reconcile(key, into: &actions)
            return actions
        }
        // While the backlog after a wake drains, a background app waits for
        // its turn (which may be now: then it starts it at once).
        if drain != nil, isHeldBack(key) {
            joinDrain(key, into: &actions)
            reconcile(key, into: &actions)
            return actions
        }
        if let target {
            wakes[request.token]!.deliveredTo = target
            grantWakeTime(key, token: request.token)
            reconcile(key, into: &actions)  // thawed before the event reaches it
            actions.append(.deliverWake(token: request.token, plugin: request.plugin, app: request.app, connection: target))
            return actions
        }
        let launch = modifyApp(key) { app -> Bool in
            guard app.launch == nil else { return false }
            app.launch = LaunchRecord(reason: request.reason)
            return true
        } ?? false
        reconcile(key, into: &actions)
        if launch { actions.append(.launch(request.app, reason: request.reason)) }
        return actions
    }

    /// The shell started the launched app's process; `inOwnGroup`: in a
    /// cgroup of the launch's own, whose processes the shell names
    /// `launched` (see ``LaunchRecord/inOwnGroup``).
    @discardableResult
    public mutating func launchStarted(_ app: AppID, process: ProcessRef, inOwnGroup: Bool = false) -> [CoreAction] {
        modifyApp(.app(app)) { record in
            record.launch?.process = process
            record.launch?.inOwnGroup = inOwnGroup
        }
        var actions: [CoreAction] = []
        reconcile(.app(app), into: &actions)
        return actions
    }

    /// Hands every event waiting for the app to `target`, oldest first, each
    /// with its time (``grantWakeTime(_:token:)``); the deliveries, in order.
    mutating func handOverWaitingWakes(_ key: AppKey, to target: ConnectionID) -> [CoreAction] {
        guard case .app(let id) = key, let app = apps[key] else { return [] }
        var deliveries: [CoreAction] = []
        for token in app.wakes where wakes[token]?.delivered == false {
            wakes[token]!.deliveredTo = target
            grantWakeTime(key, token: token)
            deliveries.append(.deliverWake(token: token, plugin: wakes[token]!.plugin, app: id, connection: target))
        }
        return deliveries
    }

    /// An app in the background that is handed an event has at least the
    /// event's budget left as its background time, as an app launched for
    /// it starts with: a task it begins for the event's work is neither
    /// refused for time it spent before nor made to expire before the
    /// event's own deadline (iOS gives a woken app its background time too).
    /// More time it has left is kept; an app being terminated gets none.
    mutating func grantWakeTime(_ key: AppKey, token: String) {
        guard let app = apps[key], app.state == .background, app.terminatingUntil == nil,
              let wake = wakes[token] else { return }
        let now = clock.now
        let left = wake.clock.remaining(at: now)
        guard app.clock.remaining(at: now) < left else { return }
        modifyApp(key) { app in
            app.clock = BackgroundClock(budget: left)
            app.warned = false
        }
        refreshClock(key)
    }

    /// A process an earlier run of the daemon launched for `app` still runs
    /// (that daemon was killed): it is the app's launched instance again, in
    /// the background and done with the events it was launched for (they
    /// were lost with that daemon, or wait in their plugins to be sent
    /// again), so once its SDK has checked in again it is suspended when
    /// idle and held to its budget, as it would have been. Nothing happens
    /// when the app is launched already.
    @discardableResult
    public mutating func adoptLaunched(_ app: AppID, process: ProcessRef, reason: String) -> [CoreAction] {
        let key = AppKey.app(app)
        if apps[key] == nil { apps[key] = AppRecord(budget: policy.budget, owner: defaultOwner(app)) }
        guard apps[key]!.launch == nil else { return [] }
        let by = clock.now + policy.adoptionGrace
        modifyApp(key) { record in
            // Not suspended before its SDK has checked in again (frozen, it
            // could not), and a copy the user starts meanwhile is the user's.
            record.launch = LaunchRecord(
                reason: reason, process: process, checkedIn: false, checkedInProcess: process, adopted: true, checkInBy: by)
            if record.connections.isEmpty { record.state = .background }
        }
        timers.schedule(.adoption(key), at: by)
        var actions: [CoreAction] = []
        reconcile(key, into: &actions)
        return actions
    }

    /// The app's desktop entry is gone (uninstalled): the instance the daemon
    /// launched for it, in the background, which no event can reach any
    /// more, is thawed and terminated (SIGTERM, SIGKILL after the grace);
    /// frozen, it stayed so until the daemon stopped. An instance in the
    /// foreground, or one the user started, is left alone.
    public mutating func desktopEntryRemoved(_ app: AppID) -> [CoreAction] {
        let key = AppKey.app(app)
        guard let record = apps[key], isBackground(record), let process = record.launch?.process, !dying.contains(process) else { return [] }
        var actions: [CoreAction] = []
        terminate([process], of: key, now: clock.now, into: &actions)
        return actions
    }

    /// Apps with wakes that wait for them (not yet handed over), by id.
    public var appsWithWaitingWakes: [AppID] {
        Set(wakes.values.filter { !$0.delivered }.map(\.app)).sorted { $0.rawValue < $1.rawValue }
    }

    /// Background App Refresh is no longer available to `app`: the wakes of
    /// `plugins` that still wait for it fail (no offence, no launch backoff),
    /// as they would have been refused had refresh been off when they came;
    /// their plugins keep the events for a later wake. Not while the app is
    /// in the foreground (refresh governs background wakes only) or being
    /// launched (not checked in yet: it is on its way to them). An instance
    /// the daemon launched earlier that checked in, now idle, is no exception.
    public mutating func withdrawWaitingWakes(of app: AppID, plugins: Set<String>, reason: String) -> [CoreAction] {
        let key = AppKey.app(app)
        guard let record = apps[key], isBackground(record), record.launch?.checkedIn != false else { return [] }
        let withdrawn = undeliveredWakes(of: app).filter { wakes[$0].map { plugins.contains($0.plugin) } ?? false }
        guard !withdrawn.isEmpty else { return [] }
        return failWakes(withdrawn, of: app, reason: reason)
    }

    /// Drops `tokens` (wakes of `app` not handed over), telling their plugins
    /// why, and brings the app in line with what is left.
    private mutating func failWakes(_ tokens: [String], of app: AppID, reason: String) -> [CoreAction] {
        var actions: [CoreAction] = []
        for token in tokens {
            let wake = dropWake(token)
            actions.append(.wakeFailed(token: token, plugin: wake.plugin, app: app, reason: reason))
        }
        if !removeAppIfUnused(.app(app)) { reconcile(.app(app), into: &actions) } else { leaveDrain(.app(app), into: &actions) }
        return actions
    }

    /// Launching the app failed: its waiting wakes are dropped, and launches are
    /// held back for a while (doubling with each failure in a row), unless
    /// `holdBack` is false: the failure was the daemon's (it ran out of file
    /// descriptors or memory) and says nothing about the app.
    public mutating func launchFailed(_ app: AppID, error: String, holdBack: Bool = true) -> [CoreAction] {
        if holdBack { noteLaunchFailure(app, error: error) }
        modifyApp(.app(app)) { $0.launch = nil }
        return failWakes(undeliveredWakes(of: app), of: app, reason: error)
    }

    /// Whether the launch of `app` as `process` still waits for its app to
    /// check in from the launch's own processes: it has not checked in, or
    /// only from another process than `process` (which may be a copy the
    /// user opened, outside the launch). Not for one taken over from an
    /// earlier run, which had checked in.
    public func launchAwaitsCheckIn(_ app: AppID, process: ProcessRef) -> Bool {
        guard let launch = apps[.app(app)]?.launch, launch.process == process, !launch.adopted else { return false }
        return !launch.checkedIn || launch.checkedInProcess != process
    }

    /// The processes of the app's checked-in connections other than
    /// `process`, when `process` is its launch: where the launch may go on
    /// once `process` exits (one a launcher script started checked in).
    public func checkedInProcesses(_ app: AppID, besides process: ProcessRef) -> [ProcessRef] {
        guard let record = apps[.app(app)], record.launch?.process == process else { return [] }
        var processes: [ProcessRef] = []
        for connection in record.checkedIn {
            guard let other = connections[connection]?.identity.process, other != process, !processes.contains(other) else { continue }
            processes.append(other)
        }
        return processes
    }

    /// The launch of `app` goes on as `new`, a process the launched `old`
    /// started (a launcher script's app), as `old` exited: frozen, signalled
    /// and ended with `new` from here, as with the process launched itself.
    /// A freeze or a SIGKILL pending for `old` is `new`'s now.
    public mutating func launchHandedOver(_ app: AppID, from old: ProcessRef, to new: ProcessRef) {
        let key = AppKey.app(app)
        guard apps[key]?.launch?.process == old else { return }
        modifyApp(key) { record in
            record.launch?.process = new
            if let index = record.frozen.firstIndex(of: old) {
                if record.frozen.contains(new) { record.frozen.remove(at: index) } else { record.frozen[index] = new }
            }
        }
        if dying.remove(old) != nil { dying.insert(new) }
        if let at = timers.deadline(of: .kill(old, key)) {
            timers.cancel(.kill(old, key))
            if timers.deadline(of: .kill(new, key)) == nil { timers.schedule(.kill(new, key), at: at) }
        }
    }

    /// A process the daemon launched for the app exited. If the app never
    /// checked in, that counts as a failed launch, and the wakes it was
    /// launched for fail with it: no budget ran out (it did not wait for
    /// it), so no offence is counted, and their events wait for the next wake.
    /// `status` reads after "it": "exited with code 1", "was killed by SIGTERM".
    /// Without `holdBack` such a failure does not hold the app's next launch
    /// back: the daemon ran short meanwhile (its check-in may have been refused).
    public mutating func launchedProcessExited(_ app: AppID, process: ProcessRef, status: String, holdBack: Bool = true) -> [CoreAction] {
        let key = AppKey.app(app)
        dying.remove(process)
        guard let record = apps[key], let launch = record.launch, launch.process == process else { return [] }
        // One taken over from an earlier run had checked in with that run.
        let neverCheckedIn = !launch.checkedIn && !launch.adopted
        modifyApp(key) { $0.launch = nil }
        var actions: [CoreAction] = []
        if neverCheckedIn {
            let error = "it \(status) without checking in"
            if holdBack { noteLaunchFailure(app, error: error) }
            for token in undeliveredWakes(of: app) {
                let wake = dropWake(token)
                actions.append(.wakeFailed(token: token, plugin: wake.plugin, app: app, reason: error))
            }
        } else if apps[key]?.checkedIn.isEmpty == true, let first = undeliveredWakes(of: app).first.flatMap({ wakes[$0] }),
                  !isHeldBack(key) {
            // It had checked in, and went before events that came later could
            // reach it: nobody would take them. Launched again, it does.
            modifyApp(key) { $0.launch = LaunchRecord(reason: first.reason) }
            actions.append(.launch(app, reason: first.reason))
        }
        if apps[key]?.connections.isEmpty ?? true, apps[key]?.launch == nil { actions.append(.appGone(app)) }
        if !removeAppIfUnused(key) { reconcile(key, into: &actions) } else { leaveDrain(key, into: &actions) }
        return actions
    }

    /// The app behind `caller` completed a wake, through the interface of
    /// `plugin` (nil: any). Unknown, spent, expired and other apps' tokens
    /// all answer `NoSuchToken`, and so does a token of another plugin's
    /// wake: completed elsewhere, the events it carried would wait for ever
    /// in the plugin that never heard of it.
    public mutating func completeWake(token: String, caller: ConnectionID, plugin: String? = nil) throws(CoreError) -> [CoreAction] {
        guard let wake = wakes[token], wake.delivered, connections[caller]?.app == .app(wake.app),
              plugin.map({ $0 == wake.plugin }) ?? true else {
            throw CoreError(.noSuchToken, "no wake with token '\(token.prefix(80))' is pending for this app")
        }
        _ = dropWake(token)
        var actions: [CoreAction] = [.wakeCompleted(token: token, plugin: wake.plugin, app: wake.app)]
        if !removeAppIfUnused(.app(wake.app)) { reconcile(.app(wake.app), into: &actions) }
        return actions
    }

    /// What undoing a wake request or a completion of `token` for `app` (the
    /// token's app when nil) takes, captured before the change.
    public func undoPoint(token: String, app: AppID? = nil) -> WakeUndo? {
        guard let id = app ?? wakes[token]?.app else { return nil }
        let key = AppKey.app(id)
        let record = apps[key]
        return WakeUndo(
            key: key, token: token, appExisted: record != nil, launch: record?.launch, wake: wakes[token],
            wakeIndex: record?.wakes.firstIndex(of: token))
    }

    /// Puts the app and the wake back as they were at `point`: a requested
    /// wake is gone (no offence, no launch), a completed one is pending again.
    /// Returns the freeze or thaw that takes, if any.
    @discardableResult
    public mutating func undo(_ point: WakeUndo) -> [CoreAction] {
        var actions: [CoreAction] = []
        wakes[point.token] = point.wake
        // A wake that was there and delivered before the batch was completed in it.
        if point.wake?.delivered == true { wakes[point.token]!.completionRefused = true }
        timers.cancel(.wake(point.token))
        if apps[point.key] == nil {
            guard point.appExisted, case .app(let id) = point.key else {
                leaveDrain(point.key, into: &actions)
                return actions
            }
            // A completion removed the app's record (nothing else held it): a fresh one holds the wake again.
            apps[point.key] = AppRecord(budget: policy.budget, owner: defaultOwner(id))
        }
        modifyApp(point.key) { app in
            app.launch = point.launch
            app.wakes.removeAll { $0 == point.token }
            if let index = point.wakeIndex { app.wakes.insert(point.token, at: min(index, app.wakes.count)) }
        }
        // A record the undone request made goes with it.
        if !point.appExisted, removeAppIfUnused(point.key) {
            leaveDrain(point.key, into: &actions)
            return actions
        }
        reconcile(point.key, into: &actions)
        return actions
    }

    /// The app's desktop entry changed: a failed launch may work now.
    public mutating func clearLaunchBackoff(_ app: AppID) {
        backoffs[app] = nil
    }

    // MARK: Internals

    /// A wake's budget ran out: the plugin counts the offence and the app is
    /// terminated like an overstaying task — unless it is in the foreground,
    /// where nothing is terminated for background limits, or it completed the
    /// wake and only storing that failed (then the wake fails, no offence).
    ///
    /// Only processes the daemon can tie to this wake are terminated: the one
    /// behind the connection the event was handed to, and the process the
    /// daemon launched for the app. Another process that merely checked in
    /// as the app is never killed on that connection's account.
    mutating func expireWake(_ token: String, now: MonotonicInstant, into actions: inout [CoreAction]) {
        guard wakes[token] != nil else { return }
        let wake = dropWake(token)
        let key = AppKey.app(wake.app)
        if wake.completionRefused {
            // It answered in time; the daemon could not store the answer. Its
            // event waits for the next wake, as after any failed wake.
            actions.append(.wakeFailed(token: token, plugin: wake.plugin, app: wake.app,
                                       reason: "it completed the wake in time, but the completion could not be stored"))
            if !removeAppIfUnused(key) { reconcile(key, into: &actions) } else { leaveDrain(key, into: &actions) }
            return
        }
        actions.append(.wakeExpired(token: token, plugin: wake.plugin, app: wake.app))
        guard let app = apps[key] else { return }
        if !app.connections.isEmpty, app.state != .background {
            if !removeAppIfUnused(key) { reconcile(key, into: &actions) }
            return
        }
        var processes: [ProcessRef] = []
        if let recipient = wake.deliveredTo, let process = connections[recipient]?.identity.process {
            processes.append(process)
        }
        if let launched = app.launch?.process, !processes.contains(launched) { processes.append(launched) }
        terminate(processes, of: key, now: now, into: &actions)
        if !removeAppIfUnused(key) { reconcile(key, into: &actions) } else { leaveDrain(key, into: &actions) }
    }

    private func undeliveredWakes(of app: AppID) -> [String] {
        (apps[.app(app)]?.wakes ?? []).filter { wakes[$0]?.delivered == false }
    }

    /// Forgets a wake and its timer.
    /// Wakes handed to `connection` and not completed, which closed: nobody
    /// can complete them now. They fail (no offence: the app did not
    /// overstay, it went), and their events wait for the next wake, which a
    /// new instance's CheckIn is; before, they waited out their budget and
    /// counted against the app while another instance ran on.
    mutating func failWakes(handedTo connection: ConnectionID, of app: AppID) -> [CoreAction] {
        let orphaned = apps[.app(app)]?.wakes.filter { wakes[$0]?.deliveredTo == connection } ?? []
        return orphaned.map { token in
            let wake = dropWake(token)
            return .wakeFailed(token: token, plugin: wake.plugin, app: app, reason: "the connection it was handed to closed before completing it")
        }
    }

    private mutating func dropWake(_ token: String) -> WakeRecord {
        let wake = wakes.removeValue(forKey: token)!
        timers.cancel(.wake(token))
        modifyApp(.app(wake.app)) { $0.wakes.removeAll { $0 == token } }
        return wake
    }

    private mutating func noteLaunchFailure(_ app: AppID, error: String) {
        let failures = (backoffs[app]?.failures ?? 0) + 1
        backoffs[app] = LaunchBackoff(
            failures: failures, lastError: error, retryAt: clock.now + LaunchBackoff.wait(after: failures))
    }
}
