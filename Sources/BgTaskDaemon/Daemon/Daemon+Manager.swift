import BgTaskCore
import BgTaskPluginABI
import BgTaskProtocol
import Glibc
import SDBus

// The Manager interface (docs/DESIGN.md §4): property getters, then method handlers,
// then the one table that binds them. Every handler follows the same order:
// read arguments → validate → identify the caller → check its right →
// change state → reply → carry out the actions (signals, PropertiesChanged).

extension Daemon {
    // MARK: Property getters

    func getTasks(_ reply: Message) throws(BusError) {
        try reply.container("a", "(ussd)") { () throws(BusError) in
            for task in engine.tasksSnapshot() {
                try reply.container("r", "ussd") { () throws(BusError) in
                    try reply.append(task.id)
                    try reply.append(task.owner)
                    try reply.append(task.name)
                    try reply.append(task.secondsRemaining)
                }
            }
        }
    }

    func getPlugins(_ reply: Message) throws(BusError) {
        try reply.container("a", "(ssu)") { () throws(BusError) in
            for plugin in plugins {
                try reply.container("r", "ssu") { () throws(BusError) in
                    try reply.append(plugin.name)
                    try reply.append(plugin.version)
                    try reply.append(UInt32(plugin.abiMajor))
                }
            }
        }
    }

    // MARK: Helpers

    /// Refuses callers that are not trusted (docs/DESIGN.md §3) with a message saying who is.
    func requireTrusted(_ caller: CallerIdentity, _ action: String) throws(CoreError) {
        guard !caller.isTrusted else { return }
        let who = settings.bus == .system
            ? "root" : "unsandboxed processes of the daemon's own user (uid \(getuid()))"
        throw CoreError(.notPermitted, "only \(who) may \(action)")
    }

    // MARK: Method handlers

    func beginBackgroundTask(_ call: Message) throws(BusError) {
        let name = try call.readString()
        serve(call) { [unowned self] caller in
            // The id it would get is within the stored reservation, or the task is refused.
            if engine.lastIssuedTaskID < UInt32.max { try taskIDs.reserve(through: engine.lastIssuedTaskID + 1) }
            let begun = try engine.beginTask(named: name, caller: caller)
            try call.reply { (reply) throws(BusError) in
                try reply.append(begun.id)
                try reply.append(begun.secondsRemaining)
            }
            perform(begun.actions)
        }
    }

    func endBackgroundTask(_ call: Message) throws(BusError) {
        let id = try call.readUInt32()
        serve(call) { [unowned self] caller in
            let actions = try engine.endTask(id, caller: caller.connection)
            try call.reply()
            perform(actions)
        }
    }

    func getBackgroundTimeRemaining(_ call: Message) throws(BusError) {
        serve(call) { [unowned self] caller in
            let seconds = engine.secondsRemaining(for: caller)
            try call.reply { (reply) throws(BusError) in try reply.append(seconds) }
        }
    }

    func setApplicationState(_ call: Message) throws(BusError) {
        let text = try call.readString()
        let state: ApplicationState
        do { state = try ApplicationState(parsing: text) } catch { throw BusError(error) }
        serve(call) { [unowned self] caller in
            let actions = engine.setState(state, caller: caller)
            try call.reply()
            logger.debug("application state", metadata: ["caller": "\(caller.connection)", "state": "\(state.rawValue)"])
            perform(actions)
        }
    }

    func checkIn(_ call: Message) throws(BusError) {
        let appID = try call.readString()
        serve(call) { [unowned self] caller in
            let result = try engine.checkIn(appID: appID, caller: caller)
            // The wakes the engine holds, and the events plugins hold without one (sent right after).
            var pending = result.pending
            if let app = try? AppID(validating: appID) {
                for plugin in plugins {
                    let (sum, overflow) = pending.addingReportingOverflow(plugin.waitingEvents(for: app))
                    pending = overflow ? .max : sum
                }
            }
            try call.reply { (reply) throws(BusError) in
                try reply.append(value: .dictionary(key: "s", value: "v", [
                    .init(key: .string(ManagerInterface.LaunchKey.reason.rawValue), value: .variant(.string(result.reason))),
                    .init(key: .string(ManagerInterface.LaunchKey.pending.rawValue), value: .variant(.uint32(pending))),
                ]))
            }
            logger.info("checked in", metadata: [
                "caller": "\(caller.connection)", "app": "\(appID)", "reason": "\(result.reason)", "pending": "\(pending)",
            ])
            perform(result.actions)
        }
    }

    func getBackgroundRefreshStatus(_ call: Message) throws(BusError) {
        serve(call) { [unowned self] caller in
            let app: AppID? = if case .app(let id) = engine.app(of: caller.connection) { id } else { caller.appID }
            let status = refreshStatus(of: app).status
            try call.reply { (reply) throws(BusError) in try reply.append(status.rawValue) }
        }
    }

    func setBackgroundRefreshEnabled(_ call: Message) throws(BusError) {
        let appText = try call.readString()
        let enabled = try call.readBool()
        if !appText.isEmpty, let problem = DesktopFileID.problem(with: appText) {
            throw BusError.invalidArgs("'\(appText.prefix(300))' is not a valid desktop-file id: \(problem)")
        }
        serve(call) { [unowned self] caller in
            try requireTrusted(caller, "change Background App Refresh settings")
            if !appText.isEmpty, registry.entry(for: try AppID(validating: appText)) == nil {
                throw CoreError(.unknownApplication, "\(appText) has no desktop entry")
            }
            if appText.isEmpty ? refreshSettings.globalEnabled == enabled : refreshSettings.perApp[appText] == enabled {
                return try call.reply()
            }
            try store.setRefreshEnabled(appID: appText, enabled: enabled)
            if appText.isEmpty { refreshSettings.globalEnabled = enabled } else { refreshSettings.perApp[appText] = enabled }
            logger.notice("Background App Refresh \(enabled ? "enabled" : "disabled") for \(appText.isEmpty ? "all apps" : appText)")
            try call.reply()
            refreshChanged()
        }
    }

    func getApplications(_ call: Message) throws(BusError) {
        serve(call) { [unowned self] caller in
            guard applicationListings.allow(caller.connection.uniqueName, now: loop.now) else {
                throw BusError(
                    name: "org.freedesktop.DBus.Error.LimitsExceeded",
                    message: "GetApplications is asked for too often by this connection (over \(Int(applicationListings.perSecond)) a second); ask again in a moment")
            }
            // An entry installed a moment ago is listed, debounce or not.
            registry.reloadIfChangePending()
            let entries = registry.entries.filter { !$0.modes.isEmpty || engine.isConnected($0.id) }
            // Apps connected now that have no desktop entry (a scope or Flatpak named them) are listed too.
            let unlisted = engine.connectedApps.filter { registry.entry(for: $0) == nil }
            // A sandboxed caller sees what its modes keep only of its own app.
            let own = appID(of: caller)
            try call.reply { (reply) throws(BusError) in
                try reply.container("a", "a{sv}") { () throws(BusError) in
                    for entry in entries { try describe(entry.id, entry, withModes: caller.isTrusted || entry.id == own, into: reply) }
                    for id in unlisted { try describe(id, nil, into: reply) }
                }
            }
        }
    }

    func simulateSleep(_ call: Message, sleeping: Bool) throws(BusError) {
        serve(call) { [unowned self] caller in
            try requireTrusted(caller, "simulate sleep and wake")
            if !sleeping, sleepSource == .logind {
                logger.notice("SimulateWake refused: the machine sleeps by logind's word")
                throw CoreError(.notPermitted, "the machine sleeps by logind's word (PrepareForSleep); it wakes when logind says so")
            }
            guard sleeping else {
                try call.reply()
                return leaveSleep(.simulated)
            }
            // Answered once the apps are frozen and the state is durable, as
            // logind's lock is released; refused if a wake came first.
            enterSleep(.simulated) { [logger] _, asleep in
                do throws(BusError) {
                    if asleep {
                        try call.reply()
                    } else {
                        call.replyError(BusError(name: BgTaskError.Code.failed.rawValue,
                                         message: "a wake came before the background apps were frozen: the machine is awake"))
                    }
                } catch {
                    logger.debug("cannot answer SimulateSleep: \(error.message)")
                }
            }
        }
    }

    // MARK: The table

    static func managerInterface(_ daemon: Daemon?) -> BusInterface {
        /// Binds a handler without keeping the daemon alive (the table outlives nothing).
        func bind(_ handler: @escaping (Daemon) -> (Message) throws(BusError) -> Void) -> (Message) throws(BusError) -> Void {
            { [weak daemon] (message) throws(BusError) in
                guard let daemon else { return }
                try handler(daemon)(message)
            }
        }
        func getter(_ body: @escaping (Daemon, Message) throws(BusError) -> Void) -> (Message) throws(BusError) -> Void {
            { [weak daemon] (reply) throws(BusError) in
                guard let daemon else { return }
                try body(daemon, reply)
            }
        }
        return BusInterface(
            name: BgTaskNames.manager,
            methods: [
                BusMethod(ManagerInterface.Method.beginBackgroundTask.rawValue, inputs: [.init("name", "s")],
                          outputs: [.init("task_id", "u"), .init("seconds_remaining", "d")],
                          handler: bind { $0.beginBackgroundTask }),
                BusMethod(ManagerInterface.Method.endBackgroundTask.rawValue, inputs: [.init("task_id", "u")], handler: bind { $0.endBackgroundTask }),
                BusMethod(ManagerInterface.Method.getBackgroundTimeRemaining.rawValue, outputs: [.init("seconds", "d")],
                          handler: bind { $0.getBackgroundTimeRemaining }),
                BusMethod(ManagerInterface.Method.setApplicationState.rawValue, inputs: [.init("state", "s")], handler: bind { $0.setApplicationState }),
                BusMethod(ManagerInterface.Method.checkIn.rawValue, inputs: [.init("app_id", "s")], outputs: [.init("launch", "a{sv}")],
                          handler: bind { $0.checkIn }),
                BusMethod(ManagerInterface.Method.getBackgroundRefreshStatus.rawValue, outputs: [.init("status", "s")],
                          handler: bind { $0.getBackgroundRefreshStatus }),
                BusMethod(ManagerInterface.Method.setBackgroundRefreshEnabled.rawValue, inputs: [.init("app_id", "s"), .init("enabled", "b")],
                          handler: bind { $0.setBackgroundRefreshEnabled }),
                BusMethod(ManagerInterface.Method.getApplications.rawValue, outputs: [.init("applications", "aa{sv}")], handler: bind { $0.getApplications }),
                BusMethod(ManagerInterface.Method.simulateSleep.rawValue, handler: bind { daemon in { (call) throws(BusError) in try daemon.simulateSleep(call, sleeping: true) } }),
                BusMethod(ManagerInterface.Method.simulateWake.rawValue, handler: bind { daemon in { (call) throws(BusError) in try daemon.simulateSleep(call, sleeping: false) } }),
            ],
            signals: [
                BusSignal(ManagerInterface.Signal.taskExpiring.rawValue, [.init("task_id", "u"), .init("seconds_left", "d")]),
                BusSignal(ManagerInterface.Signal.taskExpired.rawValue, [.init("task_id", "u")]),
            ],
            properties: [
                BusProperty(ManagerInterface.Property.version.rawValue, "u", change: .constant, getter: getter { (_, reply) throws(BusError) in
                    try reply.append(BgTaskNames.apiVersion)
                }),
                BusProperty(ManagerInterface.Property.tasks.rawValue, "a(ussd)", change: .emitsInvalidation, getter: getter { (daemon, reply) throws(BusError) in
                    try daemon.getTasks(reply)
                }),
                BusProperty(ManagerInterface.Property.plugins.rawValue, "a(ssu)", change: .constant, getter: getter { (daemon, reply) throws(BusError) in
                    try daemon.getPlugins(reply)
                }),
                BusProperty(ManagerInterface.Property.sleeping.rawValue, "b", change: .emitsChange, getter: getter { (daemon, reply) throws(BusError) in
                    try reply.append(daemon.engine.isSleeping)
                }),
                BusProperty(ManagerInterface.Property.draining.rawValue, "b", change: .emitsChange, getter: getter { (daemon, reply) throws(BusError) in
                    try reply.append(daemon.engine.isDraining)
                }),
                BusProperty(ManagerInterface.Property.backlog.rawValue, "as", change: .emitsChange, getter: getter { (daemon, reply) throws(BusError) in
                    try daemon.getBacklog(reply)
                }),
            ])
    }
}
