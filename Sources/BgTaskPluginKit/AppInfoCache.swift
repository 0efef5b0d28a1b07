/// What the host said of each app, kept between calls because asking
/// (`PluginHost/appInfo(_:)`) is a good part of a push, a fetch or a crossing.
/// Only what changes with an event is reliable here: the desktop entry's
/// facts (modes, name, icon) and the refresh status. Clear it on
/// ``PluginEvent/appsChanged`` and ``PluginEvent/refreshChanged``; ask the
/// host for whether an app runs.
public struct AppInfoCache {
    /// More apps than this and the cache starts over (a bound, not a policy).
    public static let capacity = 4096

    /// nil for an app without a desktop entry: that too holds until entries change.
    private var infos: [String: AppInfo?] = [:]

    public init() {}

    /// The app's facts, from the cache or the host; nil for an app without a desktop entry.
    public mutating func info(of app: String, from host: PluginHost) -> AppInfo? {
        if let known = infos[app] { return known }
        let info = host.appInfo(app)
        if infos.count >= Self.capacity { infos.removeAll() }
        infos[app] = .some(info)
        return info
    }

    /// Forgets everything: desktop entries or refresh settings changed.
    public mutating func clear() {
        infos.removeAll()
    }

    /// Forgets one app: it checked in, changed its state or went, so that
    /// whether it runs and its state are read afresh.
    public mutating func forget(_ app: String) {
        infos[app] = nil
    }
}
