/// What the engine holds per app: its state, its background clock and who is connected.
struct AppRecord: Sendable {
    var state: ApplicationState = .active
    var clock: BackgroundClock
    /// Connections bound to the app, in the order they joined.
    var connections: [ConnectionID] = []
    /// Open tasks across all of the app's connections.
    var openTasks = 0
    /// `TaskExpiring` went out for the current background stretch.
    var warned = false

    init(budget: Duration) {
        clock = BackgroundClock(budget: budget)
    }
}
