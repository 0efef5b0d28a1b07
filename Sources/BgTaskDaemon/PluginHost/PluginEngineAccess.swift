import BgTaskCore
import SDBus

/// What a plugin host needs of the engine: who a caller is, what the engine
/// knows of an app, wakes and their completion, and undoing a plugin's batch.
/// The daemon implements it; so does ``OfflinePluginEngine`` for
/// `--bus-introspect`. Everything else a plugin reaches is ``PluginServices``.
protocol PluginEngineAccess: AnyObject {
    /// Identifies the caller of a plugin's method, then runs `body`; what
    /// `body` throws is the reply.
    func serve(_ message: Message, _ body: @escaping (CallerIdentity) throws -> Void)
    /// The app the engine knows an identified caller as.
    func appID(of identity: CallerIdentity) -> AppID?
    func appInfo(_ app: AppID) -> PluginAppInfo
    func wake(_ app: AppID, reason: String, plugin: String, budget: Duration) throws(CoreError) -> String
    /// Completes a wake `plugin` asked for; another plugin's token is `NoSuchToken`.
    func completeWake(token: String, connection: ConnectionID, plugin: String) throws(CoreError)
    /// Whether the machine sleeps: nothing is offered to plugins then.
    var isSleeping: Bool { get }
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
