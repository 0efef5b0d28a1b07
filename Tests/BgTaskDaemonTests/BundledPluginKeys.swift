@testable import BgTaskDaemon
import BgTaskTestKit
import Foundation
import Logging

/// The configuration keys the bundled plugins declare through the plugin ABI,
/// read from the built libraries as the daemon reads them.
enum BundledPluginKeys {
    static let keys: [Configuration.Key] = {
        let directory = URL(fileURLWithPath: BinaryLocator.path(of: "bgtaskd")).deletingLastPathComponent().path
        let candidates = PluginLoader(logger: Logger(label: "test")).candidates(in: [directory])
        return candidates.flatMap(\.configKeys)
    }()

    /// A configuration of defaults with the engine's and the bundled plugins' keys.
    static func configuration() -> Configuration { Configuration(pluginKeys: keys) }
}
