/// The chance of an open per slot, as the planner prices fetches by it:
/// ``UsageHabit``'s counts smoothed over neighbouring slots (opens wander
/// by a quarter-hour or two), part of each open spread over the hours the
/// user uses apps at all (``UsageActivity``: some opens come at any of
/// them), and a prior spread the same way that fades as days are seen, so
/// that an app seen little is neither taken as never opened nor as opened
/// only where it happened to be.
public struct OpenChances: Sendable {
    /// How counts become chances.
    public struct Model: Sendable, Equatable {
        /// Opens a day assumed before anything is seen…
        public var priorOpensPerDay = 3.0
        /// …weighing as this many days.
        public var priorDays = 0.25
        /// The share of each open spread over the whole day.
        public var spread = 0.15
        /// An app opened on fewer than this share of the days seen
        /// (``UsageHabit/usedShare``) is rarely used: as iOS does, it gets
        /// less background time than its opens alone would earn it. A
        /// little above 30 %: the share of the last week or so wanders by
        /// about a tenth around an app's true one.
        public var rareShare = 0.35
        /// Days that must have been seen before an app is judged rarely
        /// used, counted decayed as ``UsageHabit/usedShare`` counts them
        /// (1, 1.9, 2.71… on an app's first, second, third day): 2 means
        /// from its third day on.
        public var rareAfterDays = 2.0
        /// How many times dearer a fetch is for a rarely used app (the
        /// staleness it must save multiplied by this; its spacing grows by
        /// the cube root, ∛12 ≈ 2.3, where its news is rare).
        public var rarePrice = 12.0

        public init() {}
    }

    /// Weights of the slots two before to two after.
    static let kernel = [0.1, 0.2, 0.4, 0.2, 0.1]

    let habit: UsageHabit
    let spread: Double
    /// Per kind of day (weekday, weekend): the opens a day spread over the user's hours, and the divisor.
    let base: (weekday: Double, weekend: Double)
    /// ``UsageActivity/shares()``.
    let activity: [Double]
    let days: (weekday: Double, weekend: Double)

    init(_ habit: UsageHabit, model: Model, activity: [Double]) {
        self.habit = habit
        self.activity = activity
        spread = model.spread
        let weekdayMass = habit.weekday.mass.reduce(0, +), weekendMass = habit.weekend.mass.reduce(0, +)
        let borrow = UsageHabit.borrowWeight
        func base(own: Double, other: Double) -> Double {
            model.spread * (own + borrow * other) + model.priorDays * model.priorOpensPerDay
        }
        self.base = (base(own: weekdayMass, other: weekendMass), base(own: weekendMass, other: weekdayMass))
        days = (habit.weekday.days + borrow * habit.weekend.days + model.priorDays,
                habit.weekend.days + borrow * habit.weekday.days + model.priorDays)
        usedShare = habit.usedShare.flatMap { $0.days >= model.rareAfterDays ? $0.share : nil }
        isRarelyUsed = usedShare.map { $0 < model.rareShare } ?? false
    }

    /// The share of days the app was opened on, when enough days were seen
    /// to judge it rarely used (``Model/rareAfterDays``).
    public let usedShare: Double?

    /// Whether the app is rarely used (``Model/rareShare``).
    public let isRarelyUsed: Bool

    /// The chance of an open in the slot holding `seconds` (local), on a day of its kind.
    public func at(local seconds: Int) -> Double {
        let weekend = UsageHabit.isWeekend(UsageHabit.day(seconds))
        let own = weekend ? habit.weekend.mass : habit.weekday.mass
        let other = weekend ? habit.weekday.mass : habit.weekend.mass
        let slot = UsageHabit.slot(seconds)
        let count = UsageHabit.slotsPerDay
        var smoothed = 0.0
        for (offset, weight) in Self.kernel.enumerated() {
            let index = (slot + offset - 2 + count) % count
            smoothed += weight * (own[index] + UsageHabit.borrowWeight * other[index])
        }
        let spreadHere = (weekend ? base.weekend : base.weekday) * activity[(weekend ? count : 0) + slot]
        let chance = ((1 - spread) * smoothed + spreadHere) / (weekend ? days.weekend : days.weekday)
        return min(chance, 1)
    }

    /// The likeliest slot from `start` through `end` (local seconds): its chance and its start.
    public func peak(from start: Int, through end: Int) -> (chance: Double, at: Int) {
        var best = (chance: -1.0, at: UsageHabit.slotStart(start))
        var t = UsageHabit.slotStart(start)
        while t <= end {
            let chance = at(local: t)
            if chance > best.chance { best = (chance, t) }
            t += UsageHabit.slotMinutes * 60
        }
        return best
    }
}

extension UsageHabit {
    /// The chances of an open per slot, for planning, with the user's
    /// `activity` (``UsageActivity/shares()``; nil: any hour alike).
    public func openChances(_ model: OpenChances.Model = .init(), activity: [Double]? = nil) -> OpenChances {
        OpenChances(self, model: model,
                    activity: activity ?? [Double](repeating: 1 / Double(Self.slotsPerDay), count: 2 * Self.slotsPerDay))
    }

    /// The start of the slot holding `seconds` (local).
    public static func slotStart(_ seconds: Int) -> Int {
        let slot = slotMinutes * 60
        return seconds >= 0 ? seconds / slot * slot : (seconds - slot + 1) / slot * slot
    }
}
