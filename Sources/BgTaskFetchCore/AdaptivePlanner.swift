public import BgTaskProtocol
import BgTaskCore
import Foundation

// Implementation notes
//
// What a fetch buys is staleness removed at the user's next open: an open
// at gap g after the app was last up to date finds content that waited
// S(g) = g − (1 − e^(−r·g))/r on average, for news arriving at rate r. Under
// fetches every T, an open sees a gap spread over [0, T], so an app costs
// λ·E[S] seconds of staleness per second, for opens arriving at rate λ.
// Spending a fixed number of fetches where that cost falls most gives every
// app and every part of the day the spacing T at which one more fetch saves
// the same staleness, `fetchWorth` (the Lagrange condition λ·T²·E'(T) = μ):
//   T = ∛(3μ / (λ·r))   while news is rare within T (E ≈ r·T²/6),
//   T = √(2μ / λ)        once news is near certain within T (E ≈ T/2),
// the larger of the two, kept between the app's interval and `ceiling`.
// So an app is fetched at its floor where it is usually opened, rarely where
// it is not, about as often as ∛(chance of an open) elsewhere, and seldom if
// it rarely has news; a push-announced app whose fetches find nothing is
// left at the ceiling.
//
// The plan follows the spacing through the day: since the app was last up
// to date (a fetch, a push, the end of an open) it accrues a need of
// ∫ dt / T(t), and the fetch falls where the need reaches 1. A fetch after a
// quiet stretch thus lands as a usual open's slots begin, and none is spent
// right after the user closed the app.
//
// λ per 15-minute slot comes from UsageHabit.openChance: the chance of an
// open in the slot on a day of its kind, smoothed over the neighbouring
// slots, part of it spread over the whole day, and a prior that fades as
// days are seen (so a new app is fetched every hour or so, not never).
// r is ContentRate's, learned from what fetches found (pushes are not
// counted: content they bring needs no fetch).
//
// Coalescing: once an app's need reaches `rideAlong` it is fetched at any
// wake that happens anyway: another app's planned fetch, a push, the machine
// waking. Plans are rounded up to `grid` so that due apps meet (unless
// that would stretch a spacing by more than a tenth).

/// bgtaskd's fetch planner: learns when each app is opened and how often it
/// has news, spends fetches where they save users the most staleness (before
/// likely opens, little elsewhere), backs off apps that keep answering noData
/// or miss their budget, and coalesces fetches of different apps into as few
/// wakes as it can. Deterministic; times are realtime µs.
public struct AdaptivePlanner: FetchPlanner, Sendable {
    /// What the planner knows about one app.
    public struct AppState: Sendable, Equatable {
        /// Interval, fetch history and offences (persisted by the fetch mode).
        public var record: FetchRecord
        /// When the user opens it.
        public var habit = UsageHabit()
        /// How often it has news a fetch can find.
        public var content = ContentRate()
        /// noData answers in a row.
        public var noDataStreak = 0
        /// When it was last brought up to date: a fetch that answered, a
        /// push, or the end of an open (realtime µs).
        public var upToDateAt: UInt64?
        public var isOpen = false
        public var isEligible = true
        /// The current plan: due at `planned`, may ride along with any wake from `early` on.
        var planned: UInt64?
        var early: UInt64?
        var reasons: [FetchPlanReason] = []
        /// Apps it was last woken with (for the explanation).
        var coalescedWith = 0

        public init(record: FetchRecord) {
            self.record = record
        }
    }

    public let floor: Double
    /// Seconds added to realtime to get local time (the machine's UTC offset);
    /// changed with ``setUTCOffset(_:at:)``.
    public private(set) var utcOffset: Int

    /// Plans are rounded up to this grid, so that apps due about together meet.
    public var grid: Duration = .seconds(60) { didSet { spans = Spans(self) } }
    /// The staleness one more fetch must save users (summed over their
    /// opens) for it to be spent: the price of a fetch. Higher fetches less.
    public var fetchWorth: Duration = .seconds(2) { didSet { spans = Spans(self) } }
    /// An app is never left longer than this without a fetch while the machine is awake.
    public var ceiling: Duration = .seconds(6 * 3600) { didSet { spans = Spans(self) } }
    /// From this share of its need on, an app rides along with any wake.
    public var rideAlong = 0.6
    /// How open counts become chances of an open.
    public var openModel = OpenChances.Model()

    private(set) public var apps: [String: AppState] = [:]
    /// When the user uses any app: the sum of every app's habit, changed with each.
    private var activity = UsageActivity()
    private var due = DeadlineQueue<Int, UInt64>()
    private var early = DeadlineQueue<Int, UInt64>()
    private var numbers: [String: Int] = [:]
    private var names: [String] = []
    private var sleeping = false
    /// A wake that happens anyway (a push, the machine waking): apps that may ride along go now.
    private var opportunity: UInt64?
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
            activity.replace(apps[app]?.habit, with: learned.habit)
            state.habit = learned.habit
            state.content = learned.content
            state.noDataStreak = learned.noDataStreak
            state.upToDateAt = learned.upToDateAt
        }
        apps[app] = state
        replan(app, at: now)
    }

    /// What the planner learned about an app, to persist.
    public func learning(of app: String) -> AppLearning? {
        apps[app].map {
            AppLearning(habit: $0.habit, content: $0.content, noDataStreak: $0.noDataStreak, upToDateAt: $0.upToDateAt)
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

    /// A wake of the app that could not happen (its launch failed), or one
    /// that is under way: it counts as a fetch for the interval, so the app
    /// is not woken again at once.
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
        activity.replace(apps[app]?.habit, with: state.habit)
        apps[app] = state
        replan(app, at: now)
    }

    /// Forgets an app altogether.
    public mutating func remove(_ app: String) {
        activity.replace(apps[app]?.habit, with: nil)
        apps[app] = nil
        if let number = numbers[app] {
            due.cancel(number)
            early.cancel(number)
        }
    }

    // MARK: FetchPlanner

    public mutating func register(_ app: String, interval: FetchInterval, at now: UInt64) {
        if apps[app] == nil { activity.replace(nil, with: UsageHabit()) }
        var state = apps[app] ?? AppState(record: FetchRecord(interval: interval, registeredAt: now))
        state.record.interval = interval
        apps[app] = state
        replan(app, at: now)
    }

    public mutating func opened(_ app: String, at now: UInt64) {
        guard var state = apps[app] else { return }
        state.isOpen = true
        let before = state.habit
        Self.takeBackFuture(&state, at: now, today: UsageHabit.day(local(now)))
        state.habit.recordOpen(atLocal: local(now))
        activity.replace(before, with: state.habit)
        apps[app] = state
        replan(app, at: now)
    }

    public mutating func closed(_ app: String, at now: UInt64) {
        guard var state = apps[app] else { return }
        state.isOpen = false
        // It refreshed itself in the foreground.
        state.upToDateAt = now
        apps[app] = state
        replan(app, at: now)
    }

    public mutating func fetched(_ app: String, result: FetchResult?, at now: UInt64) {
        guard var state = apps[app] else { return }
        Self.takeBackFuture(&state, at: now, today: UsageHabit.day(local(now)))
        // From when it was last up to date before this wake: the daemon marks
        // the wake as under way (``skipped(_:at:)``) before its answer comes,
        // so `lastFetchAt` may be this very wake; the previous wake's time is
        // its outcome's.
        let since = max(state.upToDateAt ?? state.record.registeredAt, state.record.history.last?.at ?? 0)
        let covered = Self.seconds(now > since ? now - since : 0)
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

    /// A push woke the app in the background: it is up to date (what the
    /// push brought needs no fetch, so it does not count as news a fetch
    /// finds), and the wake is one other apps may ride along with.
    public mutating func pushed(_ app: String, result: FetchResult, at now: UInt64) {
        if var state = apps[app] {
            state.upToDateAt = now
            apps[app] = state
            replan(app, at: now)
        }
        wokeAnyway(at: now)
    }

    /// A push that made `app` up to date at `pushedAt` (``pushed(_:result:at:)``)
    /// was not taken in: its app went or overstayed before completing it. The
    /// app is as up to date as it was before (`upToDateBefore`), unless
    /// something since the push brought it up to date.
    public mutating func pushNotTaken(_ app: String, pushedAt: UInt64, upToDateBefore: UInt64?, at now: UInt64) {
        guard var state = apps[app], state.upToDateAt == pushedAt else { return }
        state.upToDateAt = upToDateBefore
        apps[app] = state
        replan(app, at: now)
    }

    /// The machine is awake for background work of another kind at `now`
    /// (a push, a location event): apps far enough into their spacing are
    /// fetched along with it.
    public mutating func wokeAnyway(at now: UInt64) {
        if !sleeping { opportunity = now }
    }

    public mutating func setEligible(_ app: String, _ eligible: Bool, at now: UInt64) {
        guard apps[app] != nil else { return }
        apps[app]!.isEligible = eligible
        replan(app, at: now)
    }

    /// The machine's UTC offset is now `offset` (daylight saving time began
    /// or ended, or the time zone changed). Habits are kept in local time, as
    /// users live them: from now on opens are learned, and fetches placed, at
    /// the same local hours, and every plan made in the old local time is made again.
    public mutating func setUTCOffset(_ offset: Int, at now: UInt64) {
        guard offset != utcOffset else { return }
        utcOffset = offset
        for app in apps.keys.sorted() { replan(app, at: now) }
    }

    public mutating func setSleeping(_ sleeping: Bool, at now: UInt64) {
        guard sleeping != self.sleeping else { return }
        self.sleeping = sleeping
        guard !sleeping else { return opportunity = nil }
        // Awake again: apps whose need grew in the night go with the wake.
        for app in apps.keys.sorted() { replan(app, at: now) }
        opportunity = now
    }

    public mutating func nextWake() -> UInt64? {
        guard !sleeping else { return nil }
        let planned = due.earliest()
        if let opportunity, let first = early.earliest(), first <= opportunity {
            return min(planned ?? .max, opportunity)
        }
        return planned
    }

    public mutating func appsToFetch(at now: UInt64) -> [String] {
        guard !sleeping else { return [] }
        let isWake = due.earliest().map { $0 <= now } ?? false || opportunity.map { $0 <= now } ?? false
        opportunity = nil
        guard isWake else { return [] }
        // Every app due is also early: taking the early ones takes all.
        var taken: [String] = []
        while let number = early.popDue(at: now) {
            due.cancel(number)
            let app = names[number]
            guard apps[app]?.planned != nil else { continue }
            taken.append(app)
        }
        taken.sort()
        for app in taken {
            apps[app]!.planned = nil
            apps[app]!.early = nil
            apps[app]!.coalescedWith = taken.count - 1
        }
        return taken
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

    /// Seconds of one usage-habit slot.
    static let slotSeconds = UsageHabit.slotMinutes * 60

    /// The tunables in the units the arithmetic uses, converted once whenever
    /// one changes (a Duration's parts take a 128-bit division to get at:
    /// converting in the planner's loops made it 2.5 times slower).
    struct Spans: Sendable {
        var grid: UInt64
        /// `fetchWorth` in seconds.
        var worth: Double
        /// `ceiling` in seconds.
        var ceiling: Double

        /// Before init converts the real ones.
        static let unset = Spans(grid: 1, worth: 0, ceiling: 0)

        init(grid: UInt64, worth: Double, ceiling: Double) {
            (self.grid, self.worth, self.ceiling) = (max(grid, 1), worth, ceiling)
        }

        init(_ planner: AdaptivePlanner) {
            self.init(grid: AdaptivePlanner.micros(planner.grid), worth: max(planner.fetchWorth.seconds, 0),
                      ceiling: max(planner.ceiling.seconds, 0))
        }
    }

    private func local(_ realtime: UInt64) -> Int { Int(realtime / Self.microsecondsPerSecond) + utcOffset }

    private func interval(of state: AppState) -> Double? {
        guard let base = state.record.interval.effectiveSeconds(floor: floor) else { return nil }
        return base * Double(1 << min(state.record.offences, 3))
    }

    /// The earliest a fetch may happen: the interval after the last fetch (or registration).
    private func floorTime(of state: AppState) -> UInt64? {
        guard let interval = interval(of: state) else { return nil }
        return (state.record.lastFetchAt ?? state.record.registeredAt) &+ Self.micros(seconds: interval)
    }

    /// When the app was last up to date or fetched: what its need accrues from.
    private func upToDate(_ state: AppState) -> UInt64 {
        max(state.upToDateAt ?? state.record.registeredAt, state.record.lastFetchAt ?? 0)
    }

    private mutating func number(of app: String) -> Int {
        if let number = numbers[app] { return number }
        names.append(app)
        numbers[app] = names.count - 1
        return names.count - 1
    }

    private func roundUp(_ time: UInt64) -> UInt64 {
        let step = spans.grid
        let (sum, overflow) = time.addingReportingOverflow(step - 1)
        return overflow ? time : sum / step * step
    }

    private mutating func replan(_ app: String, at now: UInt64) {
        guard var state = apps[app] else { return }
        let number = number(of: app)
        // Days without opens count too, not only once the next open comes.
        let today = UsageHabit.day(local(now))
        let before = state.habit
        Self.takeBackFuture(&state, at: now, today: today)
        if state.habit.lastDay.map({ $0 < today }) ?? true {
            state.habit.advance(to: today)
            activity.replace(before, with: state.habit)
        }
        let plan = makePlan(state, at: now)
        state.planned = plan.due
        state.early = plan.early
        state.reasons = plan.reasons
        apps[app] = state
        guard let planned = plan.due, let early = plan.early else {
            due.cancel(number)
            self.early.cancel(number)
            return
        }
        due.schedule(number, at: planned)
        self.early.schedule(number, at: early)
    }

    /// Times after `now` come from a clock that was ahead and was set back
    /// (or from a damaged record): taken as now. Kept, they would hold the
    /// app's fetches back, and its learning, until the clock caught up.
    private static func takeBackFuture(_ state: inout AppState, at now: UInt64, today: Int) {
        if let last = state.record.lastFetchAt, last > now { state.record.lastFetchAt = now }
        if state.record.registeredAt > now { state.record.registeredAt = now }
        if let upToDate = state.upToDateAt, upToDate > now { state.upToDateAt = now }
        if let last = state.record.history.last, last.at > now {
            for i in state.record.history.indices where state.record.history[i].at > now { state.record.history[i].at = now }
        }
        state.habit.rewind(to: today)
    }

    /// Seconds between fetches where an open comes with chance `chance` in a
    /// slot and news at `newsPerSecond`: where one more fetch saves `worth`.
    /// `price` multiplies the worth (a rarely used app's fetches cost more).
    func spacing(chance: Double, newsPerSecond: Double, interval: Double, price: Double = 1) -> Double {
        let opensPerSecond = chance / Double(Self.slotSeconds)
        let top = max(spans.ceiling, interval)
        guard opensPerSecond > 0, newsPerSecond > 0 else { return top }
        let worth = spans.worth * max(price, 1)
        let rare = cbrt(3 * worth / (opensPerSecond * newsPerSecond))
        let certain = (2 * worth / opensPerSecond).squareRoot()
        return min(max(rare, certain, interval), top)
    }

    /// Below this many days seen (decayed), the plan says it is still learning.
    let learningDays = 1.5
    /// A slot whose chance of an open is this or more is a usual open (for the explanation).
    let usualChance = 0.1

    struct Plan {
        var due: UInt64?
        var early: UInt64?
        var reasons: [FetchPlanReason]
    }

    /// The plan and why: where the need since the app was last up to date reaches 1 (and `rideAlong`).
    private mutating func makePlan(_ state: AppState, at now: UInt64) -> Plan {
        guard let floorTime = floorTime(of: state), let interval = interval(of: state) else {
            return Plan(reasons: [.never])
        }
        var limits: [FetchPlanReason] = []
        if state.record.offences > 0 { limits.append(.offences(count: state.record.offences)) }
        if state.noDataStreak > 1 { limits.append(.noDataStreak(count: state.noDataStreak)) }
        // What limits the app's fetches still holds while it is open or held.
        if state.isOpen { return Plan(reasons: [.inForeground] + limits) }
        if !state.isEligible { return Plan(reasons: [.notEligible] + limits) }

        let chances = state.habit.openChances(openModel, activity: activity.shares())
        let news = state.content.rate / 3600
        let price = chances.isRarelyUsed ? openModel.rarePrice : 1
        let slot = Self.slotSeconds
        // Walk the slots from when it was last up to date, accruing need.
        var t = local(upToDate(state))
        let start = t
        let nowLocal = local(now)
        var need = 0.0
        var earlyAt: Int?
        var dueAt: Int?
        var spacingThere = 0.0
        // The ceiling bounds every spacing, so need reaches 1 within it; the cap is a guard.
        let limit = start + Int(min(max(spans.ceiling, interval), 7 * 86_400)) + slot
        while dueAt == nil, t < limit {
            let end = (UsageHabit.slotStart(t) + slot)
            let spacing = spacing(chance: chances.at(local: t), newsPerSecond: news, interval: interval, price: price)
            let gain = Double(end - t) / spacing
            if earlyAt == nil, need + gain >= rideAlong {
                earlyAt = t + Int(((rideAlong - need) * spacing).rounded(.up))
            }
            if need + gain >= 1 {
                dueAt = t + Int(((1 - need) * spacing).rounded(.up))
                spacingThere = spacing
            }
            need += gain
            t = end
        }
        let dueLocal = dueAt ?? limit
        func realtime(_ local: Int) -> UInt64 { Self.micros(seconds: Double(local - utcOffset)) }
        // On the grid, so that apps due together meet; unless that would
        // stretch a short spacing (a tenth of it at most).
        let exact = realtime(dueLocal)
        let rounded = roundUp(exact)
        let stretch = Self.micros(seconds: (spacingThere > 0 ? spacingThere : spans.ceiling) / 10)
        var dueTime = max(rounded - exact <= stretch ? rounded : exact, floorTime, now)
        let earlyTime = min(max(realtime(earlyAt ?? dueLocal), floorTime, now), dueTime)
        if dueTime < earlyTime { dueTime = earlyTime }

        // Why: what the spacing there rests on.
        let planLocal = max(local(dueTime), nowLocal)
        var reasons: [FetchPlanReason] = []
        // The opens it serves: those soon after it, up to the next fetch or two hours.
        let (peak, peakAt) = chances.peak(from: planLocal, through: planLocal + Int(min(max(spacingThere, 7200), 86_400)))
        if state.habit.observedDays < learningDays {
            reasons.append(.learningHabits)
        } else if peak >= usualChance {
            reasons.append(.usuallyOpenedAt(secondsIntoDay: ((peakAt % 86_400) + 86_400) % 86_400))
        } else {
            reasons.append(.noUsualOpenSoon(atLatestEvery: max(spans.ceiling, interval)))
        }
        reasons.append(.spacedBy(seconds: spacingThere > 0 ? spacingThere : max(spans.ceiling, interval)))
        reasons.append(.newsEvery(seconds: 1 / max(news, 1e-12)))
        if chances.isRarelyUsed && price > 1 { reasons.append(.rarelyUsed(daysShare: chances.usedShare ?? 0)) }
        if dueTime == floorTime && floorTime > now { reasons.append(.intervalFloor(seconds: interval)) }
        return Plan(due: dueTime, early: earlyTime, reasons: reasons + limits)
    }
}
