public import BgTaskProtocol
// Implementation notes
//
// Background time belongs to the app, not the task (as iOS's
// backgroundTimeRemaining): every connection bound to an app, and every task
// on those connections, shares one clock and one deadline. A connection that
// never checked in is an app of its own.
//
// The clock runs while the app is in the background and the machine is awake,
// and is paused otherwise. Time used stays used across a pause; the budget is
// given back only when the app is in the foreground with no task open, i.e.
// once a foreground stretch carries no background work over.
//
// At deadline − warning every open task's owner gets TaskExpiring; at the
// deadline every open task's owner gets TaskExpired, its tasks are closed and
// its process gets SIGTERM, then SIGKILL after the grace period (the shell
// sends SIGKILL only if the process is still alive). An app with no open task
// is never touched, and needs no timer at all.
//
// Wakes: a plugin asks for an app to be woken for an event with a budget and
// a one-shot token. A running app that checked in gets the event at once; an
// app that is not running is launched, starts in the background with the
// event's budget, and gets its events right after its CheckIn. A token not
// completed within its budget terminates the app like an overstaying task (the
// plugin counts the offence). A launch that fails, or a launched process that
// dies before checking in, holds further launches back for a while that
// doubles with each failure, so a broken desktop entry is not retried in a
// tight loop.
//
// The engine keeps one timer entry per app with open tasks in the background,
// one per pending wake and one per pending SIGKILL; the shell arms a single
// timer for the earliest.

/// An open task. (At file scope, not nested in the generic engine, so that the
/// collections holding it are specialised instead of looking up metadata.)
struct TaskRecord: Sendable {
    var name: String
    var connection: ConnectionID
}

/// What a deadline is for: an app's warning or expiry, a wake's budget, or a pending SIGKILL.
enum TimerTarget: Hashable, Sendable {
    case app(AppKey)
    case wake(String)
    case kill(ProcessRef, AppKey)
    /// The end of an app's turn while the backlog after a wake drains.
    case chunk(AppKey)
    /// The end of the grace a launched app gets once it has nothing to do.
    case idle(AppKey)
    /// The end of the time an app taken over after a crash has to check in again.
    case adoption(AppKey)
}

/// The core's state machine: apps, connections, tasks, wakes and launches and
/// their deadlines, driven by calls and the clock, answering with ``CoreAction``s.
public struct BackgroundEngine<Clock: MonotonicClock> {
    public let policy: TaskPolicy
    public let clock: Clock
    /// Whether the machine is asleep (every background clock is paused).
    public private(set) var isSleeping = false

    var connections: [ConnectionID: ConnectionRecord] = [:]
    var apps: [AppKey: AppRecord] = [:]
    var tasks: [UInt32: TaskRecord] = [:]
    var wakes: [String: WakeRecord] = [:]
    var backoffs: [AppID: LaunchBackoff] = [:]
    /// When each app's latest turn in a backlog after a wake began: the next
    /// backlog puts those served longest ago (or never) first. Kept apart
    /// from the app's record, which goes whenever nothing of the app runs (a
    /// launched app that exits), so that it does not count as never served.
    var lastTurns: [AppID: MonotonicInstant] = [:]
    var lastTaskID: UInt32 = 0

    /// The last task id handed out.
    public var lastIssuedTaskID: UInt32 { lastTaskID }

    /// Task ids go on after `id`: the shell keeps ids from one run to the
    /// next, so that an id a client kept from an earlier run names no task
    /// of this one.
    public mutating func continueTaskIDs(after id: UInt32) {
        lastTaskID = max(lastTaskID, id)
    }
    var timers = DeadlineQueue<TimerTarget, MonotonicInstant>()
    /// The backlog after a wake from sleep, while it drains.
    var drain: DrainState?
    /// Processes sent SIGKILL that have not been seen to go yet: never frozen again.
    var dying: Set<ProcessRef> = []
    /// The uid an app belongs to before anything of it runs: the shell
    /// answers the daemon's own uid for apps with a desktop entry (they are
    /// that user's apps), nil for others, which belong to their first claimant.
    let defaultOwner: (AppID) -> UInt32?

    public init(policy: TaskPolicy, clock: Clock, defaultOwner: @escaping (AppID) -> UInt32? = { _ in nil }) {
        self.policy = policy
        self.clock = clock
        self.defaultOwner = defaultOwner
    }

    // MARK: Queries

    /// Open tasks across all connections.
    public var taskCount: Int { tasks.count }

    /// Connections the engine holds state for.
    public var connectionCount: Int { connections.count }

    /// The caller's background time left, in seconds; `Double.greatestFiniteMagnitude`
    /// while its app is not in the background.
    public func secondsRemaining(for caller: CallerIdentity) -> Double {
        if let key = connections[caller.connection]?.app { return secondsRemaining(of: key) }
        // Not joined yet: what it will have once it joins, as the first
        // connection of an app launched for an event.
        let key = appKey(for: caller)
        if let budget = launchBudget(joining: key) { return budget.seconds }
        return secondsRemaining(of: key)
    }

    /// The app a connection runs on, if the engine knows the connection.
    public func app(of connection: ConnectionID) -> AppKey? {
        connections[connection]?.app
    }

    /// The state of an app, if the engine knows it.
    public func state(of app: AppKey) -> ApplicationState? {
        apps[app]?.state
    }

    /// Every open task, by id.
    public func tasksSnapshot() -> [TaskInfo] {
        tasks.keys.sorted().map { id in
            let task = tasks[id]!
            let key = connections[task.connection]!.app
            return TaskInfo(id: id, owner: key.description, name: task.name, secondsRemaining: secondsRemaining(of: key))
        }
    }

    /// When the shell must next call ``fireDueTimers()``; nil when nothing is pending.
    public mutating func nextDeadline() -> MonotonicInstant? {
        timers.earliest()
    }

    // MARK: Calls

    /// Opens a task on the caller's connection.
    public mutating func beginTask(named name: String, caller: CallerIdentity) throws(CoreError) -> TaskBegun {
        let nameBytes = name.utf8.count
        guard nameBytes <= policy.maxNameBytes else {
            throw CoreError(.invalidArgs, "task name is \(nameBytes) bytes long; the limit is \(policy.maxNameBytes)")
        }
        let connection = register(caller)
        let held = connections[connection]!.tasks.count
        guard held < policy.maxTasksPerConnection else {
            throw CoreError(.limitExceeded, "this connection already holds \(held) open tasks (Tasks.MaxPerConnection)")
        }
        guard lastTaskID < UInt32.max else {
            throw CoreError(.limitExceeded, "task ids are exhausted until the daemon restarts")
        }
        // A task begun with no time left could only expire at once, and its
        // process be terminated before its expiration handler could end it:
        // an app left in the background past its budget (which Linux does not
        // suspend) is refused, as iOS answers UIBackgroundTaskInvalid, and
        // goes on untouched.
        let caller = connections[connection]!.app
        if apps[caller]?.state == .background, secondsRemaining(of: caller) <= 0 {
            throw CoreError(.limitExceeded, "no background time is left: the app has been in the background for its whole"
                + " budget (Tasks.BudgetSec); it gets time again once it is in the foreground, or woken for an event")
        }
        lastTaskID += 1
        let id = lastTaskID
        tasks[id] = TaskRecord(name: name, connection: connection)
        connections[connection]!.tasks.insert(id)
        let key = connections[connection]!.app
        var actions: [CoreAction] = [.tasksChanged]
        let warned = modifyApp(key) { app -> Bool in
            app.openTasks += 1
            return app.warned
        } ?? false
        reconcile(key, into: &actions)
        let remaining = secondsRemaining(of: key)
        // Inside the warning window already: this task's expiration handler runs at once.
        if warned { actions.append(.sendTaskExpiring(connection, task: id, secondsLeft: remaining)) }
        reschedule(key)
        return TaskBegun(id: id, secondsRemaining: remaining, actions: actions)
    }

    /// Closes one of the caller's own tasks.
    public mutating func endTask(_ id: UInt32, caller: ConnectionID) throws(CoreError) -> [CoreAction] {
        // The same answer for unknown ids and other connections' ids: nobody learns of others' tasks.
        guard let task = tasks[id], task.connection == caller else {
            throw CoreError(.noSuchTask, "no task \(id) is open on this connection")
        }
        tasks[id] = nil
        connections[caller]!.tasks.remove(id)
        let key = connections[caller]!.app
        modifyApp(key) { $0.openTasks -= 1 }
        var actions: [CoreAction] = [.tasksChanged]
        reconcile(key, into: &actions)
        return actions
    }

    /// Moves the caller's app to `state`; the background clock follows.
    public mutating func setState(_ state: ApplicationState, caller: CallerIdentity) -> [CoreAction] {
        let key = connections[register(caller)]!.app
        modifyApp(key) { app in
            if state == .background {
                app.foregroundBy.removeAll()
                app.backgroundBy.insert(caller.connection)
            } else {
                app.foregroundBy.insert(caller.connection)
                app.backgroundBy.remove(caller.connection)
            }
        }
        guard apps[key]!.state != state else { return [] }
        modifyApp(key) { $0.state = state }
        var actions: [CoreAction] = []
        reconcile(key, into: &actions)
        if case .app(let id) = key { actions.append(.appStateChanged(id, state)) }
        // Out of the background, nothing holds its events back any more (they
        // waited for a wake or a turn): they go to it now, not to expire.
        if state != .background, !isHeldBack(key), let target = apps[key]?.checkedIn.last {
            actions += handOverWaitingWakes(key, to: target)
        }
        return actions
    }

    /// Binds the caller's connection to `appIDText`. The id must be valid, must
    /// match any id the daemon already knows for the caller, and a connection
    /// binds to one app only (checking in again with the same id is fine).
    /// Events waiting for the app follow the reply (``CheckInResult/actions``).
    public mutating func checkIn(appID appIDText: String, caller: CallerIdentity) throws(CoreError) -> CheckInResult {
        let appID = try AppID(validating: appIDText)
        if let known = caller.appID, known != appID {
            let source = caller.appIDSource?.rawValue ?? "its credentials"
            throw CoreError(.notPermitted, "this caller is \(known) (from \(source)); it cannot check in as \(appID)")
        }
        if caller.isSandboxed && caller.appID == nil {
            throw CoreError(.notPermitted, "this caller is sandboxed and its app id is unknown; it cannot claim one")
        }
        if let owner = owner(of: appID), caller.uid != owner {
            throw CoreError(
                .notPermitted,
                "\(appID) belongs to uid \(owner); a connection of uid \(caller.uid.map(String.init) ?? "unknown") cannot check in as it")
        }
        let connection = register(caller)
        // What the connection asked for itself before it joined the app (a
        // caller whose app id was known is registered under the app already).
        let ownStateBefore: ApplicationState? = if case .connection = connections[connection]!.app {
            apps[connections[connection]!.app]?.state
        } else {
            nil
        }
        var actions: [CoreAction] = []
        switch connections[connection]!.app {
        case .app(let current):
            guard current == appID else {
                throw CoreError(.notPermitted, "this connection is already checked in as \(current)")
            }
        case .connection:
            actions += move(connection, to: .app(appID))
        }
        let key = AppKey.app(appID)
        let launchedByDaemon = caller.appIDSource == .launched
        let launchReason = apps[key]?.launch.flatMap { launch in
            launch.isLaunchedInstance(caller.process, launchedByDaemon: launchedByDaemon) ? launch.reason : nil
        }
        let firstCheckIn = modifyApp(key) { app -> Bool in
            // The launched instance's check-in; a copy the user started says nothing of the launch.
            if launchReason != nil, app.launch?.checkedIn == false {
                app.launch?.checkedIn = true
                app.launch?.checkedInProcess = caller.process
            }
            guard !app.checkedIn.contains(connection) else { return false }
            app.checkedIn.append(connection)
            return true
        } ?? false
        let app = apps[key]!
        let reason = launchReason ?? LaunchReason.user.rawValue
        if app.launch != nil { backoffs[appID] = nil }  // it started and checked in: the launch works
        // Again on the same connection: the reply counts what waits for the
        // app, so the plugins send it there, as the first time.
        actions.append(firstCheckIn ? .appCheckedIn(appID, connection, reason: reason) : .appCheckedInAgain(appID, connection, reason: reason))
        // A copy the user started, joining an instance launched for events in
        // the background, brings the app forward, as a connection of an app
        // the daemon did not launch starts in the foreground: held to the
        // launch's background wakes, it was terminated for missing them.
        // Only where the launch's cgroup tells its processes apart: elsewhere
        // the first to check in is taken for the launch, and the one after it
        // may be the launched app itself.
        if firstCheckIn, launchReason == nil, app.launch?.inOwnGroup == true, app.state == .background, ownStateBefore != .background {
            modifyApp(key) { app in
                app.state = .active
                app.foregroundBy.insert(connection)
            }
            actions.append(.appStateChanged(appID, .active))
        }
        // Waiting events go to this connection, in the order they were asked
        // for, unless the app waits for its turn in the backlog after a wake.
        let deliveries = isHeldBack(key) ? [] : handOverWaitingWakes(key, to: connection)
        reconcile(key, into: &actions)
        return CheckInResult(reason: reason, pending: UInt32(deliveries.count), actions: actions + deliveries)
    }

    /// Forgets a connection that left the bus; its tasks close at once.
    public mutating func disconnect(_ connection: ConnectionID) -> [CoreAction] {
        guard let record = connections.removeValue(forKey: connection) else { return [] }
        for id in record.tasks { tasks[id] = nil }
        if let process = record.identity.process, !connections.values.contains(where: { $0.identity.process == process }) {
            dying.remove(process)
        }
        let frozenBefore = apps[record.app]?.frozen ?? []
        var actions: [CoreAction] = record.tasks.isEmpty ? [] : [.tasksChanged]
        let heldForeground = apps[record.app]?.foregroundBy.contains(connection) ?? false
        if case .app(let id) = record.app { actions += failWakes(handedTo: connection, of: id) }
        actions += detach(connection, from: record.app, taking: record.tasks.count)
        // A frozen process the daemon can no longer tie to the app (its
        // connection was the tie) is thawed: nothing would thaw it later.
        if apps[record.app] == nil {
            if !frozenBefore.isEmpty { actions.append(.thaw(record.app, frozenBefore)) }
            leaveDrain(record.app, into: &actions)
        } else {
            if heldForeground { backgroundIfOnlyTheLaunchedInstanceIsLeft(record.app, into: &actions) }
            reconcile(record.app, into: &actions)
        }
        return actions
    }

    /// The connection that put the app in the foreground left, and the only
    /// ones left are of the instance the daemon launched for an event (which
    /// did not ask for the foreground itself): the user quit the copy they
    /// opened, and the app is back in the background, where that instance
    /// is. Left `active`, it would be held out of fetches, its clock paused,
    /// and its launched instance never suspended nor held to its wakes' budgets.
    private mutating func backgroundIfOnlyTheLaunchedInstanceIsLeft(_ key: AppKey, into actions: inout [CoreAction]) {
        guard case .app(let id) = key, let app = apps[key], app.state != .background, app.foregroundBy.isEmpty,
              let launch = app.launch, !app.connections.isEmpty
        else { return }
        let onlyLaunched = app.connections.allSatisfy { connection in
            guard let identity = connections[connection]?.identity else { return false }
            return launch.isLaunchedInstance(identity.process, launchedByDaemon: identity.appIDSource == .launched)
        }
        guard onlyLaunched else { return }
        modifyApp(key) { $0.state = .background }
        actions.append(.appStateChanged(id, .background))
    }

    /// The machine goes to sleep or wakes. Asleep, every background app is
    /// suspended and every clock pauses; awake, the background apps with work
    /// left (the backlog) run in turns (see ``DrainState``).
    public mutating func setSleeping(_ sleeping: Bool) -> [CoreAction] {
        guard sleeping != isSleeping else { return [] }
        isSleeping = sleeping
        var actions: [CoreAction] = [.sleepingChanged(sleeping)]
        if sleeping {
            if drain != nil {
                for entry in drain!.running { timers.cancel(.chunk(entry.key)) }
                drain = nil
                actions.append(.drainChanged)
            }
            for key in apps.keys.sorted(by: { $0.description < $1.description }) { reconcile(key, into: &actions) }
        } else {
            startDrain(into: &actions)
        }
        return actions
    }

    /// Handles every deadline that is due: warnings, expiries, SIGKILLs.
    public mutating func fireDueTimers() -> [CoreAction] {
        var actions: [CoreAction] = []
        var turnsOver: [AppKey] = []
        var killed: [AppKey] = []
        var idled: [AppKey] = []
        let now = clock.now
        while let target = timers.popDue(at: now) {
            switch target {
            case .app(let key):
                appTimerFired(key, now: now, into: &actions)
            case .wake(let token):
                expireWake(token, now: now, into: &actions)
            case .kill(let process, let key):
                actions.append(.signalProcess(process, .kill, app: key))
                dying.insert(process)
                if !killed.contains(key) { killed.append(key) }
            case .chunk(let key):
                turnsOver.append(key)
            case .idle(let key), .adoption(let key):
                if !idled.contains(key) { idled.append(key) }
            }
        }
        if !turnsOver.isEmpty { turnsEnded(turnsOver, into: &actions) }
        // The SIGKILLs went out: what is left of those apps may be suspended again.
        for key in killed {
            guard let until = apps[key]?.terminatingUntil, until <= now else { continue }
            modifyApp(key) { $0.terminatingUntil = nil }
            reconcile(key, into: &actions)
        }
        // Last: a grace that ends with a SIGKILL due at the same time freezes nothing that is dying.
        for key in idled where apps[key] != nil { reconcile(key, into: &actions) }
        return actions
    }

    // MARK: Internals

    /// The app a caller runs as: its known app id, unless that app belongs to
    /// another uid — then the caller is an app of its own, and can reach
    /// nothing of the other user's app.
    func appKey(for identity: CallerIdentity) -> AppKey {
        guard let id = identity.appID else { return .connection(identity.connection) }
        if let owner = owner(of: id), identity.uid != owner { return .connection(identity.connection) }
        return .app(id)
    }

    /// Gives the daemon's user the apps another uid claimed before their
    /// desktop entries came: an app with an entry is the user's (the shell's
    /// `defaultOwner`). The other uid's connections become apps of their own,
    /// and the wakes handed to them fail; the user's processes may then check
    /// in as the app and get its events. Call when desktop entries change.
    public mutating func reclaimApps() -> [CoreAction] {
        var actions: [CoreAction] = []
        let claimed = apps.keys.filter { key in
            guard case .app(let id) = key, let owner = defaultOwner(id) else { return false }
            return apps[key]!.owner != owner
        }.sorted { $0.description < $1.description }
        for key in claimed {
            guard case .app(let id) = key, let owner = defaultOwner(id) else { continue }
            for connection in apps[key]?.connections ?? [] where connections[connection]?.identity.uid != owner {
                actions += failWakes(handedTo: connection, of: id)
                // Frozen as the app, its process is thawed here; as an app of its own it is held as such.
                if let process = connections[connection]?.identity.process, apps[key]?.frozen.contains(process) == true {
                    modifyApp(key) { $0.frozen.removeAll { $0 == process } }
                    actions.append(.thaw(key, [process]))
                }
                actions += move(connection, to: .connection(connection))
                reconcile(.connection(connection), into: &actions)
            }
            if apps[key] == nil {
                leaveDrain(key, into: &actions)
            } else {
                modifyApp(key) { $0.owner = owner }
            }
        }
        return actions
    }

    /// The uid an app belongs to: its record's, else the shell's default.
    func owner(of app: AppID) -> UInt32? {
        if let record = apps[.app(app)] { return record.owner }
        return defaultOwner(app)
    }

    func secondsRemaining(of key: AppKey) -> Double {
        guard let app = apps[key], app.state == .background else { return .greatestFiniteMagnitude }
        return app.clock.remaining(at: clock.now).seconds
    }

    /// Mutates an app record in place (no copy of its connection list).
    @discardableResult
    mutating func modifyApp<R>(_ key: AppKey, _ body: (inout AppRecord) -> R) -> R? {
        guard let index = apps.index(forKey: key) else { return nil }
        return body(&apps.values[index])
    }

    /// Makes sure the engine holds the caller's connection, joining its app.
    mutating func register(_ identity: CallerIdentity) -> ConnectionID {
        let connection = identity.connection
        if connections[connection] != nil { return connection }
        let key = appKey(for: identity)
        connections[connection] = ConnectionRecord(identity: identity, app: key)
        if apps[key] == nil {
            let owner = if case .app(let id) = key { defaultOwner(id) ?? identity.uid } else { identity.uid }
            apps[key] = AppRecord(budget: policy.budget, owner: owner)
        }
        join(connection, key)
        return connection
    }

    /// Adds a connection to an app. The first connection of an app the daemon
    /// launched for an event starts in the background, with what is left of
    /// that event's budget as its background time.
    private mutating func join(_ connection: ConnectionID, _ key: AppKey) {
        let launchBudget = launchBudget(joining: key)
        modifyApp(key) { app in
            app.connections.append(connection)
            if let launchBudget {
                app.state = .background
                app.clock = BackgroundClock(budget: launchBudget)
                app.warned = false
            }
        }
        if launchBudget != nil { refreshClock(key) }
    }

    /// The background time a connection joining the app starts it with: what
    /// is left of the longest of its events' budgets (the time it has for
    /// them, as ``grantWakeTime(_:token:)`` gives when they are handed over)
    /// when it is the first connection of an app launched for them; nil otherwise.
    private func launchBudget(joining key: AppKey) -> Duration? {
        let now = clock.now
        guard let app = apps[key], app.connections.isEmpty, app.launch != nil else { return nil }
        return app.wakes.compactMap { wakes[$0]?.clock.remaining(at: now) }.max()
    }

    /// Rebinds a connection (and its open tasks) to another app. A new app
    /// record takes over the old one's state and clock, so checking in never
    /// buys fresh background time.
    private mutating func move(_ connection: ConnectionID, to newKey: AppKey) -> [CoreAction] {
        let record = connections[connection]!
        let oldApp = apps[record.app]!
        let heldForeground = oldApp.foregroundBy.contains(connection)
        let heldBackground = oldApp.backgroundBy.contains(connection)
        var actions = detach(connection, from: record.app, taking: record.tasks.count)
        if apps[newKey] == nil {
            let owner = if case .app(let id) = newKey { defaultOwner(id) ?? record.identity.uid } else { record.identity.uid }
            var app = AppRecord(budget: policy.budget, owner: owner)
            app.state = oldApp.state
            app.clock = oldApp.clock
            app.warned = oldApp.warned
            apps[newKey] = app
        } else if apps[newKey]!.connections.isEmpty && apps[newKey]!.launch == nil {
            // The app has no one connected: this connection's state and clock carry over.
            modifyApp(newKey) { app in
                app.state = oldApp.state
                app.clock = oldApp.clock
                app.warned = oldApp.warned
            }
        }
        join(connection, newKey)
        modifyApp(newKey) { app in
            app.openTasks += record.tasks.count
            if heldForeground && app.state != .background { app.foregroundBy.insert(connection) }
            if heldBackground && app.state == .background { app.backgroundBy.insert(connection) }
        }
        connections[connection]!.app = newKey
        refreshClock(newKey)
        if !record.tasks.isEmpty { actions.append(.tasksChanged) }
        return actions
    }

    /// Removes a connection from its app; the app is gone when nothing of it is left.
    private mutating func detach(_ connection: ConnectionID, from key: AppKey, taking taskCount: Int) -> [CoreAction] {
        let lastGone = modifyApp(key) { app -> Bool in
            app.connections.removeAll { $0 == connection }
            app.checkedIn.removeAll { $0 == connection }
            app.foregroundBy.remove(connection)
            app.backgroundBy.remove(connection)
            app.openTasks -= taskCount
            return app.connections.isEmpty && app.launch?.process == nil
        } ?? false
        var actions: [CoreAction] = []
        if lastGone, case .app(let id) = key { actions.append(.appGone(id)) }
        if !removeAppIfUnused(key) { refreshClock(key) }
        return actions
    }

    /// Drops an app's record once nothing refers to it; returns whether it did.
    @discardableResult
    mutating func removeAppIfUnused(_ key: AppKey) -> Bool {
        guard let app = apps[key], app.isUnused else { return false }
        apps[key] = nil
        timers.cancel(.app(key))
        timers.cancel(.idle(key))
        return true
    }

    /// Runs or pauses an app's clock to match its state and the machine's, and
    /// gives the budget back to a foreground app with nothing open.
    mutating func refreshClock(_ key: AppKey) {
        let now = clock.now
        let sleeping = isSleeping
        let fullBudget = policy.budget
        let wakesRun = modifyApp(key) { app -> Bool in
            if app.state == .background && !sleeping && !app.suspended {
                app.clock.start(at: now)
            } else {
                app.clock.pause(at: now)
            }
            if app.state != .background {
                app.warned = false
                // The whole budget back: not the shorter one a launch or an event granted.
                if app.openTasks == 0 { app.clock = BackgroundClock(budget: fullBudget) }
            }
            return !sleeping && !app.suspended
        } ?? false
        reschedule(key)
        // A wake's budget drains only while its app runs.
        for token in apps[key]?.wakes ?? [] {
            // One lookup per token: this runs several times on every wake's path.
            guard let index = wakes.index(forKey: token) else { continue }
            if wakesRun {
                wakes.values[index].clock.start(at: now)
                if let deadline = wakes.values[index].clock.deadline { timers.schedule(.wake(token), at: deadline) }
            } else {
                wakes.values[index].clock.pause(at: now)
                timers.cancel(.wake(token))
            }
        }
    }

    /// Keeps the app's timer in step with its next warning or deadline.
    private mutating func reschedule(_ key: AppKey) {
        guard let app = apps[key], app.openTasks > 0, let deadline = app.clock.deadline else {
            timers.cancel(.app(key))
            return
        }
        timers.schedule(.app(key), at: app.warned ? deadline : deadline - policy.warning)
    }

    private mutating func appTimerFired(_ key: AppKey, now: MonotonicInstant, into actions: inout [CoreAction]) {
        guard let app = apps[key], app.openTasks > 0, let deadline = app.clock.deadline else {
            reschedule(key)
            return
        }
        if !app.warned && now >= deadline - policy.warning {
            modifyApp(key) { $0.warned = true }
            let left = app.clock.remaining(at: now).seconds
            for (connection, id) in openTasks(of: app) {
                actions.append(.sendTaskExpiring(connection, task: id, secondsLeft: left))
            }
        }
        if now >= deadline {
            expire(key, now: now, into: &actions)
        }
        reschedule(key)
    }

    /// The deadline passed: close every open task of the app, tell each owner,
    /// and terminate the processes that held them.
    private mutating func expire(_ key: AppKey, now: MonotonicInstant, into actions: inout [CoreAction]) {
        let app = apps[key]!
        // Tied to the overstay: processes that put the app in the background
        // themselves, and the instance the daemon launched. Another process of
        // the user that claimed the app and sent it to the background cannot
        // have one that never asked for it terminated.
        let askedForBackground = Set(app.backgroundBy.compactMap { connections[$0]?.identity.process })
        var offenders: [ProcessRef] = []
        var spared: [ProcessRef] = []
        for (connection, id) in openTasks(of: app) {
            actions.append(.sendTaskExpired(connection, task: id))
            tasks[id] = nil
            connections[connection]!.tasks.remove(id)
            let identity = connections[connection]!.identity
            guard let process = identity.process, !offenders.contains(process), !spared.contains(process) else { continue }
            let launched = app.launch?.isLaunchedInstance(process, launchedByDaemon: identity.appIDSource == .launched) ?? false
            if askedForBackground.contains(process) || launched {
                offenders.append(process)
            } else {
                spared.append(process)
                actions.append(.spareProcess(process, app: key))
            }
        }
        modifyApp(key) { $0.openTasks = 0 }
        actions.append(.tasksChanged)
        terminate(offenders, of: key, now: now, into: &actions)
    }

    /// SIGTERM now, SIGKILL after the grace period if still alive.
    mutating func terminate(_ processes: [ProcessRef], of key: AppKey, now: MonotonicInstant, into actions: inout [CoreAction]) {
        // Told to go already (its SIGKILL is pending, at its earlier time): a
        // second SIGTERM changes nothing. An app handed sixteen pushes got one,
        // and a log line, per push whose wake ran out; and the grace moved past
        // that SIGKILL left the app refused wake time after it.
        let fresh = processes.filter { timers.deadline(of: .kill($0, key)) == nil }
        guard !fresh.isEmpty else { return }
        // A frozen process must be thawed to take SIGTERM, and is not frozen again before SIGKILL.
        let killAt = now + policy.killGrace
        modifyApp(key) { $0.terminatingUntil = killAt }
        reconcile(key, into: &actions)
        for process in fresh {
            actions.append(.signalProcess(process, .terminate, app: key))
            timers.schedule(.kill(process, key), at: killAt)
        }
    }

    /// The app's open tasks as (owner, id), in a stable order.
    private func openTasks(of app: AppRecord) -> [(ConnectionID, UInt32)] {
        app.connections.flatMap { connection in
            connections[connection]!.tasks.sorted().map { (connection, $0) }
        }
    }
}
