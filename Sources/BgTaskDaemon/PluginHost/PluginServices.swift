import BgTaskCore
import BgTaskPluginABI
import BgTaskProtocol
import Logging
import SDBus

/// What plugins reach through the host apart from the engine: the bus (their
/// interfaces, signals, calls to other services), their durable records, the
/// foreground history, the configuration, clocks and timers. Offline (for
/// `--bus-introspect`) it has no bus and no store, and only records the
/// interfaces plugins export.
final class PluginServices {
    let logger: Logger
    let wallClock: any WallClock
    /// The loop plugin events and timers run on; nil offline.
    let loop: EventLoop?
    private let bus: Bus?
    /// The system bus, connected the first time a plugin asks for it; nil
    /// until then, and again after the connection was lost.
    private var systemBus: Bus?
    private var systemBusSlot: Slot?
    /// After the system bus was lost: tries to connect again, so that
    /// plugins can follow their services there again without waiting for a
    /// request of theirs.
    private var systemBusReconnection: SystemBusReconnection?
    /// Called on the loop once the system bus, lost before, is connected
    /// again: the daemon tells plugins (`BGT_EVENT_SYSTEM_BUS_BACK`).
    var systemBusBack: (() -> Void)?
    /// Signal subscriptions of plugins, by id (`signal_subscribe`).
    private var subscriptions: [UInt64: PluginSubscription] = [:]
    private var lastSubscription: UInt64 = 0
    /// Where the system bus is: `.system` but for tests of the daemon's shell.
    private let systemAddress: Bus.Address
    private let store: StateStore?
    private let registry: AppRegistry?
    private let usageLog: UsageLog?
    private let configuration: Configuration
    /// The interfaces plugins exported, in order.
    private(set) var interfaces: [BusInterface] = []
    private var objects: [ExportedObject] = []
    /// What each plugin exported (by its object), so that a plugin refused
    /// after it exported takes its interfaces with it.
    private var exportsBy: [ObjectIdentifier: [(interface: String, path: String, object: ExportedObject?)]] = [:]

    init(
        logger: Logger, wallClock: any WallClock, configuration: Configuration, loop: EventLoop?, bus: Bus?,
        store: StateStore?, registry: AppRegistry?, usage: UsageLog?, systemBus: Bus.Address = .system
    ) {
        systemAddress = systemBus
        self.usageLog = usage
        self.logger = logger
        self.wallClock = wallClock
        self.configuration = configuration
        self.loop = loop
        self.bus = bus
        self.store = store
        self.registry = registry
    }

    /// Services for describing plugins without a bus or a database.
    static func offline(logger: Logger, configuration: Configuration) -> PluginServices {
        PluginServices(
            logger: logger, wallClock: SystemWallClock(), configuration: configuration, loop: nil, bus: nil, store: nil,
            registry: nil, usage: nil)
    }

    /// Whether these are the services for describing plugins (no bus, nothing runs).
    var isOffline: Bool { bus == nil }

    /// The exported objects go (the daemon is stopping).
    func unexportAll() {
        systemBusReconnection?.cancel()
        objects.removeAll()
        exportsBy.removeAll()
        subscriptions.removeAll()
    }

    // MARK: Configuration and apps

    func configValue(_ key: String) -> String? { configuration.value(of: key) }

    /// The machine's power as the daemon follows it (``PowerMonitor``), for
    /// `power_state`; set by the daemon before it tells plugins of a change.
    /// Offline it stays unknown.
    var power = PowerState.unknown

    func apps(declaring mode: String) -> [AppID] {
        registry?.entries(declaring: mode).map(\.id) ?? []
    }

    /// Foreground intervals of `app` since `since` (realtime µs; end 0 = open); nil when they cannot be read.
    func usage(of app: AppID, since: UInt64) -> [(start: UInt64, end: UInt64)]? {
        guard let usageLog else { return [] }
        return usageLog.intervals(of: app, since: since)
    }

    // MARK: Bus

    /// Publishes a plugin's interface: on the daemon's object (those are
    /// the daemon's interfaces, listed in ``interfaces``), or at another
    /// path a protocol fixes.
    func export(_ interface: BusInterface, at path: String = BgTaskNames.objectPath, by owner: AnyObject? = nil) throws(BusError) {
        // sd-bus would merge a second vtable of a name into the first: a
        // plugin could grow the daemon's own contract, or another plugin's.
        if interface.name.hasPrefix("org.freedesktop.DBus.") {
            throw BusError.invalidArgs("the interface name \(interface.name) belongs to D-Bus itself")
        }
        if interface.name == BgTaskNames.manager {
            throw BusError.invalidArgs("the interface \(interface.name) is the daemon's own")
        }
        // At any path: sd-bus merges there too, into the plugin that came first.
        if exportsBy.values.contains(where: { $0.contains { $0.interface == interface.name && $0.path == path } })
            || (path == BgTaskNames.objectPath && interfaces.contains(where: { $0.name == interface.name })) {
            throw BusError.invalidArgs("the interface \(interface.name) is exported at \(path) already")
        }
        let object = try bus.map { (bus) throws(BusError) in try bus.export(interface, at: path) }
        if let object { objects.append(object) }
        if path == BgTaskNames.objectPath { interfaces.append(interface) }
        if let owner { exportsBy[ObjectIdentifier(owner), default: []].append((interface.name, path, object)) }
    }

    /// Takes back what `owner` exported (a plugin refused after it started exporting).
    func unexport(by owner: AnyObject) {
        guard let exported = exportsBy.removeValue(forKey: ObjectIdentifier(owner)) else { return }
        for entry in exported {
            if let object = entry.object { objects.removeAll { $0 === object } }
            if entry.path == BgTaskNames.objectPath { interfaces.removeAll { $0.name == entry.interface } }
        }
    }

    /// A new signal on the daemon's object, or nil offline; the interface
    /// and member are a plugin's C strings, passed on to sd-bus as they are.
    func newSignal(interface: UnsafePointer<CChar>, member: UnsafePointer<CChar>) -> Message? {
        try? bus?.newSignal(path: BgTaskNames.objectPath, interface: interface, member: member)
    }

    /// The daemon's bus (`BGT_BUS_USER`) or the system bus, connecting to the system bus if need be.
    func bus(_ which: UInt32) throws(BusError) -> Bus {
        guard let bus else { throw BusError.failed("no bus while describing interfaces") }
        switch which {
        case UInt32(BGT_BUS_USER): return bus
        case UInt32(BGT_BUS_SYSTEM): return try connectSystemBus()
        default: throw BusError.invalidArgs("no bus numbered \(which)")
        }
    }

    private func connectSystemBus() throws(BusError) -> Bus {
        if let systemBus { return systemBus }
        guard let loop else { throw BusError.failed("no bus while describing interfaces") }
        let system = try Bus.open(systemAddress, description: "bgtaskd-plugins")
        try system.attach(to: loop)
        // A lost connection ends every subscription on it; the next request connects again.
        systemBusSlot = try system.addMatch(
            "type='signal',path='/org/freedesktop/DBus/Local',interface='org.freedesktop.DBus.Local',member='Disconnected'"
        ) { [weak self] _ in self?.systemBusLost() }
        systemBus = system
        logger.debug("plugins connected to the system bus", metadata: ["bus": "\(systemAddress)"])
        return system
    }

    private func systemBusLost() {
        logger.warning("plugins lost the system bus; their subscriptions there have ended")
        let (bus, slot) = (systemBus, systemBusSlot)
        systemBusSlot = nil
        systemBus = nil
        let lost = subscriptions.filter { $0.value.bus == UInt32(BGT_BUS_SYSTEM) }
        for id in lost.keys.sorted() {
            guard let subscription = subscriptions.removeValue(forKey: id) else { continue }
            subscription.lost()
        }
        guard let loop else { return }
        if systemBusReconnection == nil {
            systemBusReconnection = SystemBusReconnection(loop: loop) { [weak self] in self?.reconnectSystemBus() ?? true }
        }
        // The connection is released after this callback, not inside its own dispatch.
        systemBusReconnection?.lost(bus, slot.map { [$0] } ?? [])
    }

    /// One attempt to get the system bus back; true once it is (or a
    /// plugin's request already connected it).
    private func reconnectSystemBus() -> Bool {
        if systemBus == nil {
            do {
                _ = try connectSystemBus()
            } catch {
                logger.debug("the system bus is not back yet: \(error)")
                return false
            }
        }
        logger.notice("plugins have the system bus again")
        systemBusBack?()
        return true
    }

    /// A new call to another service on the daemon's bus or the system bus,
    /// from a plugin's C strings. Calls never start services (no D-Bus
    /// activation): they ask what runs.
    func newMethodCall(
        on which: UInt32, destination: UnsafePointer<CChar>?, path: UnsafePointer<CChar>, interface: UnsafePointer<CChar>?,
        member: UnsafePointer<CChar>
    ) throws(BusError) -> Message {
        let call = try bus(which).newMethodCall(destination: destination, path: path, interface: interface, member: member)
        if which != UInt32(BGT_BUS_USER) { call.setAutoStart(false) }
        return call
    }

    /// Sends a call made with ``newMethodCall(on:destination:path:interface:member:)``
    /// on the bus it was made for; `completion` runs once, from the loop.
    func callAsync(_ call: Message, timeout: UInt64, _ completion: @escaping (Result<Message, BusError>) -> Void) throws(BusError) {
        guard let bus else { throw BusError.failed("no calls while describing interfaces") }
        if let systemBus, call.belongs(to: systemBus) {
            try systemBus.callAsync(call, timeout: timeout, completion)
        } else {
            try bus.callAsync(call, timeout: timeout, completion)
        }
    }

    /// Subscribes to the signals on `which` bus that match; returns the subscription's id.
    func subscribe(_ subscription: PluginSubscription) throws(BusError) -> UInt64 {
        var rule = "type='signal'"
        for (key, value) in [("sender", subscription.sender), ("path", subscription.path),
                             ("interface", subscription.interface), ("member", subscription.member), ("arg0", subscription.arg0)] {
            guard let value else { continue }
            // A quote would end the value early: match rules have no escape for it.
            guard !value.contains("'") else { throw BusError.invalidArgs("a match on \(key) cannot contain a quote") }
            rule += ",\(key)='\(value)'"
        }
        // Describing plugins, no signal ever comes: a start that subscribes is not a failed one.
        if !isOffline {
            let bus = try bus(subscription.bus)
            subscription.slot = try bus.addMatch(rule) { [weak subscription] message in subscription?.deliver(message) }
        }
        lastSubscription += 1
        subscriptions[lastSubscription] = subscription
        return lastSubscription
    }

    /// Ends a subscription; false for an unknown id.
    /// Ends subscription `id` of `host`; another plugin's is not its to end.
    func unsubscribe(_ id: UInt64, of host: LoadedPlugin) -> Bool {
        guard subscriptions[id]?.host === host else { return false }
        return subscriptions.removeValue(forKey: id) != nil
    }

    /// Ends every subscription of a plugin that stops.
    func unsubscribeAll(of host: LoadedPlugin) {
        subscriptions = subscriptions.filter { $0.value.host !== host }
    }

    // MARK: Durable records

    func putRecord(plugin: String, collection: String, key: String, data: [UInt8]) -> Bool {
        guard let store else { return true }
        do {
            try store.putRecord(plugin: plugin, collection: collection, key: key, data: data)
            return true
        } catch {
            logger.error("cannot store a record of \(plugin): \(error)")
            return false
        }
    }

    func deleteRecord(plugin: String, collection: String, key: String) -> Bool {
        guard let store else { return true }
        do {
            try store.deleteRecord(plugin: plugin, collection: collection, key: key)
            return true
        } catch {
            logger.error("cannot delete a record of \(plugin): \(error)")
            return false
        }
    }

    func records(plugin: String, collection: String) -> [(key: String, data: [UInt8])]? {
        guard let store else { return [] }
        do {
            return try store.records(plugin: plugin, collection: collection)
        } catch {
            logger.error("cannot read the records of \(plugin): \(error)")
            return nil
        }
    }

    /// Runs `body` with its writes in one transaction; returns why the commit failed, or nil.
    func transaction(_ body: () -> Void) -> String? {
        guard let store else {
            body()
            return nil
        }
        do {
            try store.group(body)
            return nil
        } catch {
            logger.error("cannot commit a plugin's writes: \(error)")
            return error.message
        }
    }

    /// Whether the transaction of ``transaction(_:)`` has writes not yet committed.
    var hasUncommittedWrites: Bool { store?.hasUncommittedWrites ?? false }

    // MARK: Timers

    /// sd-event priority of plugins' opportunity timers: after the bus (0).
    static let opportunityPriority: Int64 = 10

    /// Asks for a wake opportunity event for `host` at `time` (realtime µs; 0 cancels).
    func scheduleOpportunity(for host: LoadedPlugin, at time: UInt64) {
        guard let loop else { return }
        if host.opportunityTimer == nil {
            // After the bus: a plugin that keeps asking for a time already
            // past wastes a loop turn each time, but calls are still answered.
            host.opportunityTimer = try? loop.makeTimer(clock: .realtime, priority: Self.opportunityPriority) { [unowned self, weak host] in
                guard let host else { return }
                // Asleep, nothing runs in the background: the wake itself offers the next opportunity.
                guard !host.engine.isSleeping else { return }
                // The event says when it fired, read now: the time asked for may be past.
                host.post(QueuedPluginEvent(type: BGT_EVENT_WAKE_OPPORTUNITY, realtimeMicroseconds: self.wallClock.now.microseconds))
            }
        }
        host.opportunityTimer?.arm(at: time == 0 ? nil : time)
    }
}
