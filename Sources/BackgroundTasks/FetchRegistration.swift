public import Foundation

/// The app's background-fetch registration as the daemon holds it: what
/// ``BackgroundTaskManager/fetchRegistration()`` answers
/// (`Fetch.GetFetchRegistration`).
///
/// ```swift
/// let registration = try await manager.fetchRegistration()
/// if let next = registration.nextEarliest {
///     print("\(registration.policy) fetch every \(registration.seconds) s, next after \(next)")
/// }
/// ```
public struct FetchRegistration: Sendable, Hashable {
    /// How the app asked to be fetched, as set with
    /// ``BackgroundTaskManager/setMinimumBackgroundFetchInterval(_:)``.
    ///
    /// ```swift
    /// if registration.policy == .never { try await manager.setMinimumBackgroundFetchInterval(3600) }
    /// ```
    public enum Policy: String, Sendable, Hashable, CaseIterable, CustomStringConvertible {
        /// Never woken for fetch: the default, and what
        /// ``BackgroundTaskManager/fetchIntervalNever`` asks for.
        ///
        /// ```swift
        /// registration.policy == .never
        /// ```
        case never

        /// As often as the system thinks useful, and never more often than
        /// its floor (`Fetch.MinimumIntervalSec`): what
        /// ``BackgroundTaskManager/minimumFetchInterval`` asks for.
        ///
        /// ```swift
        /// registration.policy == .minimum
        /// ```
        case minimum

        /// At most once per the interval the app gave (floored by the system).
        ///
        /// ```swift
        /// registration.policy == .custom
        /// ```
        case custom

        /// The D-Bus spelling (`never`, `minimum`, `custom`).
        ///
        /// ```swift
        /// "\(FetchRegistration.Policy.minimum)"   // "minimum"
        /// ```
        public var description: String { rawValue }
    }

    /// How the app asked to be fetched.
    ///
    /// ```swift
    /// print(registration.policy)   // custom
    /// ```
    public var policy: Policy

    /// The interval in force, in seconds: the one asked for, raised to the
    /// system's floor, and lengthened while the app has fetches that timed
    /// out against it. `TimeInterval.infinity` for ``Policy/never``.
    ///
    /// ```swift
    /// if registration.seconds.isFinite { print("every \(Int(registration.seconds / 60)) min") }
    /// ```
    public var seconds: TimeInterval

    /// The earliest the next fetch is planned for; nil when none is (the
    /// policy is ``Policy/never``, or the app is held out of the schedule,
    /// for instance while Background App Refresh is off for it).
    ///
    /// ```swift
    /// if let next = registration.nextEarliest { print("next fetch after", next) }
    /// ```
    public var nextEarliest: Date?

    /// A registration, for tests and previews.
    ///
    /// ```swift
    /// let registration = FetchRegistration(policy: .custom, seconds: 3600, nextEarliest: Date() + 3600)
    /// ```
    public init(policy: Policy, seconds: TimeInterval, nextEarliest: Date?) {
        self.policy = policy
        self.seconds = seconds
        self.nextEarliest = nextEarliest
    }

    /// Reads `GetFetchRegistration`'s `(s policy, d seconds, t next_earliest_usec)`;
    /// nil for a policy this SDK does not know.
    init?(policy: String, seconds: Double, nextEarliestMicroseconds: UInt64) {
        guard let policy = Policy(rawValue: policy) else { return nil }
        self.init(
            policy: policy, seconds: seconds,
            nextEarliest: nextEarliestMicroseconds == 0
                ? nil : Date(timeIntervalSince1970: TimeInterval(nextEarliestMicroseconds) / 1_000_000))
    }
}
