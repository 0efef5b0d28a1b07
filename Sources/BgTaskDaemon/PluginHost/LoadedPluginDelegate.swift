import BgTaskCore
import Logging
import SDBus

/// What a plugin host needs from the daemon. The daemon implements it; so
/// does the offline describer behind `--bus-introspect`, which only records
/// the interfaces plugins export.
protocol LoadedPluginDelegate: AnyObject {
    var logger: Logger { get }
    /// CLOCK_REALTIME, as plugins read it.
    var wallClock: any WallClock { get }
    /// The loop plugin events and timers run on; nil offline.
    var pluginLoop: EventLoop? { get }
    func configValue(_ key: String) -> String?
    func export(_ interface: BusInterface, for host: LoadedPlugin) throws(BusError)
    /// A new signal on the daemon's object, or nil offline.
    func newSignal(interface: String, member: String) -> Message?
    /// A new call to another service on the daemon's bus, or nil offline.
    func newMethodCall(destination: String?, path: String, interface: String?, member: String) -> Message?
    /// Sends a call made with ``newMethodCall(destination:path:interface:member:)``;
    /// `completion` runs once, from the loop.
    func callAsync(_ call: Message, timeout: UInt64, _ completion: @escaping (Result<Message, BusError>) -> Void) throws(BusError)
    /// Identifies the caller of a plugin's method, then runs `body`; what
    /// `body` throws is the reply.
    func serve(_ message: Message, _ body: @escaping (CallerIdentity) throws -> Void)
    /// The app the engine knows an identified caller as.
    func appID(of identity: CallerIdentity) -> AppID?
    func appInfo(_ app: AppID) -> PluginAppInfo
    func apps(declaring mode: String) -> [AppID]
    func wake(_ app: AppID, reason: String, plugin: String, budget: Duration) throws(CoreError) -> String
    func completeWake(token: String, connection: ConnectionID) throws(CoreError)
    /// Foreground intervals of `app` since `since` (realtime µs; end 0 = open); nil when they cannot be read.
    func usage(of app: AppID, since: UInt64) -> [(start: UInt64, end: UInt64)]?
    func putRecord(plugin: String, collection: String, key: String, data: [UInt8]) -> Bool
    func deleteRecord(plugin: String, collection: String, key: String) -> Bool
    func records(plugin: String, collection: String) -> [(key: String, data: [UInt8])]?
    /// Runs `body` with its writes in one transaction; returns why the commit failed, or nil.
    func transaction(_ body: () -> Void) -> String?
    /// Whether the transaction of ``transaction(_:)`` has writes not yet committed.
    var hasUncommittedWrites: Bool { get }
    /// Asks for a wake opportunity event for `host` at `realtimeMicroseconds` (0 cancels).
    func scheduleOpportunity(for host: LoadedPlugin, at realtimeMicroseconds: UInt64)
    /// A plugin's batch (one call or one event) begins: remember what undoing
    /// it takes (the engine's wakes and completions, events it sets off, launches).
    func beginBatch()
    /// The batch committed (launches it asked for start now), or its commit
    /// failed and everything it did outside the plugin is undone.
    func endBatch(committed: Bool)
    /// What the batch did so far stands (it needed no commit): launches start,
    /// and a failure later undoes only what comes after.
    func commitPoint()
}

extension LoadedPluginDelegate {
    func beginBatch() {}
    func endBatch(committed: Bool) {}
    func commitPoint() {}
}
