import BgTaskCore
import Logging
import SDBus

/// Loads the plugins without a bus or a database, only to learn which
/// interfaces they export (`bgtaskd --bus-introspect`).
final class PluginInterfaceCollector: LoadedPluginDelegate {
    let logger: Logger
    private var exported: [BusInterface] = []
    /// The defaults of every key, the plugins' included: what a plugin reads while it starts.
    private let configuration: Configuration

    /// A collector on its own (tests host a plugin on one); ``interfaces(in:logger:)`` makes its own.
    init(logger: Logger, configuration: Configuration = Configuration()) {
        self.logger = logger
        self.configuration = configuration
    }

    /// The interfaces the plugins in `directories` export, in load order.
    static func interfaces(in directories: [String], logger: Logger) -> [BusInterface] {
        let candidates = PluginLoader(logger: logger).candidates(in: directories)
        let collector = PluginInterfaceCollector(
            logger: logger, configuration: Configuration(pluginKeys: candidates.flatMap(\.configKeys)))
        for candidate in candidates {
            let host = LoadedPlugin(candidate: candidate, delegate: collector)
            do {
                try host.start()
                host.stop()
            } catch {
                logger.error("refusing plugin \(candidate.path): \(error)")
            }
        }
        return collector.exported
    }

    var pluginLoop: EventLoop? { nil }
    let wallClock: any WallClock = SystemWallClock()
    func configValue(_ key: String) -> String? { configuration.value(of: key) }
    func export(_ interface: BusInterface, for host: LoadedPlugin) throws(BusError) { exported.append(interface) }
    func newSignal(interface: String, member: String) -> Message? { nil }
    func newMethodCall(destination: String?, path: String, interface: String?, member: String) -> Message? { nil }
    func callAsync(_ call: Message, timeout: UInt64, _ completion: @escaping (Result<Message, BusError>) -> Void) throws(BusError) {
        throw BusError.failed("no calls while describing interfaces")
    }
    func serve(_ message: Message, _ body: @escaping (CallerIdentity) throws -> Void) {
        message.replyError(.failed("no calls while describing interfaces"))
    }
    func appID(of identity: CallerIdentity) -> AppID? { nil }
    func appInfo(_ app: AppID) -> PluginAppInfo { PluginAppInfo() }
    func apps(declaring mode: String) -> [AppID] { [] }
    func wake(_ app: AppID, reason: String, plugin: String, budget: Duration) throws(CoreError) -> String {
        throw CoreError(.failed, "no apps are woken while describing interfaces")
    }
    func completeWake(token: String, connection: ConnectionID) throws(CoreError) {
        throw CoreError(.noSuchToken, "no wakes while describing interfaces")
    }
    func usage(of app: AppID, since: UInt64) -> [(start: UInt64, end: UInt64)]? { [] }
    func putRecord(plugin: String, collection: String, key: String, data: [UInt8]) -> Bool { true }
    func deleteRecord(plugin: String, collection: String, key: String) -> Bool { true }
    var hasUncommittedWrites: Bool { false }
    func transaction(_ body: () -> Void) -> String? {
        body()
        return nil
    }
    func records(plugin: String, collection: String) -> [(key: String, data: [UInt8])]? { [] }
    func scheduleOpportunity(for host: LoadedPlugin, at realtimeMicroseconds: UInt64) {}
}
