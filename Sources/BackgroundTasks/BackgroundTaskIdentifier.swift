/// Identifies one background task that a ``BackgroundTaskManager`` began.
///
/// The daemon hands out the ids: they are never 0 and never reused while the
/// daemon runs. ``invalid`` (0) stands for "no task", as
/// `UIBackgroundTaskIdentifier.invalid` does on iOS.
///
/// ```swift
/// var upload = BackgroundTaskIdentifier.invalid
/// upload = try await manager.beginBackgroundTask(name: "upload")
/// // … work …
/// try await manager.endBackgroundTask(upload)
/// upload = .invalid
/// ```
public struct BackgroundTaskIdentifier: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    /// The task id as the daemon sends it (`u task_id` on the bus).
    ///
    /// ```swift
    /// print("task", id.rawValue)   // task 7
    /// ```
    public let rawValue: UInt32

    /// Wraps a task id received from the daemon (from `busctl`, for instance).
    ///
    /// ```swift
    /// let id = BackgroundTaskIdentifier(rawValue: 7)
    /// ```
    public init(rawValue: UInt32) {
        self.rawValue = rawValue
    }

    /// No task: the daemon never gives out id 0.
    ///
    /// ```swift
    /// if id == .invalid { return }
    /// ```
    public static let invalid = BackgroundTaskIdentifier(rawValue: 0)

    /// The id as a decimal number, as `busctl` shows it.
    ///
    /// ```swift
    /// "\(id)"   // "7"
    /// ```
    public var description: String { String(rawValue) }
}
