import BgTaskProtocol
import BgTaskFetchCore
import BgTaskCore
import Testing

/// The adaptive fetch planner, driven by hand in virtual time (realtime µs;
/// day 0 of these tests is Monday 1970-01-05, local time = UTC).
@Suite struct AdaptivePlannerTests {
    static let monday: UInt64 = 345_600
    static let floor = 900.0

    /// Realtime µs of day `day`, at hh:mm.
    static func at(day: Int, _ hour: Int, _ minute: Int = 0) -> UInt64 {
        (monday + UInt64(day * 86_400 + hour * 3600 + minute * 60)) * 1_000_000
    }

    static func minutes(_ realtime: UInt64) -> Int { Int(realtime / 60_000_000) }

    /// A planner with one app, registered at `minimum` at day 0 00:00.
    func planner(_ app: String = "org.example.News") -> AdaptivePlanner {
        var planner = AdaptivePlanner(floor: Self.floor)
        planner.register(app, interval: .minimum, at: Self.at(day: 0, 0))
        return planner
    }

    /// Runs the planner's wakes up to `end`, answering every fetch with `result`; returns the wake times.
    @discardableResult
    func run(_ planner: inout AdaptivePlanner, until end: UInt64, result: (String, UInt64) -> FetchResult = { _, _ in .noData }) -> [(UInt64, [String])] {
        var wakes: [(UInt64, [String])] = []
        while let next = planner.nextWake(), next < end {
            let apps = planner.appsToFetch(at: next)
            for app in apps { planner.fetched(app, result: result(app, next), at: next) }
            if !apps.isEmpty { wakes.append((next, apps)) }
        }
        return wakes
    }

    /// Opens the app every day in `days` at hh:mm for ten minutes, running its fetches in between.
    func openDaily(_ planner: inout AdaptivePlanner, _ app: String, days: Range<Int>, at hour: Int, _ minute: Int = 0,
                   result: (String, UInt64) -> FetchResult = { _, _ in .noData }) {
        for day in days {
            let open = Self.at(day: day, hour, minute)
            run(&planner, until: open, result: result)
            planner.opened(app, at: open)
            planner.closed(app, at: open + 600_000_000)
        }
    }

    @Test func aNewAppIsFetchedWhileItsHabitsAreLearned() throws {
        var planner = planner()
        let plan = try #require(planner.plan(for: "org.example.News", at: Self.at(day: 0, 0)))
        #expect(plan.reasons.first == .learningHabits, "\(plan.explanation)")
        let next = try #require(plan.next)
        #expect(next >= Self.at(day: 0, 0, 15), "never within the floor")
        #expect(next <= Self.at(day: 0, 2), "an app nothing is known of is not left alone: \(plan.explanation)")
        let wakes = run(&planner, until: Self.at(day: 1, 0))
        #expect(wakes.count >= 6 && wakes.count <= 48, "\(wakes.count) fetches on the first day; the floor allows 96")
    }

    @Test func theIntervalIsAFloorThatIsNeverBroken() {
        var planner = AdaptivePlanner(floor: Self.floor)
        planner.register("org.example.Slow", interval: .custom(7200), at: Self.at(day: 0, 0))
        planner.register("org.example.Fast", interval: .custom(60), at: Self.at(day: 0, 0))  // floored at 900
        var last: [String: UInt64] = [:]
        openDaily(&planner, "org.example.Slow", days: 0..<5, at: 8) { app, now in
            if let before = last[app] {
                let gap = Double(now - before) / 1e6
                #expect(gap >= (app == "org.example.Slow" ? 7200 : 900), "\(app) fetched \(gap) s after its last fetch")
            }
            last[app] = now
            return .newData
        }
        #expect(planner.effectiveInterval(of: "org.example.Fast") == 900)
    }

    @Test func learnsWhenTheAppIsOpenedAndFetchesJustBefore() throws {
        var planner = planner()
        openDaily(&planner, "org.example.News", days: 0..<4, at: 8, 10) { _, _ in .newData }
        run(&planner, until: Self.at(day: 4, 6)) { _, _ in .newData }
        // Day 4: fetches close together around the usual open, few elsewhere.
        let wakes = run(&planner, until: Self.at(day: 4, 8, 10)) { _, _ in .newData }.map(\.0)
        let near = wakes.filter { $0 >= Self.at(day: 4, 7, 10) }
        #expect(near.count >= 2, "fetched in the hour before the open: \(near.map(Self.minutes))")
        let plan = try #require(planner.plan(for: "org.example.News", at: Self.at(day: 4, 8, 10)))
        #expect(plan.explanation.contains("usually opened at 08:"), "\(plan.explanation)")
        planner.opened("org.example.News", at: Self.at(day: 4, 8, 10))
        planner.closed("org.example.News", at: Self.at(day: 4, 8, 20))
        let quiet = run(&planner, until: Self.at(day: 4, 23)) { _, _ in .newData }.filter { $0.0 >= Self.at(day: 4, 11) }
        #expect(quiet.count * 2 <= near.count * 12, "\(quiet.count) fetches in 12 quiet hours against \(near.count) in the hour before the open")
    }

    @Test func fetchesLittleAwayFromUsualOpens() {
        var planner = planner()
        openDaily(&planner, "org.example.News", days: 0..<4, at: 8)
        // An app with no news: between 11:00 and 19:00 (no usual open) few fetches.
        let wakes = run(&planner, until: Self.at(day: 4, 19)).filter { $0.0 >= Self.at(day: 4, 11) }
        #expect(wakes.count <= 4, "\(wakes.count) fetches in 8 quiet hours; the floor would allow 32")
    }

    @Test func aChangedHabitIsLearnedWithinDays() throws {
        var planner = planner()
        let news: (String, UInt64) -> FetchResult = { _, _ in .newData }
        openDaily(&planner, "org.example.News", days: 0..<7, at: 8, result: news)
        openDaily(&planner, "org.example.News", days: 7..<10, at: 12, result: news)  // the habit moved
        run(&planner, until: Self.at(day: 10, 10), result: news)
        let plan = try #require(planner.plan(for: "org.example.News", at: Self.at(day: 10, 10)))
        // Within three days the new hour is where fetches go: as often as around the old one before.
        let before = run(&planner, until: Self.at(day: 10, 12), result: news).filter { $0.0 >= Self.at(day: 10, 11) }
        #expect(before.count >= 2, "fetched in the hour before the new usual open: \(plan.explanation)")
        #expect(plan.explanation.contains("usually opened at 1"), "\(plan.explanation)")
    }

    @Test func aHabitKeepsItsLocalHourWhenDaylightSavingTimeBegins() throws {
        // Local time is UTC+1: the 08:10 open is at 07:10 UTC.
        var planner = AdaptivePlanner(floor: Self.floor, utcOffset: 3600)
        planner.register("org.example.News", interval: .minimum, at: Self.at(day: 0, 0))
        let news: (String, UInt64) -> FetchResult = { _, _ in .newData }
        openDaily(&planner, "org.example.News", days: 0..<4, at: 7, 10, result: news)
        run(&planner, until: Self.at(day: 4, 4), result: news)
        // Clocks go forward overnight: the user opens it at 08:10 local, now 06:10 UTC.
        planner.setUTCOffset(7200, at: Self.at(day: 4, 4))
        let wakes = run(&planner, until: Self.at(day: 4, 6, 10), result: news).map(\.0)
        let near = wakes.filter { $0 >= Self.at(day: 4, 5, 10) }
        #expect(near.count >= 2, "fetched in the hour before 08:10 local: \(wakes.map(Self.minutes))")
        planner.opened("org.example.News", at: Self.at(day: 4, 6, 10))
        planner.closed("org.example.News", at: Self.at(day: 4, 6, 20))
        let plan = try #require(planner.plan(for: "org.example.News", at: Self.at(day: 4, 6, 20)))
        #expect(plan.explanation.contains("usually opened at 08:"), "the open is learned at its local hour: \(plan.explanation)")
    }

    @Test func backsOffNoDataAndRecoversWithNewData() throws {
        // Away from usual opens the spacing follows the news rate learned.
        var quiet = planner()
        openDaily(&quiet, "org.example.News", days: 0..<3, at: 8)
        run(&quiet, until: Self.at(day: 3, 7))
        quiet.opened("org.example.News", at: Self.at(day: 3, 12))
        quiet.closed("org.example.News", at: Self.at(day: 3, 12, 1))
        let quietNext = try #require(quiet.plan(for: "org.example.News", at: Self.at(day: 3, 12, 1))?.next)

        var busy = planner()
        openDaily(&busy, "org.example.News", days: 0..<3, at: 8) { _, _ in .newData }
        run(&busy, until: Self.at(day: 3, 7)) { _, _ in .newData }
        busy.opened("org.example.News", at: Self.at(day: 3, 12))
        busy.closed("org.example.News", at: Self.at(day: 3, 12, 1))
        let busyNext = try #require(busy.plan(for: "org.example.News", at: Self.at(day: 3, 12, 1))?.next)
        #expect(busyNext < quietNext, "an app with news is fetched sooner than one that keeps answering noData")
        #expect(quiet.plan(for: "org.example.News", at: Self.at(day: 3, 12, 1))!.explanation.contains("noData"))

        // News again: the quiet app comes back.
        var recovered = quiet
        run(&recovered, until: Self.at(day: 5, 7)) { _, _ in .newData }
        recovered.opened("org.example.News", at: Self.at(day: 5, 12))
        recovered.closed("org.example.News", at: Self.at(day: 5, 12, 1))
        let recoveredNext = try #require(recovered.plan(for: "org.example.News", at: Self.at(day: 5, 12, 1))?.next)
        #expect(recoveredNext - Self.at(day: 5, 12, 1) < quietNext - Self.at(day: 3, 12, 1))
    }

    /// The daemon marks a wake as under way (`skipped`) when it wakes the
    /// app, and reports its answer later at the wake's time. That answer
    /// covers the time since the previous fetch, as when the answer comes at
    /// once: before, it covered nothing, so the news rate never left its
    /// prior in the daemon (an app answering noData for days was still
    /// taken to have news every 4 h).
    @Test func aWakeMarkedUnderWayLearnsTheNewsRateAsAnAnsweredOne() {
        var answered = planner()
        var marked = planner()
        var time = Self.at(day: 0, 1)
        for _ in 0..<40 {
            answered.fetched("org.example.News", result: .noData, at: time)
            marked.skipped("org.example.News", at: time)
            marked.fetched("org.example.News", result: .noData, at: time)
            time += 3_600_000_000
        }
        let prior = ContentRate().rate
        let learned = answered.apps["org.example.News"]!.content.rate
        #expect(learned < prior / 4, "forty hours of noData: \(learned) items/h")
        #expect(marked.apps["org.example.News"]!.content.rate == learned)
    }

    /// A clock that was five years ahead, then set back: the fetch and the
    /// open made then are taken as now. Before, the app was not fetched
    /// until five years and an interval later, and learned no open until then.
    @Test func aClockSetBackDoesNotHoldTheAppBack() throws {
        var planner = planner()
        let ahead = Self.at(day: 5 * 365, 8)
        planner.opened("org.example.News", at: ahead)
        planner.closed("org.example.News", at: ahead + 60_000_000)
        planner.fetched("org.example.News", result: .newData, at: ahead + 120_000_000)
        // Set back to day 1.
        let now = Self.at(day: 1, 15)
        planner.opened("org.example.News", at: now)
        planner.closed("org.example.News", at: now + 60_000_000)
        let next = try #require(planner.plan(for: "org.example.News", at: now)?.next)
        #expect(next <= now + 6 * 3_600_000_000, "within the ceiling, not years on: \(next)")
        #expect(try #require(planner.earliestFetch(of: "org.example.News")) <= now + 900_000_000)
        #expect(planner.apps["org.example.News"]!.habit.lastDay == UsageHabit.day(Int(now / 1_000_000)))
    }

    @Test func offencesDoubleTheInterval() {
        var planner = planner()
        let first = planner.nextWake()!
        #expect(planner.appsToFetch(at: first) == ["org.example.News"])
        planner.fetched("org.example.News", result: nil, at: first)
        #expect(planner.effectiveInterval(of: "org.example.News") == 2 * Self.floor)
        #expect(planner.plan(for: "org.example.News", at: first)?.reasons.contains(.offences(count: 1)) == true)
        #expect(planner.nextWake()! - first >= 1800 * 1_000_000)
        // Held or open, the app's WHY still says what limits it (it said only "not available").
        planner.setEligible("org.example.News", false, at: first)
        #expect(planner.plan(for: "org.example.News", at: first)?.reasons == [.notEligible, .offences(count: 1)])
        planner.setEligible("org.example.News", true, at: first)
        planner.opened("org.example.News", at: first)
        #expect(planner.plan(for: "org.example.News", at: first)?.reasons == [.inForeground, .offences(count: 1)])
    }

    @Test func coalescesAppsDueAtAboutTheSameTime() {
        var planner = AdaptivePlanner(floor: Self.floor)
        let apps = ["org.example.A", "org.example.B", "org.example.C"]
        // Registered a minute apart (their timers beat a minute apart), all used around 08:00.
        for (index, app) in apps.enumerated() {
            planner.register(app, interval: .minimum, at: Self.at(day: 0, 0, index))
        }
        for day in 0..<4 {
            for (index, app) in apps.enumerated() {
                let open = Self.at(day: day, 8, index)
                run(&planner, until: open)
                planner.opened(app, at: open)
                planner.closed(app, at: open + 600_000_000)
            }
        }
        // In the afternoon and evening none is near a usual open: each is
        // fetched when news has become likely, and they wait for each other.
        run(&planner, until: Self.at(day: 4, 14))
        var fetches = 0
        var wakes = 0
        while let next = planner.nextWake(), next < Self.at(day: 4, 23) {
            let due = planner.appsToFetch(at: next)
            for app in due { planner.fetched(app, result: .noData, at: next) }
            fetches += due.count
            if !due.isEmpty { wakes += 1 }
        }
        #expect(fetches >= 3, "each is fetched at least once in nine hours")
        #expect(wakes * 2 <= fetches, "\(wakes) wakes for \(fetches) fetches")
        #expect(apps.contains { app in
            planner.plan(for: app, at: Self.at(day: 4, 23))?.reasons.contains { if case .coalesced = $0 { true } else { false } } == true
        })
    }

    @Test func aPushIsAWakeOthersRideAlong() throws {
        var planner = AdaptivePlanner(floor: Self.floor)
        planner.register("org.example.Chat", interval: .minimum, at: Self.at(day: 0, 0))
        planner.register("org.example.News", interval: .minimum, at: Self.at(day: 0, 0))
        // Both fetched once; then News is well into its spacing when a push wakes Chat.
        let wake = planner.nextWake()
        let first = try #require(wake)
        let both = planner.appsToFetch(at: first)
        for app in both { planner.fetched(app, result: .newData, at: first) }
        let due = try #require(planner.plan(for: "org.example.News", at: first)?.next)
        let push = first + (due - first) * 9 / 10
        planner.pushed("org.example.Chat", result: .newData, at: push)
        #expect(planner.nextWake() == push, "the push is a wake: others may go with it")
        #expect(planner.appsToFetch(at: push) == ["org.example.News"])
        // A push makes the pushed app up to date without a fetch: its content rate learns nothing from it.
        #expect(planner.apps["org.example.Chat"]?.upToDateAt == push)
        var rate = ContentRate()
        rate.record(gap: Double(first - Self.at(day: 0, 0)) / 1e6, newData: true, at: first)
        #expect(planner.apps["org.example.Chat"]?.content == rate)
    }

    /// A push its app never completed brought nothing in: the app is as up
    /// to date as before it, unless a fetch since made it up to date.
    @Test func aPushNotTakenInLeavesTheAppAsItWas() throws {
        var planner = AdaptivePlanner(floor: Self.floor)
        planner.register("org.example.Chat", interval: .minimum, at: Self.at(day: 0, 0))
        let wake = planner.nextWake()
        let first = try #require(wake)
        planner.fetched("org.example.Chat", result: .newData, at: first)
        let planned = try #require(planner.plan(for: "org.example.Chat", at: first)?.next)
        let push = first + (planned - first) / 2
        planner.pushed("org.example.Chat", result: .newData, at: push)
        #expect(try #require(planner.plan(for: "org.example.Chat", at: push)?.next) > planned)
        planner.pushNotTaken("org.example.Chat", pushedAt: push, upToDateBefore: first, at: push + 1_000_000)
        #expect(planner.apps["org.example.Chat"]?.upToDateAt == first)
        #expect(planner.plan(for: "org.example.Chat", at: push + 1_000_000)?.next == planned)

        // Fetched after the push: that fetch stands.
        planner.pushed("org.example.Chat", result: .newData, at: push + 2_000_000)
        planner.fetched("org.example.Chat", result: .newData, at: push + 3_000_000)
        planner.pushNotTaken("org.example.Chat", pushedAt: push + 2_000_000, upToDateBefore: first, at: push + 4_000_000)
        #expect(planner.apps["org.example.Chat"]?.upToDateAt == push + 3_000_000)
    }

    @Test func opensAreExpectedInTheUsersHoursNotAtNight() {
        // Two apps used by day; a third that was never opened. Awake all night, fetches of the
        // third go where the user uses apps: few between 01:00 and 06:00.
        var planner = AdaptivePlanner(floor: Self.floor)
        for app in ["org.example.A", "org.example.B", "org.example.New"] {
            planner.register(app, interval: .minimum, at: Self.at(day: 0, 0))
        }
        for day in 0..<4 {
            for (app, hour) in [("org.example.A", 9), ("org.example.B", 13), ("org.example.A", 18)] {
                let open = Self.at(day: day, hour)
                run(&planner, until: open) { _, _ in .newData }
                planner.opened(app, at: open)
                planner.closed(app, at: open + 300_000_000)
            }
        }
        let wakes = run(&planner, until: Self.at(day: 5, 0)) { _, _ in .newData }
        let night = wakes.filter { $0.0 >= Self.at(day: 4, 1) && $0.0 < Self.at(day: 4, 6) && $0.1.contains("org.example.New") }
        let day = wakes.filter { $0.0 >= Self.at(day: 4, 9) && $0.0 < Self.at(day: 4, 14) && $0.1.contains("org.example.New") }
        #expect(night.count < day.count, "\(night.count) fetches at night against \(day.count) by day")
    }

    @Test func nothingWhileOpenOrAsleepOrIneligible() {
        var planner = planner()
        planner.opened("org.example.News", at: Self.at(day: 0, 0, 5))
        #expect(planner.nextWake() == nil)
        #expect(planner.plan(for: "org.example.News", at: Self.at(day: 0, 0, 5))?.reasons == [.inForeground])
        planner.closed("org.example.News", at: Self.at(day: 0, 1))
        #expect(planner.nextWake() != nil)

        planner.setSleeping(true, at: Self.at(day: 0, 1))
        #expect(planner.nextWake() == nil)
        #expect(planner.appsToFetch(at: Self.at(day: 0, 5)).isEmpty)
        planner.setSleeping(false, at: Self.at(day: 0, 6))
        // Woken up: what fell due in the night runs at once.
        #expect(planner.nextWake()! <= Self.at(day: 0, 6))
        #expect(planner.appsToFetch(at: Self.at(day: 0, 6)) == ["org.example.News"])

        planner.setEligible("org.example.News", false, at: Self.at(day: 0, 7))
        #expect(planner.nextWake() == nil)
        #expect(planner.plan(for: "org.example.News", at: Self.at(day: 0, 7))?.reasons == [.notEligible])
    }

    @Test func whatWasLearnedSurvivesARestart() throws {
        var planner = planner()
        openDaily(&planner, "org.example.News", days: 0..<4, at: 8)
        run(&planner, until: Self.at(day: 4, 6))
        let record = try #require(planner.apps["org.example.News"]?.record)
        let learned = try #require(planner.learning(of: "org.example.News"))

        var restarted = AdaptivePlanner(floor: Self.floor)
        restarted.restore("org.example.News", record: record, learned: learned, at: Self.at(day: 4, 6))
        #expect(restarted.plan(for: "org.example.News", at: Self.at(day: 4, 6))
                == planner.plan(for: "org.example.News", at: Self.at(day: 4, 6)))
        var forgetful = AdaptivePlanner(floor: Self.floor)
        forgetful.restore("org.example.News", record: record, learned: nil, at: Self.at(day: 4, 6))
        #expect(forgetful.plan(for: "org.example.News", at: Self.at(day: 4, 6))?.reasons.first == .learningHabits)
    }

    /// Plans are rounded to the minute so that apps meet, but a spacing of a
    /// second (a test's settings) is not stretched to a minute.
    @Test func aShortSpacingIsNotStretchedByTheGrid() throws {
        var planner = AdaptivePlanner(floor: 1)
        planner.ceiling = .seconds(1)
        let start = Self.at(day: 0, 10) + 7_000_000
        planner.register("org.example.News", interval: .custom(1), at: start)
        let wake = planner.nextWake()
        let next = try #require(wake)
        #expect(next >= start + 1_000_000 && next <= start + 1_100_000, "\(next - start) µs")
        var spaced = AdaptivePlanner(floor: 900)
        spaced.register("org.example.News", interval: .minimum, at: start)
        let spacedWake = spaced.nextWake()
        let planned = try #require(spacedWake)
        #expect(planned % 60_000_000 == 0, "on the minute grid")
    }

    /// An app opened on a quarter of days costs far fewer fetches than the
    /// same app opened every day, and says why; one seen too briefly to judge
    /// is not held to it.
    @Test func aRarelyUsedAppIsFetchedLessAndSaysWhy() throws {
        let news: (String, UInt64) -> FetchResult = { _, _ in .newData }
        var daily = planner("org.example.Daily")
        openDaily(&daily, "org.example.Daily", days: 0..<12, at: 18, result: news)
        var rare = planner("org.example.Rare")
        for day in stride(from: 0, to: 12, by: 4) {
            openDaily(&rare, "org.example.Rare", days: day..<(day + 1), at: 18, result: news)
        }
        // Days 12 and 13: what each costs, and the plan's reasons.
        let rareWakes = run(&rare, until: Self.at(day: 14, 0), result: news).filter { $0.0 >= Self.at(day: 12, 0) }
        let dailyWakes = run(&daily, until: Self.at(day: 14, 0), result: news).filter { $0.0 >= Self.at(day: 12, 0) }
        let share = try #require(rare.apps["org.example.Rare"]?.habit.usedShare)
        #expect(share.share < 0.35 && share.share > 0.1, "opened on a quarter of days: \(share)")
        #expect(rareWakes.count < dailyWakes.count && rareWakes.count <= 48, "\(rareWakes.count) fetches of the rare app, \(dailyWakes.count) of the daily one")
        let plan = try #require(rare.plan(for: "org.example.Rare", at: Self.at(day: 14, 0)))
        #expect(plan.reasons.contains { if case .rarelyUsed = $0 { true } else { false } }, "\(plan.explanation)")
        #expect(plan.explanation.contains("of days: fetched less often"), "\(plan.explanation)")
        let dailyPlan = try #require(daily.plan(for: "org.example.Daily", at: Self.at(day: 14, 0)))
        #expect(!dailyPlan.explanation.contains("of days"), "\(dailyPlan.explanation)")

        // Without the price (rarePrice 1) the same rare app is fetched more.
        var unpriced = AdaptivePlanner(floor: Self.floor)
        unpriced.openModel.rarePrice = 1
        unpriced.register("org.example.Rare", interval: .minimum, at: Self.at(day: 0, 0))
        for day in stride(from: 0, to: 12, by: 4) {
            openDaily(&unpriced, "org.example.Rare", days: day..<(day + 1), at: 18, result: news)
        }
        let unpricedWakes = run(&unpriced, until: Self.at(day: 14, 0), result: news).filter { $0.0 >= Self.at(day: 12, 0) }
        #expect(rareWakes.count * 3 <= unpricedWakes.count * 2, "\(rareWakes.count) priced against \(unpricedWakes.count) unpriced")

        // A day and a half seen without an open is too little to judge.
        var young = planner("org.example.Young")
        run(&young, until: Self.at(day: 1, 12))
        let youngPlan = try #require(young.plan(for: "org.example.Young", at: Self.at(day: 1, 12)))
        #expect(!youngPlan.explanation.contains("of days"), "\(youngPlan.explanation)")
    }

    /// A share just under the 35 % threshold does not read as 35 %.
    @Test func theRarelyUsedShareReadsRoundedDown() {
        #expect(FetchPlanReason.rarelyUsed(daysShare: 0.346).description == "opened on 34 % of days: fetched less often")
        #expect(FetchPlanReason.rarelyUsed(daysShare: 0.2).description.hasPrefix("opened on 20 % "))
        #expect(FetchPlanReason.rarelyUsed(daysShare: 0.29).description.hasPrefix("opened on 29 % "))
    }

    /// An interval a client may ask for reaches just under 1e300 s; WHY said
    /// "not within 1e+299 s of the last fetch".
    @Test func longIntervalsReadAsDaysAndYears() {
        #expect(FetchPlanReason.intervalFloor(seconds: 9.99e299).description == "not within over a million years of the last fetch")
        #expect(FetchPlanReason.intervalFloor(seconds: 10 * 365.25 * 86_400).description == "not within 10 years of the last fetch")
        #expect(FetchPlanReason.atInterval(seconds: 7 * 86_400).description == "at its interval: every 7 days")
        #expect(FetchPlanReason.atInterval(seconds: 86_400).description == "at its interval: every 24 h")
        #expect(FetchPlanReason.atInterval(seconds: 1800).description == "at its interval: every 30 min")
        #expect(FetchPlanReason.atInterval(seconds: 20).description == "at its interval: every 20 s")
    }

    @Test func theShareOfDaysUsedRemembersAboutAWeek() throws {
        var habit = UsageHabit()
        #expect(habit.usedShare == nil, "nothing seen yet")
        habit.advance(to: 100)
        #expect(habit.usedShare?.share == 0 && habit.usedShare?.days == 1)
        habit.recordOpen(atLocal: 100 * 86_400 + 3600)
        habit.recordOpen(atLocal: 100 * 86_400 + 7200)
        #expect(habit.usedShare?.share == 1, "two opens on one day are one day used")
        // Every day for three weeks: close to 1; then three weeks of nothing: close to 0.
        for day in 101..<122 { habit.recordOpen(atLocal: day * 86_400 + 3600) }
        #expect(try #require(habit.usedShare).share > 0.99)
        habit.advance(to: 143)
        let faded = try #require(habit.usedShare)
        #expect(faded.share < 0.15 && faded.days > 8, "\(faded)")
        // A jump of years neither traps nor leaves a share outside 0–1.
        habit.advance(to: 1_000_000)
        let later = try #require(habit.usedShare)
        #expect(later.share >= 0 && later.share < 1e-9 && later.days.isFinite, "\(later)")
    }

    @Test func neverIsNever() {
        var planner = AdaptivePlanner(floor: Self.floor)
        planner.register("org.example.News", interval: .never, at: Self.at(day: 0, 0))
        #expect(planner.nextWake() == nil)
        #expect(planner.plan(for: "org.example.News", at: Self.at(day: 0, 0))?.reasons == [.never])
    }
}
