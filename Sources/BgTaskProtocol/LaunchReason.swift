/// Why the app's process was started, as the daemon reports it from `CheckIn`
/// (`reason` in the launch dictionary).
///
/// An open set, like `UIApplication.LaunchOptionsKey`: values this version of
/// the SDK does not know are kept as they are, so compare with the statics
/// and treat anything else as a normal launch.
///
/// ```swift
/// switch manager.launch?.reason {
/// case .fetch?: await refreshContent()
/// case .remoteNotification?: break  // the push arrives as a signal right after CheckIn
/// default: showMainWindow()
/// }
/// ```
public struct LaunchReason: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    /// The reason as sent on the bus (`user`, `fetch`, `remote-notification`, `location`, `transfer`).
    ///
    /// ```swift
    /// print(reason.rawValue)   // "remote-notification"
    /// ```
    public let rawValue: String

    /// Wraps a reason string; unknown ones are kept.
    ///
    /// ```swift
    /// let reason = LaunchReason(rawValue: "fetch")   // == .fetch
    /// ```
    public init(rawValue: String) {
        self.rawValue = rawValue
    }

    /// Started by the user (or by anything other than bgtaskd).
    ///
    /// ```swift
    /// if manager.launch?.reason == .user { showMainWindow() }
    /// ```
    public static let user = LaunchReason(rawValue: "user")

    /// Launched in the background to fetch new content (`fetch` mode).
    ///
    /// ```swift
    /// if manager.launch?.reason == .fetch { /* no window */ }
    /// ```
    public static let fetch = LaunchReason(rawValue: "fetch")

    /// Launched in the background for a push (`remote-notification` mode).
    ///
    /// ```swift
    /// if manager.launch?.reason == .remoteNotification { /* no window */ }
    /// ```
    public static let remoteNotification = LaunchReason(rawValue: "remote-notification")

    /// Launched in the background for a location event (`location` mode).
    ///
    /// ```swift
    /// if manager.launch?.reason == .location { /* no window */ }
    /// ```
    public static let location = LaunchReason(rawValue: "location")

    /// Launched in the background because transfers it started finished (`transfer` mode).
    ///
    /// ```swift
    /// if manager.launch?.reason == .transfer { /* collect the finished files */ }
    /// ```
    public static let transfer = LaunchReason(rawValue: "transfer")

    /// The raw value.
    ///
    /// ```swift
    /// "\(LaunchReason.fetch)"   // "fetch"
    /// ```
    public var description: String { rawValue }
}
