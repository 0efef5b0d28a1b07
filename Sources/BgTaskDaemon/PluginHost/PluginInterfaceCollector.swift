import Logging
import SDBus

/// Loads the plugins without a bus or a database, only to learn which
/// interfaces they export (`bgtaskd --bus-introspect`).
enum PluginInterfaceCollector {
    /// The interfaces `candidates` export, in load order, each started with
    /// `configuration` (what a plugin reads while it starts).
    static func interfaces(of candidates: [PluginLoader.Candidate], configuration: Configuration, logger: Logger) -> [BusInterface] {
        // What a plugin says of the bus it does not have is no news: only its errors are shown.
        var quiet = logger
        quiet.logLevel = max(logger.logLevel, .error)
        let services = PluginServices.offline(logger: quiet, configuration: configuration)
        let engine = OfflinePluginEngine()
        for candidate in candidates {
            let host = LoadedPlugin(candidate: candidate, services: services, engine: engine)
            do {
                try host.start()
                host.stop()
            } catch {
                logger.error("refusing plugin \(candidate.path): \(error)")
            }
        }
        return services.interfaces
    }
}
