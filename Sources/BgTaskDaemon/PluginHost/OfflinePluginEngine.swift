import BgTaskCore
import SDBus

/// The engine side of a plugin host with no engine behind it, for
/// `--bus-introspect`: plugins start and export their interfaces; calls and
/// wakes are refused.
final class OfflinePluginEngine: PluginEngineAccess {
    func serve(_ message: Message, _ body: @escaping (CallerIdentity) throws -> Void) {
        message.replyError(.failed("no calls while describing interfaces"))
    }

    func appID(of identity: CallerIdentity) -> AppID? { nil }
    func appInfo(_ app: AppID) -> PluginAppInfo { PluginAppInfo() }

    func wake(_ app: AppID, reason: String, plugin: String, budget: Duration) throws(CoreError) -> String {
        throw CoreError(.failed, "no apps are woken while describing interfaces")
    }

    func completeWake(token: String, connection: ConnectionID, plugin: String) throws(CoreError) {
        throw CoreError(.noSuchToken, "no wakes while describing interfaces")
    }

    var isSleeping: Bool { false }
    func beginBatch() {}
    func endBatch(committed: Bool) {}
    func commitPoint() {}
}
