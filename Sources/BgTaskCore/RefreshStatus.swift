/// What `GetBackgroundRefreshStatus` answers (docs/DESIGN.md §4), as iOS's
/// `UIBackgroundRefreshStatus`.
public enum RefreshStatus: String, Sendable, CaseIterable {
    /// Background refresh may run.
    case available
    /// The user switched it off, for this app or for all apps.
    case denied
    /// The system holds it back for now: power saver, or a low battery.
    case restricted
}
