import BgTaskCore

/// An app process the launcher started for a background event.
///
/// The launcher tracks it by pidfd until it exits and has been reaped, so
/// `pid` names exactly this process for as long as the launcher reports it
/// running.
struct LaunchedProcess: Sendable, Hashable, CustomStringConvertible {
    /// Where the process lives, which decides how it is frozen and killed.
    enum Placement: Sendable, Hashable {
        /// A transient scope unit of the systemd user manager; systemd owns its cgroup.
        case systemdScope
        /// A cgroup v2 directory the launcher made and removes after the app is gone.
        case cgroup
        /// No cgroup of its own: tracked by its pidfd only.
        case process
    }

    let appID: AppID
    let pid: Int32
    /// Its entry in the daemon's one ``ProcessTable``.
    let ref: ProcessRef
    /// The scope name, `app-bgtaskd-<escaped app id>-<random hex>.scope`. It
    /// names the systemd unit or the launcher's cgroup directory; for
    /// ``Placement/process`` it is only a name for log lines.
    let unit: String
    /// The cgroup directory the launcher made (``Placement/cgroup``); nil
    /// otherwise. A systemd scope's directory is systemd's and is looked up
    /// in `/proc/PID/cgroup` when needed.
    let cgroupPath: String?
    /// The launch reason (`fetch`, `remote-notification`, `location`, `transfer`).
    let reason: String
    let placement: Placement

    /// The unit only where it names something: a plain child has no scope or cgroup of that name.
    var description: String { placement == .process ? "\(appID) (pid \(pid))" : "\(appID) (pid \(pid), \(unit))" }
}
