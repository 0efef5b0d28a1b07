import BgTaskCore
import BgTaskPluginABI
import BgTaskProtocol
import CBgTaskShim
import Foundation
import Logging
import SDBus

// The daemon's side of apps, launches and plugins: starting the registry, the
// power monitor and the plugins, carrying out the core's wake and launch
// actions, and answering plugins for the engine (PluginEngineAccess).

extension Daemon {
    // MARK: Start-up and shutdown

    /// Scans desktop entries and starts following them and the power state.
    func startComponents() {
        do {
            try registry.start()
        } catch {
            logger.error("cannot watch desktop entries: \(error)")
        }
        knownEntries = Dictionary(uniqueKeysWithValues: registry.entries.map { ($0.id, $0) })
        registry.onChange = { [unowned self] in self.desktopEntriesChanged() }
        power.onChange = { [unowned self] state in
            self.logger.info("power state changed: \(state)")
            self.pluginServices.power = state
            self.refreshChanged()
        }
        power.start()
        launches.onStarted = { [unowned self] app, process in
            markLaunched(process)
            perform(engine.launchStarted(app, process: process.ref, inOwnGroup: process.placement == .cgroup))
        }
        launches.onFailed = { [unowned self] app, why, appsFault in
            perform(engine.launchFailed(app, error: why, holdBack: appsFault))
        }
        launcher.awaitsCheckIn = { [unowned self] process in engine.launchAwaitsCheckIn(process.appID, process: process.ref) }
        launcher.checkedInProcesses = { [unowned self] process in engine.checkedInProcesses(process.appID, besides: process.ref) }
        launcher.onHandOver = { [unowned self] from, to in
            engine.launchHandedOver(from.appID, from: from.ref, to: to.ref)
            freezer.replace(from.ref, with: to.ref)
            markLaunched(to)
        }
        launches.onExited = { [unowned self] process, status in
            unmarkLaunched(process.unit)
            // By its ref: a launch that lived on in its cgroup ends after its pid may have been reused.
            freezer.forget(process.ref)
            // Callers refused for want of descriptors lately: its check-in may
            // have been one of them, which is no fault of the app's.
            let shortage = callers.lastRefusalForDescriptors.map { bgt_monotonic_usec() &- $0 < 60_000_000 } ?? false
            perform(engine.launchedProcessExited(process.appID, process: process.ref, status: status.clause, holdBack: !shortage))
        }
        logind.onPrepareForSleep = { [unowned self] sleeping in self.logindPrepareForSleep(sleeping) }
        logind.onVanished = { [unowned self] in self.logindVanished() }
        logind.start()
        freezer.thawLeftovers()
        // A launched app still running after a crash of the daemon is held
        // to what it was held to: suspended when idle, not left as the user's.
        let (marks, unreadable) = launchMarks()
        for unit in unreadable { unmarkLaunched(unit) }
        let adopted = launcher.reclaimCgroupsOfEarlierRuns(launched: marks)
            + launcher.takeOverProcessesOfEarlierRuns(launched: marks)
        for process in adopted {
            perform(engine.adoptLaunched(process.appID, process: process.ref, reason: process.reason))
        }
        for unit in marks.keys where !adopted.contains(where: { $0.unit == unit }) { unmarkLaunched(unit) }
    }

    // MARK: Launch marks

    private static let marksPlugin = "/daemon", marksCollection = "launched"

    /// How often a mark that could not be stored is tried again.
    static let launchMarkRetrySeconds: UInt64 = 5

    /// Which process each launched app runs as, and where (see ``LaunchMark``),
    /// for a later run to take over. A mark that cannot be stored is logged
    /// and tried again every few seconds while the process runs: until it
    /// is stored, that app is not taken over after a crash.
    private func markLaunched(_ process: LaunchedProcess) {
        unstoredLaunchMarks[process.unit] = nil
        guard let start = AppLauncher.startTime(of: process.pid) else { return }
        let mark = LaunchMark(pid: process.pid, startTime: start, reason: process.reason, placement: process.placement,
                              bootID: LaunchMark.currentBootID, owner: launcher.cgroupGroup)
        putMark(mark, of: process, retried: false)
    }

    /// Stores a mark; one that cannot be stored waits for the next try.
    private func putMark(_ mark: LaunchMark, of process: LaunchedProcess, retried: Bool) {
        do {
            try store.putRecord(plugin: Self.marksPlugin, collection: Self.marksCollection, key: process.unit,
                                data: Array(mark.text.utf8))
            if retried { logger.notice("noted which process \(process.appID) runs as, now that it could be stored") }
        } catch {
            if !retried {
                let retry = Self.launchMarkRetrySeconds
                logger.warning("cannot note which process \(process.appID) runs as (\(error)); tried again every \(retry) s: until then a crash of bgtaskd leaves it running untracked")
            }
            unstoredLaunchMarks[process.unit] = (process, mark)
            armLaunchMarksRetry()
        }
    }

    private func armLaunchMarksRetry() {
        if launchMarksRetry == nil {
            do {
                launchMarksRetry = try loop.makeTimer { [unowned self] in
                    // The mark made at the launch: the main process may be gone (its cgroup lives on), its pid reused.
                    let waiting = unstoredLaunchMarks
                    unstoredLaunchMarks.removeAll()
                    for (process, mark) in waiting.values { putMark(mark, of: process, retried: true) }
                    if !unstoredLaunchMarks.isEmpty { armLaunchMarksRetry() }
                }
            } catch {
                logger.warning("cannot arm the retry of launch notes (\(error)): they wait for the next note that arms it")
                return
            }
        }
        launchMarksRetry?.arm(at: bgt_monotonic_usec() + Self.launchMarkRetrySeconds * 1_000_000)
    }

    private func unmarkLaunched(_ unit: String) {
        unstoredLaunchMarks[unit] = nil
        do {
            _ = try store.deleteRecord(plugin: Self.marksPlugin, collection: Self.marksCollection, key: unit)
        } catch {
            logger.debug("cannot forget the mark of \(unit): \(error)")
        }
    }

    /// The marks an earlier run left, and the keys of those that cannot be read (another build's: they go).
    private func launchMarks() -> (marks: [String: LaunchMark], unreadable: [String]) {
        do {
            var marks: [String: LaunchMark] = [:], unreadable: [String] = []
            for record in try store.records(plugin: Self.marksPlugin, collection: Self.marksCollection) {
                if let mark = LaunchMark(text: String(decoding: record.data, as: UTF8.self)) {
                    marks[record.key] = marks[record.key] ?? mark
                } else {
                    unreadable.append(record.key)
                }
            }
            if !unreadable.isEmpty { logger.info("\(unreadable.count) unreadable notes of launched processes dropped") }
            return (marks, unreadable)
        } catch {
            logger.warning("cannot read which processes an earlier run launched (\(error)); none is taken over")
            return ([:], [])
        }
    }

    /// Loads and starts every acceptable plugin; a refused one is logged and skipped.
    func startPlugins() {
        pluginServices.systemBusBack = { [weak self] in self?.systemBusBack() }
        let candidates = settings.pluginCandidates
            ?? PluginLoader(logger: logger).candidates(in: PluginLoader.directories(settings.pluginDirectories))
        let trial = PluginTrial(stateDirectory: settings.stateDirectory, logger: logger)
        for candidate in candidates {
            if let refusal = trial.refusal(of: candidate.path) {
                logger.error("refusing plugin \(candidate.path): \(refusal)")
                continue
            }
            let host = LoadedPlugin(candidate: candidate, services: pluginServices, engine: self)
            do {
                try trial.starting(candidate.path) { try host.start() }
                plugins.append(host)
                logger.info("loaded plugin \(host.name) \(host.version)", metadata: ["path": "\(host.path)"])
            } catch {
                logger.error("refusing plugin \(candidate.path): \(error)")
            }
        }
    }

    func stopPlugins() {
        for plugin in plugins { plugin.stop() }
    }

    /// The machine woke (or a plugin's time came): plugins may wake apps now.
    func offerWakeOpportunities() {
        broadcast(QueuedPluginEvent(type: BGT_EVENT_WAKE_OPPORTUNITY, realtimeMicroseconds: realtimeMicroseconds))
    }

    func broadcast(_ event: QueuedPluginEvent) {
        for plugin in plugins { plugin.post(event) }
    }

    /// The system bus, lost before, is connected again: plugins that know
    /// the event (ABI 1.10) subscribe there again.
    private func systemBusBack() {
        let event = QueuedPluginEvent(type: BGT_EVENT_SYSTEM_BUS_BACK, realtimeMicroseconds: realtimeMicroseconds)
        for plugin in plugins where plugin.abiMinor >= 10 { plugin.post(event) }
    }

    /// Tells the other plugins that asked (ABI 1.11, ``LoadedPlugin/wantsWakeEnds``)
    /// how a wake they were told of ended: what it brought the app counts
    /// only if it completed. The token itself stays with its plugin.
    private func announceEnd(of token: String, plugin name: String, app: AppID, as outcome: String, at now: UInt64) {
        guard announcedWakes.remove(token) != nil else { return }
        for other in plugins where other.name != name && other.wantsWakeEnds {
            other.post(QueuedPluginEvent(type: BGT_EVENT_APP_WAKE_ENDED, app: app.rawValue, state: outcome, reason: name, realtimeMicroseconds: now))
        }
    }

    private func plugin(named name: String) -> LoadedPlugin? {
        plugins.first { $0.name == name }
    }

    // MARK: Apps

    /// A desktop entry was added, removed or edited: launches that failed for
    /// an entry that changed may work now.
    private func desktopEntriesChanged() {
        let current = Dictionary(uniqueKeysWithValues: registry.entries.map { ($0.id, $0) })
        for (id, entry) in current where knownEntries[id] != entry {
            engine.clearLaunchBackoff(id)
        }
        for id in knownEntries.keys.sorted() where current[id] == nil {
            let actions = engine.desktopEntryRemoved(id)
            for case .signalProcess(let process, .terminate, _) in actions { stoppedAsUninstalled.insert(process) }
            if !actions.isEmpty { logger.notice("\(id)'s desktop entry is gone: stopping the instance launched for it") }
            perform(actions)
        }
        knownEntries = current
        // An app another uid claimed before its entry came is the user's now.
        perform(engine.reclaimApps())
        broadcast(QueuedPluginEvent(type: BGT_EVENT_APPS_CHANGED, realtimeMicroseconds: realtimeMicroseconds))
    }

    /// Background App Refresh may have changed for some apps (a switch, the
    /// power): the wakes it governs that still wait for apps it is no longer
    /// available to fail back to their plugins (see
    /// ``BackgroundEngine/withdrawWaitingWakes(of:plugins:reason:)``), and
    /// every plugin hears of the change.
    func refreshChanged() {
        let governed = Set(plugins.filter(\.wakesNeedRefresh).map(\.name))
        if !governed.isEmpty {
            for app in engine.appsWithWaitingWakes {
                let (status, reason) = refreshStatus(of: app)
                guard status != .available else { continue }
                let actions = engine.withdrawWaitingWakes(of: app, plugins: governed, reason: "Background App Refresh is \(status.rawValue): \(reason)")
                let handedBack = actions.count { if case .wakeFailed = $0 { true } else { false } }
                if handedBack > 0 { logger.info("handed \(handedBack) waiting wake(s) of \(app) back to their plugins: Background App Refresh is \(status.rawValue) (\(reason))") }
                perform(actions)
            }
        }
        broadcast(QueuedPluginEvent(type: BGT_EVENT_REFRESH_CHANGED, realtimeMicroseconds: realtimeMicroseconds))
    }

    /// The Background App Refresh status of an app (or, for nil, of the global switch).
    func refreshStatus(of app: AppID?) -> (status: BackgroundRefreshStatus, reason: String) {
        RefreshPolicy.explain(
            appEnabled: app.flatMap { refreshSettings.perApp[$0.rawValue] },
            globalEnabled: refreshSettings.globalEnabled, power: power.state)
    }

    /// Carries out the core's app, wake and launch actions.
    func performAppAction(_ action: CoreAction) {
        let now = realtimeMicroseconds
        switch action {
        case .launch(let app, let reason):
            // Inside a plugin's batch the launch waits for its commit: a wake
            // that is undone must not start anything.
            if batchCheckpoint != nil {
                batchCheckpoint?.launches.append((app, reason))
            } else {
                launches.launch(app, reason: reason)
            }
        case .deliverWake(let token, let name, let app, let connection):
            plugin(named: name)?.post(QueuedPluginEvent(
                type: BGT_EVENT_TOKEN_READY, app: app.rawValue, connection: connection.uniqueName, token: token,
                realtimeMicroseconds: now))
            // Other modes' waiting events may ride along with this wake.
            for other in plugins where other.name != name {
                other.post(QueuedPluginEvent(
                    type: BGT_EVENT_APP_WOKEN, app: app.rawValue, connection: connection.uniqueName, reason: name,
                    realtimeMicroseconds: now))
            }
            if plugins.contains(where: { $0.name != name && $0.wantsWakeEnds }) { announcedWakes.insert(token) }
        case .wakeCompleted(let token, let name, let app):
            plugin(named: name)?.post(QueuedPluginEvent(
                type: BGT_EVENT_TOKEN_COMPLETED, app: app.rawValue, token: token, realtimeMicroseconds: now))
            announceEnd(of: token, plugin: name, app: app, as: "completed", at: now)
        case .wakeExpired(let token, let name, let app):
            logger.notice("\(app) did not complete its \(name) wake in time")
            plugin(named: name)?.post(QueuedPluginEvent(
                type: BGT_EVENT_TOKEN_EXPIRED, app: app.rawValue, token: token, realtimeMicroseconds: now))
            announceEnd(of: token, plugin: name, app: app, as: "expired", at: now)
        case .wakeFailed(let token, let name, let app, let reason):
            plugin(named: name)?.post(QueuedPluginEvent(
                type: BGT_EVENT_LAUNCH_FAILED, app: app.rawValue, token: token, reason: reason, realtimeMicroseconds: now))
            announceEnd(of: token, plugin: name, app: app, as: "failed", at: now)
        case .appCheckedIn(let app, let connection, let reason):
            if let process = callers.identity(of: connection.uniqueName)?.process { launcher.handOver(app, to: process) }
            if engine.state(of: .app(app)) == .active, registry.entry(for: app) != nil { usage.record(app, active: true, at: now) }
            broadcast(QueuedPluginEvent(
                type: BGT_EVENT_APP_CHECKED_IN, app: app.rawValue, connection: connection.uniqueName, reason: reason,
                realtimeMicroseconds: now))
        case .appCheckedInAgain(let app, let connection, let reason):
            broadcast(QueuedPluginEvent(
                type: BGT_EVENT_APP_CHECKED_IN, app: app.rawValue, connection: connection.uniqueName, reason: reason,
                realtimeMicroseconds: now))
        case .appStateChanged(let app, let state):
            // Only for installed apps: any client may check in as any free id.
            if state != .active || registry.entry(for: app) != nil { usage.record(app, active: state == .active, at: now) }
            broadcast(QueuedPluginEvent(
                type: BGT_EVENT_APP_STATE_CHANGED, app: app.rawValue, state: state.rawValue, realtimeMicroseconds: now))
        case .appGone(let app):
            usage.record(app, active: false, at: now)
            broadcast(QueuedPluginEvent(type: BGT_EVENT_APP_GONE, app: app.rawValue, realtimeMicroseconds: now))
        case .sendTaskExpiring, .sendTaskExpired, .signalProcess, .spareProcess, .tasksChanged, .sleepingChanged, .freeze, .thaw, .drainChanged:
            preconditionFailure("perform(_:) carries out \(action) itself")
        }
    }

    /// What `bgtaskctl apps` shows of one app (`GetApplications`). The
    /// modes' part (`withModes`) only for a trusted caller or the app itself:
    /// it holds what lets others act for the app, such as its push endpoint.
    func describe(_ id: AppID, _ entry: DesktopEntry?, withModes: Bool = true, into message: Message) throws(BusError) {
        let description = ApplicationDescription(
            id: id, entry: entry, refresh: refreshStatus(of: id), running: engine.isRunning(id),
            launching: engine.isLaunching(id), state: engine.isConnected(id) ? engine.state(of: .app(id)) : nil,
            suspended: engine.isSuspended(.app(id)) && engine.hasProcess(id), launchError: engine.launchBackoff(for: id)?.lastError)
        try description.write(into: message) { message in
            for plugin in plugins where withModes && entry?.modes.contains(plugin.name) == true {
                plugin.describe(id, into: message)
            }
        }
    }
}

// MARK: - Serving plugins

extension Daemon: PluginEngineAccess {
    var isSleeping: Bool { engine.isSleeping }

    func appID(of identity: CallerIdentity) -> AppID? {
        if case .app(let id) = engine.app(of: identity.connection) { id } else { identity.appID }
    }

    func appInfo(_ app: AppID) -> PluginAppInfo {
        guard let entry = registry.entry(for: app) else { return PluginAppInfo() }
        let running = engine.isRunning(app)
        return PluginAppInfo(
            known: true, running: running, launching: engine.isLaunching(app),
            state: running ? engine.state(of: .app(app))?.rawValue : nil,
            refreshStatus: refreshStatus(of: app).status.rawValue, modes: entry.modes, name: entry.name, icon: entry.icon)
    }

    func wake(_ app: AppID, reason: String, plugin: String, budget: Duration) throws(CoreError) -> String {
        guard let entry = registry.entry(for: app) else {
            throw CoreError(.unknownApplication, "\(app) has no desktop entry")
        }
        guard entry.modes.contains(reason) else {
            throw CoreError(.modeNotDeclared, "\(app) does not declare the \(reason) mode")
        }
        let token = Self.newToken(from: randomPool)
        noteUndo(token: token, app: app)
        let actions = try engine.requestWake(WakeRequest(app: app, reason: reason, plugin: plugin, budget: budget, token: token))
        perform(actions)
        return token
    }

    func completeWake(token: String, connection: ConnectionID, plugin: String) throws(CoreError) {
        // Noted only once it succeeded: undoing a completion that did not
        // happen would mark an untouched wake as answered (no offence).
        let point = batchCheckpoint != nil ? engine.undoPoint(token: token) : nil
        let actions = try engine.completeWake(token: token, caller: connection, plugin: plugin)
        if let point { batchCheckpoint!.undo.append(point) }
        perform(actions)
    }


    func beginBatch() {
        batchCheckpoint = BatchCheckpoint(queued: plugins.map(\.queuedCount))
    }

    /// The engine is about to change for `token` inside a batch: note how to undo it.
    private func noteUndo(token: String, app: AppID? = nil) {
        guard batchCheckpoint != nil, let point = engine.undoPoint(token: token, app: app) else { return }
        batchCheckpoint!.undo.append(point)
    }

    func commitPoint() {
        guard let checkpoint = batchCheckpoint else { return }
        beginBatch()
        for (app, reason) in checkpoint.launches { launches.launch(app, reason: reason) }
    }

    func endBatch(committed: Bool) {
        guard let checkpoint = batchCheckpoint else { return }
        batchCheckpoint = nil
        if committed {
            for (app, reason) in checkpoint.launches { launches.launch(app, reason: reason) }
            return
        }
        // The engine forgets the batch's wakes and completions (no offence can
        // come of a wake whose event was never sent); the events it set off go.
        var undone: [CoreAction] = []
        for point in checkpoint.undo.reversed() { undone += engine.undo(point) }
        for (plugin, count) in zip(plugins, checkpoint.queued) { plugin.dropQueued(after: count) }
        // What undoing takes (a freeze, a turn freed for the next app) happens now.
        perform(undone)
        if !checkpoint.launches.isEmpty {
            logger.notice("not launching \(checkpoint.launches.map(\.0.rawValue).joined(separator: ", ")): the wake was undone")
        }
    }

    /// 128 random bits from `pool`, hex: one-shot and unguessable.
    static func newToken(from pool: RandomPool) -> String {
        // 128 random bits as 32 hex digits, without the strings String(radix:) makes (a wake per push makes this hot).
        let random = pool.next128()
        func digit(_ nibble: UInt64) -> UInt8 { UInt8(truncatingIfNeeded: nibble < 10 ? 48 + nibble : 87 + nibble) }
        return String(unsafeUninitializedCapacity: 32) { buffer in
            for index in 0..<16 {
                buffer[index] = digit(random.0 >> (60 - 4 * UInt64(index)) & 0xF)
                buffer[16 + index] = digit(random.1 >> (60 - 4 * UInt64(index)) & 0xF)
            }
            return 32
        }
    }
}

extension QueuedPluginEvent {
    init(type: Int, app: String? = nil, connection: String? = nil, state: String? = nil, token: String? = nil,
         reason: String? = nil, realtimeMicroseconds: UInt64) {
        self.init(type: Int32(type), app: app, connection: connection, state: state, token: token, reason: reason,
                  realtimeMicroseconds: realtimeMicroseconds)
    }
}
