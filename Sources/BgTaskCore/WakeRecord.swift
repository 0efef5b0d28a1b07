/// One wake of an app for a background event: a one-shot token, its budget,
/// and whether the event has been handed to the app yet.
struct WakeRecord: Sendable {
    var token: String
    var app: AppID
    /// The mode the app is woken for (`fetch`, `remote-notification`, `location`, `transfer`).
    var reason: String
    /// The plugin that asked for the wake and gets its outcome.
    var plugin: String
    /// The budget: it drains while the app runs, and is paused while the app
    /// is suspended (the machine sleeps, or the app waits for its turn).
    var clock: BackgroundClock
    /// The connection the event was handed to (`deliverWake`), nil while it waits.
    /// If the wake expires, this connection's process is the one terminated.
    var deliveredTo: ConnectionID?
    /// The app completed the wake, but the completion could not be stored
    /// (a full disk) and was undone: if the budget runs out now, the app
    /// answered in time and is neither counted against nor terminated.
    var completionRefused = false

    var delivered: Bool { deliveredTo != nil }
}
