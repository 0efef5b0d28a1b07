/// Whether the app may be woken to refresh its content in the background, as
/// iOS's `UIBackgroundRefreshStatus`: what
/// ``BackgroundTaskManager/backgroundRefreshStatus()`` answers.
///
/// Only an ``available`` app is woken for background fetch. The user turns
/// Background App Refresh off (``denied``) for all apps or for one, with
/// `bgtaskctl refresh disable`; the system holds it back (``restricted``)
/// while the machine saves power.
///
/// ```swift
/// switch try await manager.backgroundRefreshStatus() {
/// case .available: break
/// case .denied: showHint("Background refresh is off: bgtaskctl refresh enable org.example.News")
/// case .restricted: showHint("Background refresh is paused while the system saves power")
/// }
/// ```
public enum BackgroundRefreshStatus: String, Sendable, Hashable, CaseIterable, CustomStringConvertible {
    /// Background refresh may run (`available` on the bus).
    ///
    /// ```swift
    /// if status == .available { try await manager.setMinimumBackgroundFetchInterval(3600) }
    /// ```
    case available

    /// The user switched Background App Refresh off, for all apps or for this
    /// one (`denied` on the bus).
    ///
    /// ```swift
    /// if status == .denied { refreshOnlyWhenOpened() }
    /// ```
    case denied

    /// The system holds background refresh back for now: power saver mode, or
    /// a low battery (`restricted` on the bus).
    ///
    /// ```swift
    /// if status == .restricted { /* it comes back by itself */ }
    /// ```
    case restricted

    /// The D-Bus spelling (`available`, `denied`, `restricted`).
    ///
    /// ```swift
    /// "\(BackgroundRefreshStatus.denied)"   // "denied"
    /// ```
    public var description: String { rawValue }
}
