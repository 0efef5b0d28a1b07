// Implementation notes: suspension and the backlog after a wake
//
// iOS suspends an app that is in the background with nothing to do, and
// every background app when the device sleeps: it stays in memory, frozen,
// and its clocks stop. iOS also thaws it when the user brings it back; a
// desktop daemon cannot see that (a window's focus is the compositor's), and
// a frozen app cannot say it itself. So here an app in the background (or
// launched and not checked in yet) is suspended
//   - while the machine sleeps: every process the daemon can tie to it;
//   - while it waits for its turn in the backlog after a wake: the same;
//   - when the daemon launched it for a background event and it has had
//     nothing to do for `policy.idleGrace` (1 s: time to read the answer to
//     its last completion): only the process the daemon launched (a headless
//     launch, which no user is looking at; an instance the user opened is
//     left running). One launched by an earlier run of the daemon and taken
//     over after a crash is waited for to check in again for
//     `policy.adoptionGrace` (30 s) first: frozen, it could not.
// The engine decides; the shell freezes the processes the engine names — only
// those it can tie to the app: the one it launched, and those whose app id it
// verified (Flatpak, systemd unit). A process that merely claimed an id with
// CheckIn, or a connection that is an app of its own, is never frozen; its
// clocks still stop. What is frozen is kept per app, so a process that turns
// up later (a launch that completes while the app is held back) is frozen
// too, and one that can no longer be tied to the app is thawed. An app is
// thawed before any event is handed to it and before it is signalled, and is
// not frozen again while its SIGKILL is pending. While the machine sleeps,
// events for apps that can be held back wait: nothing is launched or
// delivered until the wake, when the backlog takes them.
//
// On a wake from sleep the background apps with work left — tasks paused by
// the sleep, wakes asked for meanwhile or since — form the backlog. At most
// `policy.maxConcurrentWakes` of them run at once, each for at most
// `policy.chunk`; then it is suspended again (its budgets keep what is left)
// and goes to the back of the queue while the next one runs. An app that
// runs out of work leaves at once and the next one starts. Apps that get work
// while the backlog drains join the queue (a wake for an app that is not
// running launches it only on its turn). Foreground apps and idle apps are
// never held back. The backlog is done when the queue is empty and nobody
// has a turn.

extension BackgroundEngine {
    // MARK: Queries

    /// Whether the app is suspended (iOS's word; `bgtaskctl apps` shows it).
    public func isSuspended(_ key: AppKey) -> Bool {
        apps[key]?.suspended ?? false
    }

    /// Whether the backlog after a wake from sleep is being drained.
    public var isDraining: Bool { drain != nil }

    /// The backlog: apps having their turn now, then those waiting, in turn order.
    public var backlog: (running: [AppKey], waiting: [AppKey]) {
        (drain?.running.map(\.key) ?? [], drain?.queue ?? [])
    }

    // MARK: Deciding

    /// An app in the background, or launched and not yet checked in.
    func isBackground(_ app: AppRecord) -> Bool {
        app.state == .background || app.connections.isEmpty
    }

    /// Open tasks, pending wakes, or a launch not yet checked in.
    func hasWork(_ key: AppKey) -> Bool {
        guard let app = apps[key] else { return false }
        if app.openTasks > 0 || !app.wakes.isEmpty { return true }
        if let launch = app.launch, !launch.checkedIn {
            guard let by = launch.checkInBy else { return true }
            return clock.now < by
        }
        return false
    }

    /// The processes the daemon can tie to the app: the one it launched, and
    /// those of connections whose app id it verified.
    func freezableProcesses(_ key: AppKey) -> [ProcessRef] {
        guard case .app = key, let app = apps[key] else { return [] }
        var processes: [ProcessRef] = []
        if let launched = app.launch?.process, !dying.contains(launched) { processes.append(launched) }
        for connection in app.connections {
            guard let identity = connections[connection]?.identity, identity.appIDSource != nil,
                  let process = identity.process, !processes.contains(process), !dying.contains(process) else { continue }
            processes.append(process)
        }
        return processes
    }

    /// Whether the drain can hold the app back: it can freeze its processes,
    /// or it has none yet (it is launched only on its turn).
    func canHoldBack(_ key: AppKey) -> Bool {
        guard case .app = key, let app = apps[key] else { return false }
        if app.connections.isEmpty && app.launch?.process == nil { return true }
        return !freezableProcesses(key).isEmpty
    }

    /// Whether events for a background app wait now: the machine sleeps
    /// (whether or not the app can be frozen: an event is not handed over
    /// during a sleep), or the backlog drains and it is not the app's turn
    /// (when it can be held back).
    func isHeldBack(_ key: AppKey) -> Bool {
        guard let app = apps[key], isBackground(app) else { return false }
        if isSleeping { return true }
        guard let drain, canHoldBack(key) else { return false }
        return !drain.isRunning(key)
    }

    /// Which of the app's processes should be frozen now, and whether it is
    /// suspended at all (see the notes above).
    func suspension(_ key: AppKey) -> (suspended: Bool, frozen: [ProcessRef]) {
        guard let app = apps[key], isBackground(app) else { return (false, []) }
        if let until = app.terminatingUntil, clock.now < until { return (false, []) }
        if isSleeping || drain?.isQueued(key) == true { return (true, freezableProcesses(key)) }
        if !hasWork(key), let launched = app.launch?.process, let since = app.idleSince, clock.now >= since + policy.idleGrace {
            return (true, dying.contains(launched) ? [] : [launched])
        }
        return (false, [])
    }

    /// Starts or ends the grace of a launched app that has nothing to do (see ``TaskPolicy/idleGrace``).
    mutating func noteIdle(_ key: AppKey) {
        guard let app = apps[key] else { return }
        let idle = isBackground(app) && !hasWork(key) && app.launch?.process != nil
        if idle, app.idleSince == nil {
            let now = clock.now
            modifyApp(key) { $0.idleSince = now }
            timers.schedule(.idle(key), at: now + policy.idleGrace)
        } else if !idle, app.idleSince != nil {
            modifyApp(key) { $0.idleSince = nil }
            timers.cancel(.idle(key))
        }
    }

    /// Brings the app's suspension, its place in the backlog and its clocks
    /// in line with its state; the freeze or thaw it takes goes into `actions`.
    mutating func reconcile(_ key: AppKey, into actions: inout [CoreAction]) {
        guard let app = apps[key] else {
            leaveDrain(key, into: &actions)
            return
        }
        // The next app's turn goes after this one's freeze (see turnsEnded).
        var next: [CoreAction] = []
        defer { actions += next }
        if drain != nil {
            if drain!.isRunning(key), !hasWork(key) || !isBackground(app) {
                leaveDrain(key, into: &next)
            } else if !drain!.isRunning(key), !drain!.isQueued(key), hasWork(key), isHeldBack(key) {
                joinDrain(key, into: &actions)
            }
        }
        guard apps[key] != nil else { return }
        noteIdle(key)
        let current = apps[key]!
        let (suspended, want) = suspension(key)
        let thaw = current.frozen.filter { !want.contains($0) }
        let freeze = want.filter { !current.frozen.contains($0) }
        if suspended != current.suspended || !thaw.isEmpty || !freeze.isEmpty {
            modifyApp(key) { app in
                app.suspended = suspended
                app.frozen = want
            }
        }
        if !thaw.isEmpty { actions.append(.thaw(key, thaw)) }
        if !freeze.isEmpty { actions.append(.freeze(key, freeze)) }
        refreshClock(key)
    }

    // MARK: The backlog

    /// After a wake: every background app with work left waits for its turn,
    /// those whose last turn began longest ago first (never: first of all),
    /// then by id. In app-id order alone, wakes too short for a whole round
    /// gave the first apps every turn and the last ones none.
    mutating func startDrain(into actions: inout [CoreAction]) {
        let backlog = apps.keys.filter { key in
            guard let app = apps[key], isBackground(app), hasWork(key) else { return false }
            return canHoldBack(key)
        }.sorted { a, b in
            switch (lastTurn(of: a), lastTurn(of: b)) {
            case (nil, .some): true
            case (.some, nil): false
            case (.some(let x), .some(let y)) where x != y: x < y
            default: a.description < b.description
            }
        }
        if !backlog.isEmpty {
            drain = DrainState(queue: backlog)
            actions.append(.drainChanged)
        }
        settleDrain(into: &actions)
        // Apps that cannot be held back take no turn: what waited for the wake goes to them now.
        for key in apps.keys.sorted(by: { $0.description < $1.description }) where !backlog.contains(key) {
            guard let app = apps[key], isBackground(app), !app.wakes.isEmpty else { continue }
            startWork(key, into: &actions)
        }
        // Everything else (foreground apps, apps that cannot be held back) runs again.
        for key in apps.keys.sorted(by: { $0.description < $1.description }) where drain?.isRunning(key) != true {
            reconcile(key, into: &actions)
        }
    }

    private func lastTurn(of key: AppKey) -> MonotonicInstant? {
        if case .app(let id) = key { lastTurns[id] } else { nil }
    }

    /// The app has work and waits for its turn (which may come at once).
    mutating func joinDrain(_ key: AppKey, into actions: inout [CoreAction]) {
        guard drain != nil, !drain!.isQueued(key), !drain!.isRunning(key) else { return }
        drain!.queue.append(key)
        actions.append(.drainChanged)
        settleDrain(into: &actions)
    }

    /// The app is done (or gone, or came to the foreground): its turn ends and the next one starts.
    mutating func leaveDrain(_ key: AppKey, into actions: inout [CoreAction]) {
        guard drain != nil, drain!.isRunning(key) || drain!.isQueued(key) else { return }
        drain!.running.removeAll { $0.key == key }
        drain!.queue.removeAll { $0 == key }
        timers.cancel(.chunk(key))
        actions.append(.drainChanged)
        settleDrain(into: &actions)
    }

    /// These apps' turns are over: each goes to the back of the queue if it
    /// still has work, and the next ones start. Turns that end together are
    /// settled together, so an app whose next turn comes at once is not
    /// frozen and thawed in between. The freezes come before the next turns'
    /// thaws in `actions`: the shell lets those freezes complete first, so
    /// that no more than `maxConcurrentWakes` apps ever run at once.
    mutating func turnsEnded(_ keys: [AppKey], into actions: inout [CoreAction]) {
        guard drain != nil else { return }
        var ended: [AppKey] = []
        for key in keys where drain!.isRunning(key) {
            drain!.running.removeAll { $0.key == key }
            if hasWork(key) { drain!.queue.append(key) }
            ended.append(key)
        }
        guard !ended.isEmpty else { return }
        var next: [CoreAction] = [.drainChanged]
        settleDrain(into: &next)
        for key in ended where drain?.isRunning(key) != true { reconcile(key, into: &actions) }
        actions += next
    }

    /// Gives free turns to the next apps in the queue; ends the backlog when it is empty.
    mutating func settleDrain(into actions: inout [CoreAction]) {
        while let current = drain, current.running.count < policy.maxConcurrentWakes, !current.queue.isEmpty {
            let key = drain!.queue.removeFirst()
            guard hasWork(key), let app = apps[key], isBackground(app) else {
                if apps[key] != nil { reconcile(key, into: &actions) }
                continue
            }
            let now = clock.now
            let until = now + policy.chunk
            if case .app(let id) = key { lastTurns[id] = now }
            drain!.running.append((key, until))
            timers.schedule(.chunk(key), at: until)
            reconcile(key, into: &actions)  // thawed before its events reach it
            startWork(key, into: &actions)
        }
        if let current = drain, current.isEmpty {
            drain = nil
            actions.append(.drainChanged)
        }
    }

    /// The app's turn: its waiting events go to its latest connection, or it is launched.
    mutating func startWork(_ key: AppKey, into actions: inout [CoreAction]) {
        guard case .app(let id) = key, let app = apps[key] else { return }
        if let target = app.checkedIn.last {
            actions += handOverWaitingWakes(key, to: target)
        } else if app.launch == nil, let first = app.wakes.first.flatMap({ wakes[$0] }) {
            modifyApp(key) { $0.launch = LaunchRecord(reason: first.reason) }
            actions.append(.launch(id, reason: first.reason))
        }
        refreshClock(key)
    }
}
