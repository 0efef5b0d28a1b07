import BgTaskProtocol
/// What ``AdaptivePlanner`` learned about one app, as the fetch mode
/// persists it so that a restart does not forget the user's habits.
public struct AppLearning: Sendable, Equatable, Codable {
    public var habit: UsageHabit
    public var content: ContentRate
    public var noDataStreak: Int
    public var upToDateAt: UInt64?
    /// The last beat of the app's interval timer (``IntervalCadence``), so
    /// that a restart keeps fetching on the same beat.
    public var cadenceAnchor: UInt64?

    public init(habit: UsageHabit, content: ContentRate, noDataStreak: Int, upToDateAt: UInt64?, cadenceAnchor: UInt64? = nil) {
        self.habit = habit
        self.content = content
        self.noDataStreak = noDataStreak
        self.upToDateAt = upToDateAt
        self.cadenceAnchor = cadenceAnchor
    }
}
