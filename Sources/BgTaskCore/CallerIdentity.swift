/// What the shell learned about a caller from the bus and the kernel.
public struct CallerIdentity: Sendable, Equatable {
    /// Where an app id the daemon knows about a caller came from.
    public enum AppIDSource: String, Sendable, Equatable {
        /// `/proc/PID/root/.flatpak-info`: the sandbox says who the app is.
        case flatpak
        /// The caller's systemd unit (`app-…-<id>-<random>.scope` and friends).
        case systemdUnit = "systemd-unit"
        /// The daemon launched this process itself.
        case launched
    }

    public var connection: ConnectionID
    /// The caller's process, when its credentials could be fetched.
    public var process: ProcessRef?
    public var uid: UInt32?
    /// The app id the daemon knows without asking the caller, if any.
    public var appID: AppID?
    public var appIDSource: AppIDSource?
    /// Whether the caller runs in a sandbox (Flatpak).
    public var isSandboxed: Bool
    /// Unsandboxed and of the daemon's own user (root on the system bus).
    public var isTrusted: Bool

    public init(
        connection: ConnectionID, process: ProcessRef? = nil, uid: UInt32? = nil,
        appID: AppID? = nil, appIDSource: AppIDSource? = nil,
        isSandboxed: Bool = false, isTrusted: Bool = false
    ) {
        self.connection = connection
        self.process = process
        self.uid = uid
        self.appID = appID
        self.appIDSource = appIDSource
        self.isSandboxed = isSandboxed
        self.isTrusted = isTrusted
    }
}
