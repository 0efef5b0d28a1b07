public import BgTaskProtocol

/// Where the app stands, as `UIApplication.State` (see ``BgTaskProtocol/ApplicationState``).
public typealias ApplicationState = BgTaskProtocol.ApplicationState

/// What a background fetch found, as `UIBackgroundFetchResult` (see ``BgTaskProtocol/FetchResult``).
public typealias FetchResult = BgTaskProtocol.FetchResult

/// Whether Background App Refresh may run for the app, as `UIBackgroundRefreshStatus`
/// (see ``BgTaskProtocol/BackgroundRefreshStatus``).
public typealias BackgroundRefreshStatus = BgTaskProtocol.BackgroundRefreshStatus

/// Why the app's process was started (see ``BgTaskProtocol/LaunchReason``).
public typealias LaunchReason = BgTaskProtocol.LaunchReason
