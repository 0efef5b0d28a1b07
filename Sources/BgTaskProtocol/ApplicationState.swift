/// Where the app stands, as `UIApplication.State`: it tells the daemon when to
/// start the background clock.
///
/// The clock starts when the app switches to ``background`` and is paused
/// while it is ``active``. A new connection starts `active` (unless the daemon
/// launched the app for a background event).
///
/// ```swift
/// // The last window was closed or minimised:
/// try await manager.setApplicationState(.background)
/// ```
public enum ApplicationState: String, Sendable, CaseIterable {
    /// In the foreground, in use: background time is not counted.
    ///
    /// ```swift
    /// try await manager.setApplicationState(.active)
    /// ```
    case active

    /// In the foreground but not receiving events (a modal system dialog, a
    /// locked screen): background time is not counted.
    ///
    /// ```swift
    /// try await manager.setApplicationState(.inactive)
    /// ```
    case inactive

    /// Not visible: open tasks now run against the app's background budget.
    ///
    /// ```swift
    /// try await manager.setApplicationState(.background)
    /// ```
    case background

    /// Parses the D-Bus spelling; throws `InvalidArgs` for anything else.
    public init(parsing text: String) throws(BgTaskError) {
        guard let state = ApplicationState(rawValue: text) else {
            throw .invalidArgs("unknown application state '\(text.prefix(64))' (expected active, inactive or background)")
        }
        self = state
    }

    /// Whether a state as spelled on the bus is in the foreground (`active`
    /// or `inactive`): where refresh does not hold events back and no fetch
    /// is due. False for nil (not running) or any other spelling.
    public static func isForeground(_ spelling: String?) -> Bool {
        spelling.flatMap(ApplicationState.init(rawValue:)).map { $0 != .background } ?? false
    }
}
