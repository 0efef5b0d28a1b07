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

    @Test func aNewAppIsFetchedAtItsInterval() {
        var planner = planner()
        let plan = planner.plan(for: "org.example.News", at: Self.at(day: 0, 0))
        #expect(plan?.next == Self.at(day: 0, 0, 15), "minimum means the floor until something is learned")
        #expect(plan?.reasons.first == .atInterval(seconds: Self.floor))
        let wakes = run(&planner, until: Self.at(day: 0, 2))
        #expect(wakes.map { Self.minutes($0.0) - Self.minutes(Self.at(day: 0, 0)) } == [15, 30, 45, 60, 75, 90, 105])
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
        openDaily(&planner, "org.example.News", days: 0..<4, at: 8, 10)
        // Day 4: the fetches around the usual open begin shortly before it.
        run(&planner, until: Self.at(day: 4, 6))
        let plan = try #require(planner.plan(for: "org.example.News", at: Self.at(day: 4, 6)))
        #expect(plan.reasons.contains(.usuallyOpenedAt(secondsIntoDay: 8 * 3600)), "\(plan.explanation)")
        let wakes = run(&planner, until: Self.at(day: 4, 8, 10)).map(\.0)
        let near = wakes.filter { $0 >= Self.at(day: 4, 7) }
        #expect(!near.isEmpty && near.allSatisfy { $0 < Self.at(day: 4, 8, 10) }, "fetched in the hour before the open")
        #expect(near.first! <= Self.at(day: 4, 7, 35), "the first fetch is well before the usual open")
        #expect(plan.explanation.contains("usually opened at 08:00"))
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
        openDaily(&planner, "org.example.News", days: 0..<5, at: 8)
        openDaily(&planner, "org.example.News", days: 5..<8, at: 12)  // weekend included: the habit moved
        openDaily(&planner, "org.example.News", days: 8..<10, at: 12)
        run(&planner, until: Self.at(day: 10, 10))
        let plan = try #require(planner.plan(for: "org.example.News", at: Self.at(day: 10, 10)))
        #expect(plan.reasons.contains(.usuallyOpenedAt(secondsIntoDay: 12 * 3600)), "\(plan.explanation)")
        #expect(try #require(plan.next) < Self.at(day: 10, 12), "\(plan.explanation)")
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

    @Test func offencesDoubleTheInterval() {
        var planner = planner()
        let first = planner.nextWake()!
        #expect(planner.appsToFetch(at: first) == ["org.example.News"])
        planner.fetched("org.example.News", result: nil, at: first)
        #expect(planner.effectiveInterval(of: "org.example.News") == 2 * Self.floor)
        #expect(planner.plan(for: "org.example.News", at: first)?.reasons.contains(.offences(count: 1)) == true)
        #expect(planner.nextWake()! - first >= 1800 * 1_000_000)
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

    @Test func nearAUsualOpenItIsFetchedOnTheIntervalTimersBeat() throws {
        var planner = planner()
        let app = "org.example.News"
        // Opens of 20 minutes: a beat falls due while it is open, and the timer beats again at the close.
        for day in 0..<4 {
            let open = Self.at(day: day, 8, 3 * day)
            run(&planner, until: open)
            planner.opened(app, at: open)
            planner.closed(app, at: open + 1_200_000_000)
        }
        run(&planner, until: Self.at(day: 4, 6))
        let plan = try #require(planner.plan(for: app, at: Self.at(day: 4, 6)))
        #expect(plan.reasons.first == .usuallyOpenedAt(secondsIntoDay: 8 * 3600))
        let next = try #require(plan.next)
        let cadence = try #require(planner.apps[app]?.cadence)
        #expect(cadence.next(atOrAfter: next, interval: 900_000_000) == next, "on a beat of the timer")
        #expect(next <= Self.at(day: 4, 8) - 600_000_000, "in time for the open")
        // The beat is the one a plain timer keeps: 15-minute steps from day 3's close.
        let close = Self.at(day: 3, 8, 9) + 1_200_000_000
        #expect((next - close) % 900_000_000 == 0)
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
        #expect(forgetful.plan(for: "org.example.News", at: Self.at(day: 4, 6))?.reasons.first == .atInterval(seconds: Self.floor))
    }

    @Test func neverIsNever() {
        var planner = AdaptivePlanner(floor: Self.floor)
        planner.register("org.example.News", interval: .never, at: Self.at(day: 0, 0))
        #expect(planner.nextWake() == nil)
        #expect(planner.plan(for: "org.example.News", at: Self.at(day: 0, 0))?.reasons == [.never])
    }
}
