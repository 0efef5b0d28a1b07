/// One wake of an app for a background event: a one-shot token, its budget,
/// and whether the event has been handed to the app yet.
struct WakeRecord: Sendable {
    var token: String
    var app: AppID
    /// The mode the app is woken for (`fetch`, `remote-notification`, `location`).
    var reason: String
    /// The plugin that asked for the wake and gets its outcome.
    var plugin: String
    var deadline: MonotonicInstant
    /// Whether the event was handed to a connection of the app (`deliverWake`).
    var delivered: Bool
}
