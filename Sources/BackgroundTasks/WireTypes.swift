public import BgTaskProtocol

/// Where the app stands, as `UIApplication.State` (see ``BgTaskProtocol/ApplicationState``).
public typealias ApplicationState = BgTaskProtocol.ApplicationState

/// What a background fetch found, as `UIBackgroundFetchResult` (see ``BgTaskProtocol/FetchResult``).
public typealias FetchResult = BgTaskProtocol.FetchResult
