public import BgTaskProtocol
import BgTaskCore
import Foundation

// Implementation notes
//
// Each app gets one planned fetch time, kept in a DeadlineQueue; the machine
// wakes at the earliest. The plan of an app is re-made whenever something
// about it changes:
//   - Its floor: the last fetch plus its interval (doubled per unredeemed
//     offence, up to 8×). Nothing is ever planned before it.
//   - The beat: each app has an IntervalCadence, the moments one plain timer
//     at its interval would fetch it (held while it is open or the machine
//     sleeps). Wherever an open may come, the app is fetched on that beat,
//     not merely at its floor: then at such an open its last fetch is never
//     older than the timer's, so it is never staler than under the timer
//     (the `naive` policy), only cheaper. Fetching at the floor instead made
//     freshness at an open a matter of phase luck against the timer.
//   - No habit yet (UsageHabit has seen under two days with opens): on every
//     beat, as the interval promises.
//   - A habit: the app is "hot" from `lead` + `margin` before a slot in which
//     it is opened with a chance ≥ `hotThreshold` until `margin` after it
//     (opens wander; on a kind of day seen little, `unfamiliarMargin` more).
//     While hot it is fetched on its beats, except in the quarter-hour after
//     the user closed it, and skipped when news by the open is unlikely
//     (ContentRate below `contentThreshold`).
//   - Away from hot runs: once news has become `fallbackNewsChance` likely
//     since it was last up to date (at most `fallbackCeiling` apart). The
//     content rate falls with noData answers and rises with newData: that is
//     the back-off and the recovery. A fallback fetch less than an interval
//     (and a pull-in) before a hot run gives way to the run's first beat, so
//     it cannot push that beat out.
// Coalescing: plans that may wait (the fallback ones) join the first wake
// already planned within `otherPullIn`, beats included, and such plans just
// before a new one move to it, at most `otherPullIn` past their own time; at
// a wake, such plans whose floor has passed ride along. Beats never move.
// Fallback plans are rounded up to a `grid`; beats are exact, and kept in
// `offGrid` by grid step so that a plan can find one.
// Opens are learned as local time of day, weekdays and weekends apart; old
// days decay, so a moved habit takes over in about two days.

/// bgtaskd's fetch planner: learns when each app is opened and how often it
/// has news, fetches shortly before likely opens, backs off apps that keep
/// answering noData or miss their budget, and coalesces fetches of different
/// apps into as few wakes as it can. Deterministic; times are realtime µs.
public struct AdaptivePlanner: FetchPlanner, Sendable {
    /// What the planner knows about one app.
    public struct AppState: Sendable, Equatable {
        /// Interval, fetch history and offences (persisted by the fetch mode).
        public var record: FetchRecord
        /// When the user opens it.
        public var habit = UsageHabit()
        /// How often it has news.
        public var content = ContentRate()
        /// noData answers in a row.
        public var noDataStreak = 0
        /// When it was last brought up to date: a fetch that answered, or
        /// the end of an open (realtime µs).
        public var upToDateAt: UInt64?
        /// When the user last closed it (realtime µs).
        public var closedAt: UInt64?
        public var isOpen = false
        public var isEligible = true
        /// The current plan and why.
        var planned: UInt64?
        var reasons: [FetchPlanReason] = []
        var pullIn: UInt64 = 0
        /// The plan before it joined other apps' wakes (it waits at most `pullIn` past it).
        var ownPlan: UInt64?
        /// Apps it was last woken with (for the explanation).
        var coalescedWith = 0
        /// When a plain interval timer would fetch it: near usual opens it is fetched then.
        public var cadence: IntervalCadence

        public init(record: FetchRecord) {
            self.record = record
            cadence = IntervalCadence(startingAt: record.lastFetchAt ?? record.registeredAt)
        }
    }

    public let floor: Double
    /// Seconds added to realtime to get local time (the machine's UTC offset).
    public var utcOffset: Int

    /// Plans are rounded up to this grid (seconds).
    public var grid: Duration = .seconds(60) { didSet { spans = Spans(self) } }
    /// Fetching starts this long before a usual open (seconds).
    public var lead: Duration = .seconds(600) { didSet { spans = Spans(self) } }
    /// Opens wander: a usual open counts this long either side of its slot (seconds).
    public var margin: Duration = .seconds(1800) { didSet { spans = Spans(self) } }
    /// …and this much further on a kind of day (weekday, weekend) seen little.
    public var unfamiliarMargin: Duration = .seconds(5400) { didSet { spans = Spans(self) } }
    /// A kind of day counts as seen little below this many (decayed) days of it.
    public var unfamiliarDays = 1.5
    /// A slot counts as a usual open from this chance of an open in it on.
    public var hotThreshold = 0.05
    /// Away from usual opens an app is fetched once news is this likely…
    public var fallbackNewsChance = 0.25
    /// …but at least this often (seconds).
    public var fallbackCeiling: Duration = .seconds(4 * 3600) { didSet { spans = Spans(self) } }
    /// A hot run is skipped when new content by then is less likely than this.
    public var contentThreshold = 0.01
    /// How far a plan that may wait (not a beat) may be pulled into an earlier wake (seconds).
    public var otherPullIn: Duration = .seconds(600) { didSet { spans = Spans(self) } }

    private(set) public var apps: [String: AppState] = [:]
    private var queue = DeadlineQueue<Int, UInt64>()
    /// How many apps are planned at each instant: a plan that may wait joins a wake already planned.
    private var plannedAt: [UInt64: Set<Int>] = [:]
    /// The planned instants off the grid (timer beats), by the grid step that ends after them.
    private var offGrid: [UInt64: Set<UInt64>] = [:]
    private var numbers: [String: Int] = [:]
    private var names: [String] = []
    /// Per app number, what pulling plans along needs (its own plan and how
    /// long it may wait), without looking the app up by name: that lookup,
    /// and the copy of its state, were most of a replan with thousands of
    /// apps planned near each other.
    private var ownPlans: [UInt64?] = []
    private var pullIns: [UInt64] = []
    private var sleeping = false
    /// The tunables converted for the arithmetic (set in init, and whenever one changes).
    private(set) var spans = Spans.unset

    public init(floor: Double, utcOffset: Int = 0) {
        self.floor = floor
        self.utcOffset = utcOffset
        spans = Spans(self)
    }

    // MARK: Persistence

    /// Puts back what a previous run knew about an app (its record and learned habits).
    public mutating func restore(_ app: String, record: FetchRecord, learned: AppLearning?, at now: UInt64) {
        var state = apps[app] ?? AppState(record: record)
        state.record = record
        if let learned {
            state.habit = learned.habit
            state.content = learned.content
            state.noDataStreak = learned.noDataStreak
            state.upToDateAt = learned.upToDateAt
            if let anchor = learned.cadenceAnchor { state.cadence = IntervalCadence(startingAt: anchor) }
        }
        apps[app] = state
        replan(app, at: now)
    }

    /// What the planner learned about an app, to persist.
    public func learning(of app: String) -> AppLearning? {
        apps[app].map {
            AppLearning(habit: $0.habit, content: $0.content, noDataStreak: $0.noDataStreak, upToDateAt: $0.upToDateAt,
                        cadenceAnchor: $0.cadence.anchor)
        }
    }

    /// The interval in force for an app (its floored interval, doubled per
    /// unredeemed offence); nil for never or an unknown app.
    public func effectiveInterval(of app: String) -> Double? {
        apps[app].flatMap { interval(of: $0) }
    }

    /// The earliest the app may next be fetched (its floor: the interval
    /// after its last fetch); nil for never or an unknown app. The plan may
    /// be later.
    public func earliestFetch(of app: String) -> UInt64? {
        apps[app].flatMap { floorTime(of: $0) }
    }

    /// Whether the app is open in the foreground, as last told.
    public func isOpen(_ app: String) -> Bool { apps[app]?.isOpen ?? false }

    /// A wake of the app that could not happen (its launch failed): it
    /// counts as a fetch for the interval, so the app is not retried at once.
    public mutating func skipped(_ app: String, at now: UInt64) {
        guard apps[app] != nil else { return }
        apps[app]!.record.lastFetchAt = now
        replan(app, at: now)
    }

    /// Puts an app back as it was (`state`, from ``apps``), or forgets it
    /// when it was not there, and plans it again: what undoing changes the
    /// fetch mode could not store takes.
    public mutating func reinstate(_ app: String, _ state: AppState?, at now: UInt64) {
        guard let state else { return remove(app) }
        apps[app] = state
        replan(app, at: now)
    }

    /// Forgets an app altogether.
    public mutating func remove(_ app: String) {
        if let number = numbers[app] {
            unplan(number, apps[app]?.planned)
            (ownPlans[number], pullIns[number]) = (nil, 0)
        }
        apps[app] = nil
        if let number = numbers[app] { queue.cancel(number) }
    }

    // MARK: FetchPlanner

    public mutating func register(_ app: String, interval: FetchInterval, at now: UInt64) {
        var state = apps[app] ?? AppState(record: FetchRecord(interval: interval, registeredAt: now))
        state.record.interval = interval
        apps[app] = state
        replan(app, at: now)
    }

    public mutating func opened(_ app: String, at now: UInt64) {
        guard var state = apps[app] else { return }
        state.isOpen = true
        state.cadence.setAppOpen(true, at: now, interval: intervalMicros(of: state))
        state.habit.recordOpen(atLocal: local(now))
        apps[app] = state
        replan(app, at: now)
    }

    public mutating func closed(_ app: String, at now: UInt64) {
        guard var state = apps[app] else { return }
        state.isOpen = false
        state.cadence.setAppOpen(false, at: now, interval: intervalMicros(of: state))
        // It refreshed itself in the foreground.
        state.upToDateAt = now
        state.closedAt = now
        apps[app] = state
        replan(app, at: now)
    }

    public mutating func fetched(_ app: String, result: FetchResult?, at now: UInt64) {
        guard var state = apps[app] else { return }
        let covered = state.upToDateAt.map { now > $0 ? Self.seconds(now - $0) : 0 }
            ?? Self.seconds(now > state.record.registeredAt ? now - state.record.registeredAt : 0)
        state.record.lastFetchAt = now
        state.record.record(.init(at: now, result: result))
        switch result {
        case .newData:
            state.noDataStreak = 0
            state.content.record(gap: covered, newData: true, at: now)
            state.upToDateAt = now
        case .noData:
            state.noDataStreak += 1
            state.content.record(gap: covered, newData: false, at: now)
            state.upToDateAt = now
        case .failed, nil:
            break
        }
        apps[app] = state
        replan(app, at: now)
    }

    public mutating func setEligible(_ app: String, _ eligible: Bool, at now: UInt64) {
        guard apps[app] != nil else { return }
        apps[app]!.isEligible = eligible
        replan(app, at: now)
    }

    public mutating func setSleeping(_ sleeping: Bool, at now: UInt64) {
        guard sleeping != self.sleeping else { return }
        self.sleeping = sleeping
        for app in apps.keys.sorted() {
            apps[app]!.cadence.setMachineAsleep(sleeping, at: now, interval: intervalMicros(of: apps[app]!))
            // Awake again: the timers that fell due in the night fire now, and plans follow them.
            if !sleeping { replan(app, at: now) }
        }
    }

    public mutating func nextWake() -> UInt64? {
        sleeping ? nil : queue.earliest()
    }

    public mutating func appsToFetch(at now: UInt64) -> [String] {
        guard !sleeping, let earliest = queue.earliest(), earliest <= now else { return [] }
        var due: [String] = []
        var later: [(Int, UInt64)] = []
        while let number = queue.popDue(at: now &+ spans.otherPullIn) {
            let app = names[number]
            guard let state = apps[app], let planned = state.planned else { continue }
            // Pulled in only if its own pull-in allows and its floor has passed.
            if planned <= now || (planned - now <= state.pullIn && floorTime(of: state).map { $0 <= now } == true) {
                due.append(app)
            } else {
                later.append((number, planned))
            }
        }
        for (number, planned) in later { queue.schedule(number, at: planned) }
        for app in due {
            unplan(numbers[app]!, apps[app]!.planned)
            apps[app]!.planned = nil
            apps[app]!.coalescedWith = due.count - 1
        }
        return due
    }

    public func plan(for app: String, at now: UInt64) -> FetchPlan? {
        guard let state = apps[app] else { return nil }
        var reasons = state.reasons
        if state.coalescedWith > 0 { reasons.append(.coalesced(withApps: state.coalescedWith)) }
        return FetchPlan(next: state.planned, reasons: reasons)
    }

    // MARK: Planning

    // Times are realtime µs (UInt64); spans are Durations, converted here and
    // only here, saturating instead of trapping.
    static let microsecondsPerSecond: UInt64 = 1_000_000

    /// A span in µs: 0 for negative ones, saturating at UInt64.max.
    static func micros(_ span: Duration) -> UInt64 { UInt64(clamping: span.microseconds) }

    /// Seconds in µs, at most 10¹² s (far beyond any interval), 0 for negative or NaN.
    static func micros(seconds: Double) -> UInt64 {
        seconds > 0 ? UInt64(min(seconds, 1e12) * 1e6) : 0
    }

    /// µs in seconds.
    static func seconds(_ micros: UInt64) -> Double { Double(micros) / 1e6 }

    /// A span in whole seconds.
    static func wholeSeconds(_ span: Duration) -> Int { Int(span.components.seconds) }

    /// How far ahead a fallback plan looks (µs).
    static let horizonSpan = micros(.seconds(36 * 3600))
    /// One slot of a usage habit (µs).
    static let slotSpan = micros(.seconds(UsageHabit.slotMinutes * 60))

    /// The tunables in the units the arithmetic uses, converted once whenever
    /// one changes (a Duration's parts take a 128-bit division to get at:
    /// converting in the planner's loops made it 2.5 times slower).
    struct Spans: Sendable {
        var grid: UInt64
        var otherPullIn: UInt64
        /// The quiet time after a close: `margin` and a quarter of an hour (µs).
        var afterClose: UInt64
        var lead: Int
        var margin: Int
        var unfamiliarMargin: Int
        var leadPlusMargin: Double
        var fallbackCeiling: Double

        /// Before init converts the real ones.
        static let unset = Spans(grid: 1, otherPullIn: 0, afterClose: 0, lead: 0, margin: 0, unfamiliarMargin: 0, leadPlusMargin: 0, fallbackCeiling: 0)

        init(grid: UInt64, otherPullIn: UInt64, afterClose: UInt64, lead: Int, margin: Int, unfamiliarMargin: Int,
             leadPlusMargin: Double, fallbackCeiling: Double) {
            (self.grid, self.otherPullIn, self.afterClose) = (grid, otherPullIn, afterClose)
            (self.lead, self.margin, self.unfamiliarMargin) = (lead, margin, unfamiliarMargin)
            (self.leadPlusMargin, self.fallbackCeiling) = (leadPlusMargin, fallbackCeiling)
        }

        init(_ planner: AdaptivePlanner) {
            grid = AdaptivePlanner.micros(planner.grid)
            otherPullIn = AdaptivePlanner.micros(planner.otherPullIn)
            afterClose = AdaptivePlanner.micros(planner.margin + .seconds(900))
            lead = AdaptivePlanner.wholeSeconds(planner.lead)
            margin = AdaptivePlanner.wholeSeconds(planner.margin)
            unfamiliarMargin = AdaptivePlanner.wholeSeconds(planner.unfamiliarMargin)
            leadPlusMargin = (planner.lead + planner.margin).seconds
            fallbackCeiling = planner.fallbackCeiling.seconds
        }
    }

    private func local(_ realtime: UInt64) -> Int { Int(realtime / Self.microsecondsPerSecond) + utcOffset }

    private func interval(of state: AppState) -> Double? {
        guard let base = state.record.interval.effectiveSeconds(floor: floor) else { return nil }
        return base * Double(1 << min(state.record.offences, 3))
    }

    /// The interval in µs, 0 for never.
    private func intervalMicros(of state: AppState) -> UInt64 {
        interval(of: state).map(Self.micros(seconds:)) ?? 0
    }

    /// The earliest a fetch may happen: the interval after the last fetch (or registration).
    private func floorTime(of state: AppState) -> UInt64? {
        guard let interval = interval(of: state) else { return nil }
        return (state.record.lastFetchAt ?? state.record.registeredAt) &+ Self.micros(seconds: interval)
    }

    /// Away from usual opens: the time by which news is `fallbackNewsChance`
    /// likely, between the interval and `fallbackCeiling`. Apps that keep
    /// answering noData have a lower rate, so they are fetched less; newData
    /// brings them back.
    private func fallbackSpacing(_ state: AppState, interval: Double) -> Double {
        let perSecond = state.content.rate / 3600
        let spacing = -log(1 - fallbackNewsChance) / max(perSecond, 1e-9)
        return min(max(spacing, interval), max(spans.fallbackCeiling, interval))
    }

    private mutating func number(of app: String) -> Int {
        if let number = numbers[app] { return number }
        names.append(app)
        ownPlans.append(nil)
        pullIns.append(0)
        numbers[app] = names.count - 1
        return names.count - 1
    }

    private func roundUp(_ time: UInt64) -> UInt64 {
        let step = spans.grid
        return (time + step - 1) / step * step
    }

    /// Whether an open is usual between `margin` before `realtime` and
    /// `lead` + `margin` after it: opens wander around their habit. On a kind
    /// of day seen little (the first weekend) habits are borrowed from the
    /// other kind, and wander further.
    private func isHot(_ habit: UsageHabit, at realtime: UInt64) -> Bool {
        let t = local(realtime)
        let slot = UsageHabit.slotMinutes * 60
        let wander = spans.margin + (habit.observedDays(likeLocal: t) < unfamiliarDays ? spans.unfamiliarMargin : 0)
        var s = t - wander
        while s <= t + spans.lead + wander {
            if habit.probability(atLocal: s) >= hotThreshold { return true }
            s += slot
        }
        return false
    }

    private mutating func replan(_ app: String, at now: UInt64) {
        guard var state = apps[app] else { return }
        let number = number(of: app)
        var (planned, reasons, pullIn) = makePlan(state, at: now)
        state.ownPlan = planned
        let step = spans.grid
        unplan(number, state.planned)
        // A plan that may wait a little joins the first wake already planned
        // within that while: the machine wakes once for both.
        if let own = planned, pullIn > 0 {
            let end = own &+ pullIn
            var time = own
            while time <= end {
                // Wakes off the grid (on an app's timer beat) within the step before come first.
                if let beats = offGrid[time], let beat = beats.lazy.filter({ $0 >= own && $0 <= end }).min() {
                    planned = beat
                    break
                }
                if plannedAt[time] != nil {
                    planned = time
                    break
                }
                time &+= step
            }
        }
        state.planned = planned
        state.reasons = reasons
        state.pullIn = pullIn
        (ownPlans[number], pullIns[number]) = (state.ownPlan, state.pullIn)
        apps[app] = state
        guard let planned else { return queue.cancel(number) }
        addPlanned(number, at: planned)
        queue.schedule(number, at: planned)
        // Plans just before this one that may wait join it.
        var time = roundUp(planned)
        while time >= step, planned - (time - step) <= spans.otherPullIn {
            time -= step
            guard let others = plannedAt[time] else { continue }
            let joining = others.filter { other in
                guard pullIns[other] > 0, let own = ownPlans[other] else { return false }
                return planned >= own && planned - own <= pullIns[other]
            }
            // In a fixed order (a Set's is seeded per process), so the queue's ties fall the same way every run.
            for other in joining.sorted() {
                unplan(other, time)
                addPlanned(other, at: planned)
                apps[names[other]]!.planned = planned
                queue.schedule(other, at: planned)
            }
        }
    }

    private mutating func addPlanned(_ number: Int, at time: UInt64) {
        if plannedAt[time] == nil, time % spans.grid != 0 { offGrid[roundUp(time), default: []].insert(time) }
        plannedAt[time, default: []].insert(number)
    }

    private mutating func unplan(_ number: Int, _ time: UInt64?) {
        guard let time, var set = plannedAt[time] else { return }
        set.remove(number)
        guard set.isEmpty else { return plannedAt[time] = set }
        plannedAt[time] = nil
        let slot = roundUp(time)
        if slot != time, var beats = offGrid[slot] {
            beats.remove(time)
            offGrid[slot] = beats.isEmpty ? nil : beats
        }
    }

    /// The plan, why, and how far (µs) it may be pulled into an earlier wake.
    private func makePlan(_ state: AppState, at now: UInt64) -> (UInt64?, [FetchPlanReason], UInt64) {
        guard let floorTime = floorTime(of: state), let interval = interval(of: state) else { return (nil, [.never], 0) }
        var limits: [FetchPlanReason] = []
        if state.record.offences > 0 { limits.append(.offences(count: state.record.offences)) }
        if state.noDataStreak > 1 { limits.append(.noDataStreak(count: state.noDataStreak)) }
        if state.isOpen { return (nil, [.inForeground], 0) }
        if !state.isEligible { return (nil, [.notEligible], 0) }
        let earliest = max(floorTime, now)

        guard state.habit.hasLearned else {
            // Learning: at the interval, as promised, on the timer's beat
            // (any open may be a usual one).
            let at = state.cadence.next(atOrAfter: earliest, interval: intervalMicros(of: state)) ?? roundUp(earliest)
            return (at, [.atInterval(seconds: interval)] + limits, 0)
        }

        // The fallback, away from usual opens: when news has become likely enough.
        let upToDate = state.upToDateAt ?? state.record.registeredAt
        let spacing = fallbackSpacing(state, interval: interval)
        let fallback = max(earliest, upToDate &+ Self.micros(seconds: spacing))
        let step = spans.grid
        var t = roundUp(earliest)
        // A fallback fetch just before a usual open would keep the open's
        // fetch off the timer's beat: the open's fetch does for both.
        let horizon = min(fallback &+ intervalMicros(of: state) &+ spans.otherPullIn, t &+ Self.horizonSpan)
        // Within a run of likely opens the app is fetched at its interval (t starts at its floor).
        let coarse = Self.slotSpan
        var wasHot = true
        while t < horizon {
            guard isHot(state.habit, at: t) else {
                // Runs are wider than a slot: step by slots until one starts, then back to its first moment.
                t += coarse
                wasHot = false
                continue
            }
            if !wasHot {
                while t >= step, t - step >= roundUp(earliest), isHot(state.habit, at: t - step) { t -= step }
                wasHot = true
            }
            // The user has just seen it: the open it was due for is behind it.
            if let closed = state.closedAt, t < closed &+ spans.afterClose {
                t += step
                continue
            }
            let gap = Self.seconds(t > upToDate ? t - upToDate : 0) + spans.leadPlusMargin
            if state.content.probability(within: gap) >= contentThreshold {
                var reasons: [FetchPlanReason] = [.usuallyOpenedAt(secondsIntoDay: usualOpen(state.habit, from: t)), .contentLikely]
                // On the interval timer's beat: never staler at this open than under the timer.
                let from = max(earliest, t > step ? t - step + 1 : 0)
                let at = state.cadence.next(atOrAfter: from, interval: intervalMicros(of: state)) ?? t
                if at == floorTime && floorTime > now { reasons.append(.intervalFloor(seconds: interval)) }
                return (at, reasons + limits, 0)
            }
            // Little chance of news by then: skip this run, a slot at a time
            // (whether a moment is hot changes only at local slot boundaries).
            while t < horizon && isHot(state.habit, at: t) { t = nextSlot(after: t) }
        }
        var reasons: [FetchPlanReason] = [.noUsualOpenSoon(atLatestEvery: spacing)]
        if fallback == floorTime && floorTime > now { reasons.append(.intervalFloor(seconds: interval)) }
        return (roundUp(fallback), reasons + limits, spans.otherPullIn)
    }

    /// The first moment on the grid at or after the local slot that follows `t`'s.
    private func nextSlot(after t: UInt64) -> UInt64 {
        let slot = UsageHabit.slotMinutes * 60
        let local = local(t)
        let next = (local >= 0 ? local / slot : (local - slot + 1) / slot) * slot + slot
        return roundUp(Self.micros(.seconds(max(0, next - utcOffset))))
    }

    /// Seconds into the local day of the most likely slot of the run starting at `t`.
    private func usualOpen(_ habit: UsageHabit, from t: UInt64) -> Int {
        var best = (p: -1.0, at: local(t) + spans.lead)
        var s = local(t)
        let slot = UsageHabit.slotMinutes * 60
        for _ in 0..<8 {
            let p = habit.probability(atLocal: s)
            if p > best.p { best = (p, s) }
            if p < hotThreshold && best.p >= hotThreshold { break }
            s += slot
        }
        let into = ((best.at % 86_400) + 86_400) % 86_400
        return into / slot * slot
    }
}
