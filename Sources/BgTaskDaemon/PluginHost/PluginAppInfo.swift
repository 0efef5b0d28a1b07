import BgTaskProtocol

/// What the host tells a plugin about an app (`bgt_app_info`).
struct PluginAppInfo: Sendable, Equatable {
    var known = false
    var running = false
    var launching = false
    var state: String?
    var refreshStatus = BackgroundRefreshStatus.available.rawValue
    var modes: [String] = []
    var name: String?
    var icon: String?
}
