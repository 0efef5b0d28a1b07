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
    private let store: StateStore?
    private let registry: AppRegistry?
    private let usageLog: UsageLog?
    private let configuration: Configuration
    /// The interfaces plugins exported, in order.
    private(set) var interfaces: [BusInterface] = []
    private var objects: [ExportedObject] = []

    init(
        logger: Logger, wallClock: any WallClock, configuration: Configuration, loop: EventLoop?, bus: Bus?,
        store: StateStore?, registry: AppRegistry?, usage: UsageLog?
    ) {
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

    /// The exported objects go (the daemon is stopping).
    func unexportAll() { objects.removeAll() }

    // MARK: Configuration and apps

    func configValue(_ key: String) -> String? { configuration.value(of: key) }

    func apps(declaring mode: String) -> [AppID] {
        registry?.entries(declaring: mode).map(\.id) ?? []
    }

    /// Foreground intervals of `app` since `since` (realtime µs; end 0 = open); nil when they cannot be read.
    func usage(of app: AppID, since: UInt64) -> [(start: UInt64, end: UInt64)]? {
        guard let usageLog else { return [] }
        return usageLog.intervals(of: app, since: since)
    }

    // MARK: Bus

    func export(_ interface: BusInterface) throws(BusError) {
        if let bus { objects.append(try bus.export(interface, at: BgTaskNames.objectPath)) }
        interfaces.append(interface)
    }

    /// A new signal on the daemon's object, or nil offline.
    func newSignal(interface: String, member: String) -> Message? {
        try? bus?.newSignal(path: BgTaskNames.objectPath, interface: interface, member: member)
    }

    /// A new call to another service on the daemon's bus, or nil offline.
    func newMethodCall(destination: String?, path: String, interface: String?, member: String) -> Message? {
        try? bus?.newMethodCall(destination: destination, path: path, interface: interface, member: member)
    }

    /// Sends a call made with ``newMethodCall(destination:path:interface:member:)``;
    /// `completion` runs once, from the loop.
    func callAsync(_ call: Message, timeout: UInt64, _ completion: @escaping (Result<Message, BusError>) -> Void) throws(BusError) {
        guard let bus else { throw BusError.failed("no calls while describing interfaces") }
        try bus.callAsync(call, timeout: timeout, completion)
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

    /// Asks for a wake opportunity event for `host` at `time` (realtime µs; 0 cancels).
    func scheduleOpportunity(for host: LoadedPlugin, at time: UInt64) {
        guard let loop else { return }
        if host.opportunityTimer == nil {
            host.opportunityTimer = try? loop.makeTimer(clock: .realtime) { [unowned self, weak host] in
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
