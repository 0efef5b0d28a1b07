/// Which process the daemon launched into an app's cgroup, and for what,
/// kept in the state database while it runs: a later run, started after this
/// one was killed, takes over that very process, not one the app left behind
/// when it exited (the pid alone could name a process that reused it).
struct LaunchMark: Sendable, Equatable {
    var pid: Int32
    /// Its start in clock ticks since boot (`/proc/PID/stat`, field 22).
    var startTime: UInt64
    /// The launch reason (`fetch`, `remote-notification`, …).
    var reason: String

    /// "PID START REASON", as stored.
    var text: String { "\(pid) \(startTime) \(reason)" }

    init(pid: Int32, startTime: UInt64, reason: String) {
        self.pid = pid
        self.startTime = startTime
        self.reason = reason
    }

    /// Reads ``text``; nil for anything else.
    init?(text: String) {
        let parts = text.split(separator: " ")
        guard parts.count == 3, let pid = Int32(parts[0]), pid > 1, let start = UInt64(parts[1]) else { return nil }
        self.init(pid: pid, startTime: start, reason: String(parts[2]))
    }
}
