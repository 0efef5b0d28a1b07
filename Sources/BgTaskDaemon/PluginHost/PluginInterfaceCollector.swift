import Logging
import SDBus

/// Loads the plugins without a bus or a database, only to learn which
/// interfaces they export (`bgtaskd --bus-introspect`).
enum PluginInterfaceCollector {
    /// The interfaces the plugins in `directories` export, in load order.
    static func interfaces(in directories: [String], logger: Logger) -> [BusInterface] {
        let candidates = PluginLoader(logger: logger).candidates(in: directories)
        // The defaults of every key, the plugins' included: what a plugin reads while it starts.
        let services = PluginServices.offline(
            logger: logger, configuration: Configuration(pluginKeys: candidates.flatMap(\.configKeys)))
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
