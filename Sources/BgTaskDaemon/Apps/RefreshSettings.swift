/// The Background App Refresh switches (docs/DESIGN.md §4 `SetBackgroundRefreshEnabled`),
/// as stored by ``StateStore``.
///
/// The global switch and every per-app switch are on unless the user turned
/// them off; `perApp` holds only the apps whose switch was ever set.
public struct RefreshSettings: Sendable, Equatable {
    /// The global switch (`app_id` `""`).
    public var globalEnabled: Bool = true
    /// Per-app switches by desktop-file id; an app missing here is enabled.
    public var perApp: [String: Bool] = [:]

    public init(globalEnabled: Bool = true, perApp: [String: Bool] = [:]) {
        self.globalEnabled = globalEnabled
        self.perApp = perApp
    }

    /// Whether `appID` may refresh in the background: both the global switch
    /// and its own switch must be on.
    public func isEnabled(appID: String) -> Bool {
        globalEnabled && perApp[appID, default: true]
    }
}
