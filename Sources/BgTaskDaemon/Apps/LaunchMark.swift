import Foundation

/// Which process the daemon launched for an app, where, and for what, kept
/// in the state database while it runs: a later run, started after this one
/// was killed, takes over that very process, not one the app left behind
/// when it exited (the pid alone could name a process that reused it).
struct LaunchMark: Sendable, Equatable {
    var pid: Int32
    /// Its start in clock ticks since boot (`/proc/PID/stat`, field 22).
    var startTime: UInt64
    /// The launch reason (`fetch`, `remote-notification`, …).
    var reason: String
    /// Where it was placed. A cgroup of the daemon's own is gone after a
    /// reboot; a process outside one is not, so its mark also names the boot.
    var placement: LaunchedProcess.Placement
    /// The kernel's boot id when it was launched; nil in marks of a cgroup.
    var bootID: String?
    /// Whose launch it was: the launching daemon's app group (one per state
    /// directory, see `AppLauncher`). A daemon takes over only its own, not
    /// those of another that runs on a copy of its database. Nil in marks of
    /// a cgroup, which the group's directory ties to the daemon already.
    var owner: String?

    /// "PID START REASON", for a cgroup of the daemon's own (as marks were
    /// first written); "PID START REASON scope|process BOOT OWNER" otherwise.
    var text: String {
        switch placement {
        case .cgroup: "\(pid) \(startTime) \(reason)"
        case .systemdScope: "\(pid) \(startTime) \(reason) scope \(bootID ?? "-") \(owner ?? "-")"
        case .process: "\(pid) \(startTime) \(reason) process \(bootID ?? "-") \(owner ?? "-")"
        }
    }

    init(
        pid: Int32, startTime: UInt64, reason: String, placement: LaunchedProcess.Placement = .cgroup, bootID: String? = nil,
        owner: String? = nil
    ) {
        self.pid = pid
        self.startTime = startTime
        self.reason = reason
        self.placement = placement
        self.bootID = placement == .cgroup ? nil : bootID
        self.owner = placement == .cgroup ? nil : owner
    }

    /// Reads ``text``; nil for anything else.
    init?(text: String) {
        let parts = text.split(separator: " ")
        guard parts.count == 3 || parts.count == 6, let pid = Int32(parts[0]), pid > 1, let start = UInt64(parts[1]) else { return nil }
        guard parts.count == 6 else {
            self.init(pid: pid, startTime: start, reason: String(parts[2]))
            return
        }
        let placement: LaunchedProcess.Placement
        switch parts[3] {
        case "scope": placement = .systemdScope
        case "process": placement = .process
        default: return nil
        }
        self.init(pid: pid, startTime: start, reason: String(parts[2]), placement: placement,
                  bootID: parts[4] == "-" ? nil : String(parts[4]), owner: parts[5] == "-" ? nil : String(parts[5]))
    }

    /// This boot's id (`/proc/sys/kernel/random/boot_id`); nil where it cannot be read.
    static let currentBootID: String? = {
        guard let text = try? String(contentsOfFile: "/proc/sys/kernel/random/boot_id", encoding: .utf8) else { return nil }
        let id = text.trimmingCharacters(in: .whitespacesAndNewlines)
        return id.isEmpty || id.contains(" ") ? nil : id
    }()
}
