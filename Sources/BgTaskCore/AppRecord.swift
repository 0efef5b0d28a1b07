import BgTaskProtocol
/// What the engine holds per app: its state, its background clock, who is
/// connected, and its pending wakes and launch.
struct AppRecord: Sendable {
    var state: ApplicationState = .active
    var clock: BackgroundClock
    /// Connections bound to the app, in the order they joined.
    var connections: [ConnectionID] = []
    /// Connections whose latest `SetApplicationState` put the app in the
    /// foreground (emptied when one puts it in the background).
    var foregroundBy: Set<ConnectionID> = []
    /// Connections whose latest `SetApplicationState` put the app in the
    /// background: their processes are the ones an expired task ties to the
    /// overstay (with the instance the daemon launched).
    var backgroundBy: Set<ConnectionID> = []
    /// Connections that checked in as the app, latest last: events go to the latest.
    var checkedIn: [ConnectionID] = []
    /// Open tasks across all of the app's connections.
    var openTasks = 0
    /// `TaskExpiring` went out for the current background stretch.
    var warned = false
    /// Tokens of pending wakes, oldest first.
    var wakes: [String] = []
    /// The daemon is launching the app, or launched it and it still runs.
    var launch: LaunchRecord?
    /// The uid the app belongs to: only connections of this uid may join it.
    /// nil when unknown (then anyone of any uid may; only tests do that).
    var owner: UInt32?
    /// Suspended (iOS's word): held back while the machine sleeps or while
    /// it waits for its turn in the backlog, or launched by the daemon and
    /// in the background with nothing to do. Its clocks are paused.
    var suspended = false
    /// Since when an app the daemon launched has had nothing to do in the
    /// background; it is suspended `policy.idleGrace` later. nil otherwise.
    var idleSince: MonotonicInstant?
    /// Its processes the shell was told to freeze (and not yet to thaw).
    var frozen: [ProcessRef] = []
    /// A SIGTERM went to its processes and the SIGKILL is pending: it must
    /// run to end, so it is not suspended meanwhile.
    var terminatingUntil: MonotonicInstant?

    init(budget: Duration, owner: UInt32?) {
        clock = BackgroundClock(budget: budget)
        self.owner = owner
    }

    /// Nothing refers to the app any more: its record can go.
    var isUnused: Bool { connections.isEmpty && wakes.isEmpty && launch == nil }
}
