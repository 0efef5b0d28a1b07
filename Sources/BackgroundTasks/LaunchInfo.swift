public import BgTaskProtocol
import SDBus

/// What `CheckIn` told the app about its launch: why it runs and how many
/// background events wait for it.
///
/// Right after `CheckIn` the daemon sends the waiting events as signals, so an
/// app launched in the background receives them the same way a running app
/// does; ``pending`` only says how many to expect.
///
/// ```swift
/// let manager = try await BackgroundTaskManager.connect(appID: "org.example.Weather")
/// if let launch = manager.launch, launch.reason != .user {
///     print("launched for \(launch.reason), \(launch.pending) event(s) waiting")
/// }
/// ```
public struct LaunchInfo: Sendable, Hashable {
    /// Why the process was started (`.user` when the daemon did not say).
    ///
    /// ```swift
    /// if launch.reason == .fetch { await refreshContent() }
    /// ```
    public var reason: LaunchReason

    /// Background events waiting for the app at check-in.
    ///
    /// ```swift
    /// print("\(launch.pending) event(s) waiting")
    /// ```
    public var pending: UInt32

    /// A launch description, for tests and previews.
    ///
    /// ```swift
    /// let launch = LaunchInfo(reason: .fetch, pending: 1)
    /// ```
    public init(reason: LaunchReason = .user, pending: UInt32 = 0) {
        self.reason = reason
        self.pending = pending
    }

    /// Reads `CheckIn`'s `a{sv}`: `reason` (s) and `pending` (u). Unknown
    /// keys, and known keys of another type, are ignored, so that a newer
    /// daemon never breaks an older app.
    init(launchDictionary options: [String: BusValue]) {
        self.init()
        if case .string(let reason)? = options[ManagerInterface.LaunchKey.reason.rawValue] { self.reason = LaunchReason(rawValue: reason) }
        if case .uint32(let pending)? = options[ManagerInterface.LaunchKey.pending.rawValue] { self.pending = pending }
    }
}
