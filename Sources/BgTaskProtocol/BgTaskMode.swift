/// The background modes an app declares (`X-BgTaskd-Modes` in its desktop
/// entry), as spelt on the bus, with the configuration section each mode's
/// plugin declares (docs/DESIGN.md §2, §5).
public enum BgTaskMode: String, Sendable, CaseIterable {
    case fetch
    case remoteNotification = "remote-notification"
    case location
    case transfer

    /// The `[Section]` of bgtaskd.conf the mode's plugin owns.
    public var configSection: String {
        switch self {
        case .fetch: "Fetch"
        case .remoteNotification: "RemoteNotifications"
        case .location: "Location"
        case .transfer: "Transfers"
        }
    }

    /// The file the mode's plugin is loaded from.
    public var pluginFile: String { "libbgtaskd-mode-\(rawValue).so" }

    /// The mode whose plugin owns `section`, if it is one of these.
    public init?(configSection section: String) {
        guard let mode = Self.allCases.first(where: { $0.configSection == section }) else { return nil }
        self = mode
    }
}
