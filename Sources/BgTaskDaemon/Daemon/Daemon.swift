import BgTaskCore
import BgTaskPluginABI
import BgTaskProtocol
import CBgTaskShim
import Foundation
public import Logging
public import SDBus

/// The running daemon: one sd-event loop, one bus connection, the core
/// engine, and the shell parts that carry out what the engine decides.
///
/// Everything runs on the loop's thread, one callback at a time, so no state
/// here needs a lock. Method handlers live in `Daemon+Manager.swift`, the
/// plugin host's side in `Daemon+Plugins.swift`.
public final class Daemon {
    /// What the daemon is started with.
    public struct Settings: Sendable {
        public var configuration: Configuration
        public var bus: Bus.Address
        public var stateDirectory: String
        public var pluginDirectories: [String]
        /// The plugins found before the configuration was read (their keys are
        /// in it); nil to look for them at start.
        var pluginCandidates: [PluginLoader.Candidate]?

        public init(configuration: Configuration, bus: Bus.Address, stateDirectory: String, pluginDirectories: [String]) {
            self.configuration = configuration
            self.bus = bus
            self.stateDirectory = stateDirectory
            self.pluginDirectories = pluginDirectories
        }
    }

    let settings: Settings
    let logger: Logger
    /// CLOCK_REALTIME, injected (the engine's monotonic clock is injected into the engine).
    let wallClock: any WallClock
    let loop: EventLoop
    let bus: Bus
    var engine: BackgroundEngine<SystemMonotonicClock>
    /// Task ids kept from one run to the next (see ``TaskIDReservation``).
    var taskIDs: TaskIDReservation
    let processes: ProcessTable
    let callers: CallerRegistry
    let store: StateStore
    let registry: AppRegistry
    let launcher: AppLauncher
    let power: PowerMonitor
    /// logind on the system bus: the delay lock and PrepareForSleep.
    let logind: LogindMonitor
    /// Carries out the engine's freezes and thaws.
    let freezer: Freezer
    /// Why the machine sleeps, while it does (logind's word, or a Simulate call).
    var sleepSource: SleepSource?
    /// Those waiting for the sleep under way to be ready (apps frozen, state
    /// durable), with when it began; empty once it is ready.
    var sleepWaiters: [(_ elapsed: UInt64, _ asleep: Bool) -> Void] = []
    /// Counts sleeps: a sleep's completion that comes after a wake is stale.
    var sleepGeneration: UInt64 = 0
    /// Background App Refresh switches, as stored.
    var refreshSettings: RefreshSettings
    /// Loaded and started mode plugins.
    var plugins: [LoadedPlugin] = []
    /// What plugins reach besides the engine: the bus, their records, the configuration, clocks.
    let pluginServices: PluginServices
    /// Apps' foreground history.
    let usage: UsageLog
    /// Starting apps for the engine's launches.
    let launches: LaunchCoordinator
    /// Desktop entries as last seen, to tell which changed on a reload.
    var knownEntries: [AppID: DesktopEntry] = [:]
    /// Launched instances being stopped because their app's entry went: their
    /// SIGTERM is logged as that, not as an overstay.
    var stoppedAsUninstalled: Set<ProcessRef> = []
    /// While a plugin's batch runs: what undoing it takes if its commit fails
    /// (see ``beginBatch()``).
    var batchCheckpoint: BatchCheckpoint?
    /// Wakes whose delivery the other plugins were told of (APP_WOKEN): they
    /// are told how each ends (APP_WAKE_ENDED), and only of those.
    var announcedWakes: Set<String> = []
    /// Where wake tokens' random bits come from.
    let randomPool = RandomPool()
    /// Launched processes whose mark could not be stored (a full disk), by
    /// unit: tried again every few seconds until stored or gone.
    var unstoredLaunchMarks: [String: (process: LaunchedProcess, mark: LaunchMark)] = [:]
    var launchMarksRetry: SDBus.Timer?
    private var objects: [ExportedObject] = []
    private var deadlineTimer: SDBus.Timer?
    private var usagePruneTimer: SDBus.Timer?
    private var storeWatch: StateFileWatch?
    /// GetApplications per caller: 50 at once, 50 a second after that (a
    /// client polling for a state change asks 20 a second).
    var applicationListings = CallRateLimit(burst: 50, perSecond: 50)
    private(set) var properties: PropertyBatcher!
    private var signalSources: [EventSource] = []
    /// Watches the daemon's own bus: losing it stops the daemon.
    private var busLost: Slot?

    /// Opens the state database and connects to the bus; nothing is exported
    /// or owned until ``run()``. Throws ``StoreError`` or `BusError`.
    public convenience init(settings: Settings, logger: Logger) throws {
        try self.init(settings: settings, logger: logger, wallClock: SystemWallClock())
    }

    /// The daemon on a wall clock of the caller's (usage history, plugins' time).
    init(settings: Settings, logger: Logger, wallClock: any WallClock) throws {
        self.settings = settings
        self.logger = logger
        self.wallClock = wallClock
        do {
            store = try StateStore(directory: settings.stateDirectory, logger: logger)
        } catch {
            Self.thawLeftovers(refusedWith: error, settings: settings, logger: logger)
            throw error
        }
        // From here the database is this daemon's: a start that stops before
        // its leftovers are taken over (run()) thaws them on its way out.
        var started = false
        defer { if !started { Self.thawLeftovers(settings: settings, logger: logger) } }
        refreshSettings = try store.refreshSettings()
        usage = UsageLog(store: store, logger: logger)
        try usage.closeOpen(at: wallClock.now.microseconds)
        loop = try EventLoop()
        bus = try Bus.open(settings.bus, description: "bgtaskd")
        do {
            try bus.waitUntilReady(timeout: Self.busHandshakeTimeout)
        } catch {
            throw BusError(name: error.name, message: "connecting to \(settings.bus.spelledOut): \(error.message)")
        }
        try bus.attach(to: loop)
        let registry = AppRegistry(
            directories: AppRegistry.dataDirectories(environment: ProcessInfo.processInfo.environment),
            loop: loop, logger: logger)
        self.registry = registry
        pluginServices = PluginServices(
            logger: logger, wallClock: wallClock, configuration: settings.configuration, loop: loop, bus: bus,
            store: store, registry: registry, usage: usage)
        // Apps with a desktop entry are this user's: only its connections may run as them.
        let ownUID = getuid()
        engine = BackgroundEngine(policy: settings.configuration.taskPolicy, clock: SystemMonotonicClock()) { app in
            registry.entry(for: app) == nil ? nil : ownUID
        }
        taskIDs = TaskIDReservation(store: store, logger: logger)
        engine.continueTaskIDs(after: taskIDs.begin())
        processes = ProcessTable(logger: logger)
        let trustedUID: UInt32 = settings.bus == .system ? 0 : getuid()
        callers = CallerRegistry(bus: bus, loop: loop, processes: processes, trustedUID: trustedUID, logger: logger)
        let appBusAddress: String? = if case .address(let address) = settings.bus { address } else { nil }
        launcher = AppLauncher(
            loop: loop, sessionBus: settings.bus == .system ? nil : bus, appBusAddress: appBusAddress, logger: logger,
            cgroupGroup: Self.cgroupGroup(forStateDirectory: store.path), processes: processes)
        launches = LaunchCoordinator(registry: registry, launcher: launcher, logger: logger)
        power = PowerMonitor(systemBus: .system, loop: loop, logger: logger)
        logind = LogindMonitor(systemBus: .system, loop: loop, logger: logger)
        freezer = Freezer(
            loop: loop, launcher: launcher, processes: processes,
            systemd: settings.bus == .system ? nil : SystemdUserManager(bus: bus),
            hierarchy: CgroupHierarchy.current(), journal: FreezeJournal(path: store.path + ".frozen", logger: logger) { [loop] job in loop.later(job) },
            logger: logger)
        callers.onDisconnect = { [unowned self] identity in
            self.perform(self.engine.disconnect(identity.connection))
        }
        callers.launchedAppID = { [unowned self] pid in self.launcher.launchedAppID(containing: pid) }
        started = true
    }

    /// The cgroup directory of this daemon's launched apps: one per state
    /// database (FNV-1a of its path), so that daemons sharing a cgroup keep apart.
    static func cgroupGroup(forStateDirectory path: String) -> String {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in path.utf8 { hash = (hash ^ UInt64(byte)) &* 0x0000_0100_0000_01b3 }
        let hex = String(hash, radix: 16)
        return AppLauncher.groupPrefix + String(repeating: "0", count: 16 - hex.count) + hex
    }

    /// CLOCK_REALTIME in µs since the Unix epoch, from the injected wall clock.
    var realtimeMicroseconds: UInt64 { wallClock.now.microseconds }

    /// Exports the objects, takes the bus name, tells systemd it is ready and
    /// runs until SIGTERM, SIGINT or SIGHUP. Returns the exit code.
    public func run() throws(BusError) -> Int32 {
        // One pidfd per calling process: a thousand callers need more than the usual soft limit of 1024.
        var (before, after): (UInt64, UInt64) = (0, 0)
        let raised = bgt_raise_fd_limit(&before, &after)
        if raised < 0 {
            logger.warning("cannot raise the open-file limit above \(before): \(String(cString: strerror(-raised)))")
        } else {
            logger.info("open-file limit \(after)\(after != before ? " (raised from \(before))" : "")")
        }
        // Deadlines are enforced to the millisecond: keep the kernel's timer slack small.
        _ = bgt_set_timer_slack(50_000)
        // SIGHUP too: the terminal that started it closing killed it outright,
        // frozen apps left frozen. (There is no reload: a new configuration
        // takes a restart.) A pipe that closed is an error of its write, not the end.
        signal(SIGPIPE, SIG_IGN)
        for signal in [SIGTERM, SIGINT, SIGHUP] {
            signalSources.append(try loop.onSignal(signal) { [unowned self] in
                self.logger.info("stopping on signal \(signal)\(signal == SIGHUP ? " (hangup)" : "")")
                // Now, while the bus is still open: sd-bus closes it when the loop exits.
                self.properties.flush()
                self.loop.exit(code: 0)
            })
        }
        // Without its bus the daemon serves nobody, yet it would hold the state
        // directory locked against a daemon started on the bus's return.
        busLost = try bus.addMatch(
            "type='signal',path='/org/freedesktop/DBus/Local',interface='org.freedesktop.DBus.Local',member='Disconnected'"
        ) { [unowned self] _ in
            self.logger.critical("lost the bus (\(self.settings.bus)): stopping, so that a daemon started on it again can take over")
            self.loop.exit(code: 69)
        }
        deadlineTimer = try loop.makeTimer { [unowned self] in
            self.perform(self.engine.fireDueTimers())
        }
        // Now and once a day: the usage history keeps UsageLog.retention.
        usagePruneTimer = try loop.makeTimer { [unowned self] in
            self.usage.prune(at: self.realtimeMicroseconds)
            self.usagePruneTimer?.arm(at: self.loop.now + 86_400 * 1_000_000)
        }
        usagePruneTimer?.arm(at: loop.now)
        // A database deleted or replaced under the daemon would take every
        // write from then on with it, and the next start would begin afresh
        // without a word. It stops at once instead, saying why.
        storeWatch = StateFileWatch(store: store, loop: loop, logger: logger) { [unowned self] in
            self.logger.critical("\(self.store.path) or its write-ahead log was deleted or replaced while bgtaskd ran: what it wrote since is lost; stopping, so that a start on the state directory as it is now begins from what is there")
            self.loop.exit(code: 74)
        }
        properties = PropertyBatcher(
            bus: bus, loop: loop, path: BgTaskNames.objectPath, interface: BgTaskNames.manager,
            intervalMicroseconds: 50_000, logger: logger)
        startComponents()
        // Where callers' connections lead, to find a connection a dead caller's child inherited.
        processes.busFD = bus.fileDescriptor
        for interface in Self.busInterfaces(for: self) {
            objects.append(try bus.export(interface, at: BgTaskNames.objectPath))
        }
        startPlugins()
        try bus.requestName(BgTaskNames.busName)
        logger.info("ready", metadata: [
            "bus": "\(settings.bus)", "name": "\(BgTaskNames.busName)", "unique": "\(bus.uniqueName)",
            "budget": "\(settings.configuration.taskBudgetSec)s", "state-dir": "\(settings.stateDirectory)",
            "plugins": "\(plugins.map(\.name).joined(separator: ","))", "apps": "\(registry.entries.count)",
        ])
        ServiceManager.notify("READY=1\nSTATUS=Serving \(BgTaskNames.busName)")
        let code = try loop.run()
        ServiceManager.notify("STOPPING=1")
        stopPlugins()
        // Nothing stays frozen after the daemon.
        freezer.thawAll()
        logind.stop()
        launcher.removeGroupIfEmpty()
        do {
            try usage.closeOpen(at: realtimeMicroseconds)
        } catch {
            // The next start closes them instead (at its own time: the intervals run a little long).
            logger.warning("cannot close the open foreground intervals: \(error)")
        }
        store.close()
        bus.flush()
        objects.removeAll()
        pluginServices.unexportAll()
        logger.info("stopped")
        return code
    }

    /// Every interface the daemon exports, bound to `daemon`'s handlers (or
    /// to none, for `--bus-introspect`).
    public static func busInterfaces(for daemon: Daemon?) -> [BusInterface] {
        [managerInterface(daemon)]
    }

    // MARK: Carrying out the core's actions

    /// Does what the engine asked for, then re-arms the deadline timer for
    /// the engine's next deadline (the only timer; nothing polls).
    ///
    /// Process signals go last, after one flush: every `TaskExpired` of a burst
    /// of expiries leaves the daemon before the first SIGTERM, and no expiry
    /// waits for a flush of its own. A SIGTERM that follows `TaskExpired`
    /// also waits until each owner has taken it in (see ``terminateAfterAcknowledgement(_:owners:)``).
    func perform(_ actions: [CoreAction]) {
        var signals: [(ProcessRef, ProcessSignal, AppKey)] = []
        var expiredOwners: [ConnectionID] = []
        var drainChanged = false
        for action in actions {
            switch action {
            case .sendTaskExpiring(let connection, let task, let secondsLeft):
                sendSignal(ManagerInterface.Signal.taskExpiring.rawValue, to: connection) { (signal) throws(BusError) in
                    try signal.append(task)
                    try signal.append(secondsLeft)
                }
            case .sendTaskExpired(let connection, let task):
                if !expiredOwners.contains(connection) { expiredOwners.append(connection) }
                logger.notice("task expired", metadata: ["task": "\(task)", "owner": "\(connection)"])
                sendSignal(ManagerInterface.Signal.taskExpired.rawValue, to: connection) { (signal) throws(BusError) in try signal.append(task) }
            case .signalProcess(let process, let signal, let app):
                signals.append((process, signal, app))
            case .spareProcess(let process, let app):
                logger.notice("\(app) overstayed its background time, but pid \(process.pid), which holds one of its expired tasks, never asked for the background itself and was not launched by bgtaskd: not terminated")
            case .tasksChanged:
                properties.changed(ManagerInterface.Property.tasks.rawValue)
            case .sleepingChanged(let sleeping):
                properties.changed(ManagerInterface.Property.sleeping.rawValue)
                properties.flush()
                broadcast(QueuedPluginEvent(
                    type: BGT_EVENT_SLEEP_CHANGED, state: sleeping ? "sleeping" : "awake",
                    realtimeMicroseconds: realtimeMicroseconds))
                if !sleeping { offerWakeOpportunities() }
            case .freeze(let app, let refs):
                freezer.freeze(app, refs)
            case .thaw(let app, let refs):
                freezer.thaw(app, refs)
            case .drainChanged:
                drainChanged = true
            case .launch, .deliverWake, .wakeCompleted, .wakeExpired, .wakeFailed, .appCheckedIn, .appCheckedInAgain, .appStateChanged, .appGone:
                performAppAction(action)
            }
        }
        if drainChanged {
            properties.changed(ManagerInterface.Property.draining.rawValue)
            properties.changed(ManagerInterface.Property.backlog.rawValue)
            logDrain()
        }
        if !signals.isEmpty {
            bus.flush()
            if expiredOwners.isEmpty {
                send(signals)
            } else {
                send(signals.filter { $0.1 == .kill })
                terminateAfterAcknowledgement(signals.filter { $0.1 == .terminate }, owners: expiredOwners)
            }
        }
        deadlineTimer?.arm(at: engine.nextDeadline()?.microseconds)
    }

    /// Signals processes; everyone first, log lines afterwards: the last of a
    /// burst does not wait for log lines.
    private func send(_ signals: [(ProcessRef, ProcessSignal, AppKey)]) {
        let uninstalled = Set(signals.compactMap { stoppedAsUninstalled.remove($0.0) })
        // A launch with a cgroup goes as a whole: what it started goes with it.
        let grace = UInt64(settings.configuration.taskKillGraceSec * 1_000_000)
        let sent = signals.filter { launcher.signalLaunch($0.0, $0.1, killAfter: grace) ?? processes.signal($0.0, $0.1) }
        for (process, signal, app) in sent {
            switch signal {
            case .terminate where uninstalled.contains(process):
                logger.notice("\(app) is uninstalled: SIGTERM to the instance launched for it", metadata: ["pid": "\(process.pid)"])
            case .terminate:
                logger.notice("\(app) overstayed its background time: SIGTERM", metadata: ["pid": "\(process.pid)"])
            case .kill:
                logger.notice(
                    "\(app) still running \(settings.configuration.taskKillGraceSec)s after SIGTERM: SIGKILL",
                    metadata: ["pid": "\(process.pid)"])
            }
        }
    }

    /// SIGTERM after `TaskExpired` has been taken in: a D-Bus peer answers
    /// `org.freedesktop.DBus.Peer.Ping` only after it has dispatched what
    /// came before on its connection, so once every owner answered (or
    /// failed to within ``expiredAcknowledgementWait``) an SDK app has run
    /// its expiration handling. Sent at the same instant, SIGTERM used to
    /// arrive before the app read `TaskExpired`.
    private func terminateAfterAcknowledgement(_ signals: [(ProcessRef, ProcessSignal, AppKey)], owners: [ConnectionID]) {
        guard !signals.isEmpty else { return }
        final class Pending {
            var left: Int
            var signals: [(ProcessRef, ProcessSignal, AppKey)]?
            init(left: Int, signals: [(ProcessRef, ProcessSignal, AppKey)]) {
                self.left = left
                self.signals = signals
            }
        }
        let pending = Pending(left: owners.count, signals: signals)
        // The owners may leave the bus before they answer (one closes its
        // connection on TaskExpired): their processes are still signalled.
        for (process, _, _) in signals { processes.holdForTermination(process) }
        let wait = min(Self.expiredAcknowledgementWait, max(1_000, UInt64(settings.configuration.taskKillGraceSec * 500_000)))
        for owner in owners {
            do throws(BusError) {
                let ping = try bus.newMethodCall(
                    destination: owner.uniqueName, path: "/", interface: "org.freedesktop.DBus.Peer", member: "Ping")
                try bus.callAsync(ping, timeout: wait) { [weak self] _ in
                    pending.left -= 1
                    guard pending.left == 0, let signals = pending.signals else { return }
                    pending.signals = nil
                    self?.send(signals)
                }
            } catch {
                pending.left -= 1
            }
        }
        if pending.left == 0, let signals = pending.signals {
            pending.signals = nil
            send(signals)
        }
    }

    /// The longest a SIGTERM waits for the owners to take `TaskExpired` in (µs);
    /// never more than half of `Tasks.KillGraceSec`.
    static let expiredAcknowledgementWait: UInt64 = 250_000

    /// How long start-up waits for the bus to answer the connection (µs).
    static let busHandshakeTimeout: UInt64 = 25_000_000

    /// Sends a Manager signal to one connection only.
    func sendSignal(_ member: String, to connection: ConnectionID, _ body: (Message) throws(BusError) -> Void) {
        do throws(BusError) {
            let signal = try bus.newSignal(path: BgTaskNames.objectPath, interface: BgTaskNames.manager, member: member)
            try signal.setDestination(connection.uniqueName)
            try body(signal)
            try bus.send(signal)
        } catch {
            logger.warning("cannot send \(member)", metadata: ["to": "\(connection)", "error": "\(error)"])
        }
    }

    /// Runs `body` for the identified caller of `message`; whatever it throws
    /// is answered as a D-Bus error.
    func serve(_ message: Message, _ body: @escaping (CallerIdentity) throws -> Void) {
        callers.withCaller(of: message) { [logger] result in
            let caller: CallerIdentity
            switch result {
            case .success(let identified):
                caller = identified
            case .failure(let error):
                // A call sent without waiting for its reply (dbus-send without
                // --print-reply) from a client that left at once: nobody
                // hears the refusal, so the log says it.
                if !message.expectsReply {
                    logger.notice("""
                        \(message.interface ?? "?").\(message.member ?? "?") from \(message.sender ?? "?") not run: \
                        the caller could not be identified (\(error.message)); a client must stay on the bus until its call is answered
                        """)
                }
                return message.replyError(error)
            }
            do {
                try body(caller)
            } catch {
                message.replyError(BusError(error))
            }
        }
    }
}

extension BusError {
    /// The D-Bus form of any error a handler throws.
    init(_ error: any Error) {
        switch error {
        case let error as BusError: self = error
        case let error as CoreError: self.init(name: error.name, message: error.message)
        case let error as StoreError:
            self.init(name: BgTaskError.Code.storageFailed.rawValue, message: "nothing was done: \(error.message)")
        default: self = .failed("\(error)")
        }
    }
}
