import BgTaskProtocol
@testable import BgTaskFetchCore
import Testing

/// The planner's spans are Durations; converting them to realtime µs
/// saturates instead of trapping, whatever a tunable or an interval holds.
struct PlannerSpanTests {
    @Test func spansConvertExactlyInRange() {
        #expect(AdaptivePlanner.micros(.seconds(600)) == 600_000_000)
        #expect(AdaptivePlanner.micros(.milliseconds(1500)) == 1_500_000)
        #expect(AdaptivePlanner.micros(seconds: 900) == 900_000_000)
        #expect(AdaptivePlanner.seconds(2_500_000) == 2.5)
    }

    @Test(arguments: [-1.0, -.infinity, .nan, 0])
    func negativeOrUnreadableSecondsAreZero(_ seconds: Double) {
        #expect(AdaptivePlanner.micros(seconds: seconds) == 0)
    }

    @Test func hugeSpansSaturate() {
        #expect(AdaptivePlanner.micros(seconds: .infinity) == 1_000_000_000_000_000_000)
        #expect(AdaptivePlanner.micros(seconds: 1e300) == 1_000_000_000_000_000_000)
        #expect(AdaptivePlanner.micros(.seconds(-10)) == 0)
    }

    @Test func tunablesAreDurations() {
        let planner = AdaptivePlanner(floor: 900, utcOffset: 0)
        #expect(planner.fetchWorth == .seconds(2) && planner.ceiling == .seconds(6 * 3600) && planner.grid == .seconds(60))
    }

    /// The converted spans follow every change of a tunable, and start converted.
    @Test func convertedSpansFollowTheTunables() {
        var planner = AdaptivePlanner(floor: 900, utcOffset: 0)
        #expect(planner.spans.grid == 60_000_000 && planner.spans.worth == 2 && planner.spans.ceiling == 21_600)
        planner.grid = .seconds(120)
        planner.fetchWorth = .milliseconds(500)
        planner.ceiling = .seconds(7200)
        #expect(planner.spans.grid == 120_000_000 && planner.spans.worth == 0.5 && planner.spans.ceiling == 7200)
        // Nonsense does not trap: a zero grid is one µs, negative spans are none.
        planner.grid = .zero
        planner.fetchWorth = .seconds(-5)
        #expect(planner.spans.grid == 1 && planner.spans.worth == 0)
    }

    /// The spacing is the floor where opens are likely and news frequent, the ceiling where nothing comes.
    @Test func spacingStaysBetweenTheIntervalAndTheCeiling() {
        let planner = AdaptivePlanner(floor: 900, utcOffset: 0)
        #expect(planner.spacing(chance: 1, newsPerSecond: 1, interval: 900) == 900)
        #expect(planner.spacing(chance: 0, newsPerSecond: 1, interval: 900) == 21_600)
        #expect(planner.spacing(chance: 0.5, newsPerSecond: 0, interval: 900) == 21_600)
        #expect(planner.spacing(chance: 1e-300, newsPerSecond: 1e-300, interval: 900) == 21_600)
        #expect(planner.spacing(chance: 0.5, newsPerSecond: 1, interval: 1e12) == 1e12, "an interval above the ceiling holds")
        let likely = planner.spacing(chance: 0.3, newsPerSecond: 1.0 / 3600, interval: 900)
        let unlikely = planner.spacing(chance: 0.003, newsPerSecond: 1.0 / 3600, interval: 900)
        #expect(likely < unlikely && unlikely < 21_600)
    }

    /// Learning read back from a damaged or hostile record (NaN, infinite
    /// or negative counts and rates) and extreme intervals plan without
    /// trapping, and the plan stays within the rules.
    @Test(arguments: [Double.nan, .infinity, -.infinity, -1e308, 1e308])
    func garbageLearningStillPlans(_ value: Double) throws {
        var habit = UsageHabit()
        habit.recordOpen(atLocal: 8 * 3600)
        habit.weekday.mass[40] = value
        habit.weekday.days = value
        var content = ContentRate()
        content.found = value
        content.hours = value
        let learned = AppLearning(habit: habit, content: content, noDataStreak: 0, upToDateAt: 1_000_000)
        let now: UInt64 = 86_400_000_000 * 30
        for (interval, floor) in [(FetchInterval.minimum, 900.0), (.custom(1e12), 900), (.minimum, 0)] {
            var planner = AdaptivePlanner(floor: floor)
            planner.restore("org.example.A", record: FetchRecord(interval: interval, registeredAt: 0), learned: learned, at: now)
            planner.register("org.example.B", interval: interval, at: now)
            planner.opened("org.example.B", at: now + 1)
            planner.closed("org.example.B", at: now + 2)
            let wake = planner.nextWake()
            let next = try #require(wake)
            #expect(next >= now)
            for app in planner.appsToFetch(at: next) { planner.fetched(app, result: .newData, at: next) }
            #expect(planner.plan(for: "org.example.A", at: next)?.next != nil)
        }
    }

    /// Days from a damaged record at either end of Int's range are folded
    /// in without overflowing, and the app still plans.
    @Test(arguments: [Int.min, Int.min + 1, -1_000_000_000, Int.max - 1, Int.max])
    func daysFromADamagedRecordDoNotTrap(_ day: Int) throws {
        var habit = UsageHabit()
        habit.recordOpen(atLocal: 8 * 3600)
        habit.weekday.lastDay = day
        habit.weekend.lastDay = day
        var used = UsageHabit.DaysUsed(day: day)
        used.seen = 3
        used.used = 1
        habit.daysUsed = used
        let learned = AppLearning(habit: habit, content: ContentRate(), noDataStreak: 0, upToDateAt: nil)
        let now: UInt64 = 86_400_000_000 * 30
        var planner = AdaptivePlanner(floor: 900)
        planner.restore("org.example.A", record: FetchRecord(interval: .minimum, registeredAt: 0), learned: learned, at: now)
        planner.opened("org.example.A", at: now + 1)
        planner.closed("org.example.A", at: now + 2)
        let plan = try #require(planner.plan(for: "org.example.A", at: now + 2))
        #expect(plan.next != nil)
        let share = try #require(planner.apps["org.example.A"]?.habit.usedShare)
        #expect(share.share >= 0 && share.share <= 1, "\(share)")
        // Read back from the database, such a day is refused (the app starts learning afresh).
        #expect(throws: BgTaskError.self) { try AppLearning(storageBytes: learned.storageBytes()) }
    }
}
