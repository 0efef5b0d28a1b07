import BgTaskProtocol
/// What ``AdaptivePlanner`` learned about one app, as the fetch mode
/// persists it so that a restart does not forget the user's habits.
public struct AppLearning: Sendable, Equatable, Codable {
    public var habit: UsageHabit
    public var content: ContentRate
    public var noDataStreak: Int
    public var upToDateAt: UInt64?

    public init(habit: UsageHabit, content: ContentRate, noDataStreak: Int, upToDateAt: UInt64?) {
        self.habit = habit
        self.content = content
        self.noDataStreak = noDataStreak
        self.upToDateAt = upToDateAt
    }
}
