/// The daemon launching, or having launched, an app for background events.
struct LaunchRecord: Sendable {
    /// The wake reason the app is launched for (its first token's).
    var reason: String
    /// The launched process, once the shell reports it started.
    var process: ProcessRef?
    /// A connection of the launched app checked in: the launch worked, whatever
    /// happens to that connection afterwards.
    var checkedIn = false
    /// The process whose connection checked in first: the launched instance
    /// when the launched process itself is not the one that checks in (a
    /// wrapper that starts the app).
    var checkedInProcess: ProcessRef?
    /// Launched by an earlier run of the daemon, and taken over: until its
    /// SDK checks in again it is not suspended (it could not then), and its
    /// exit without a check-in here is no failed launch.
    var adopted = false
    /// The launch runs in a cgroup of its own, which holds whatever it
    /// starts, and the shell names every process in it `launched`: a
    /// check-in from any other process is a copy the user started, even
    /// before the launched instance checked in.
    var inOwnGroup = false
    /// For one taken over: until when it is waited for to check in again
    /// (``TaskPolicy/adoptionGrace``); after that it is idle like any other.
    var checkInBy: MonotonicInstant?

    /// Whether a check-in from `process` is the launched instance's, which
    /// is told the launch's reason; a copy of the app started by hand while
    /// the launched one lives is the user's.
    func isLaunchedInstance(_ process: ProcessRef?, launchedByDaemon: Bool) -> Bool {
        if launchedByDaemon { return true }
        guard let process else { return checkedInProcess == nil }
        if process == self.process { return true }
        if inOwnGroup { return false }
        // Tied by nothing else: the first to check in is taken for the launched app (a wrapper's).
        guard let first = checkedInProcess else { return true }
        return first == process
    }
}
