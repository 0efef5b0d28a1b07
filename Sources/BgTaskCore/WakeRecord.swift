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
    /// The connection the event was handed to (`deliverWake`), nil while it waits.
    /// If the wake expires, this connection's process is the one terminated.
    var deliveredTo: ConnectionID?

    var delivered: Bool { deliveredTo != nil }
}
