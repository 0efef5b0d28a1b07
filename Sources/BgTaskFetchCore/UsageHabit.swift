import BgTaskProtocol
import Foundation

/// When a user opens one app, learned from its opens: per slot of the day,
/// the chance the app is opened in it on a given day. Weekdays and weekends
/// are learned apart. Old days weigh less each day (``decay`` per day of
/// their kind), so a changed habit takes over within days.
public struct UsageHabit: Sendable, Equatable, Codable {
    /// Minutes per slot.
    public static let slotMinutes = 15
    public static let slotsPerDay = 24 * 60 / slotMinutes

    /// Weight a day keeps per later day of its kind (a half-life of 1.5 days).
    public var decay: Double

    /// One histogram: decayed counts of days with an open per slot.
    struct Histogram: Sendable, Equatable, Codable {
        var mass = [Double](repeating: 0, count: UsageHabit.slotsPerDay)
        /// Decayed count of days observed.
        var days: Double = 0
        /// The last day (index since the epoch) folded in.
        var lastDay: Int?
        /// Slots already counted for `lastDay`.
        var counted = Set<Int>()
    }

    var weekday = Histogram()
    var weekend = Histogram()

    /// On how many of the days seen the app was opened at all, remembered
    /// longer than the histograms (``usageDecay``): whether it is rarely
    /// used is a slower question than when in the day it is used. Nil until
    /// the first day is seen (and in what earlier builds stored).
    struct DaysUsed: Sendable, Equatable, Codable {
        /// Decayed count of days seen, the current one included.
        var seen: Double = 0
        /// Decayed count of those days with an open.
        var used: Double = 0
        /// The day (index since the epoch, local) the counts are up to.
        var day: Int
        /// Whether that day had an open (counted in `used` already).
        var usedThatDay = false

        init(day: Int) { self.day = day }
    }
    var daysUsed: DaysUsed?

    /// Weight a day keeps per later day in ``DaysUsed`` (a half-life of about a week).
    public static let usageDecay = 0.9

    public init(decay: Double = 0.63) {
        self.decay = decay
    }

    /// The share of the days seen on which the app was opened, and the
    /// (decayed) number of days that share rests on; nil before any day.
    public var usedShare: (share: Double, days: Double)? {
        guard let daysUsed, daysUsed.seen > 0 else { return nil }
        return (min(daysUsed.used / daysUsed.seen, 1), daysUsed.seen)
    }

    /// The last day (days since the epoch, local) the habit was brought up to.
    public var lastDay: Int? { [weekday.lastDay, weekend.lastDay].compactMap { $0 }.max() }

    /// Days observed (decayed), weekdays and weekends together.
    public var observedDays: Double { weekday.days + weekend.days }

    /// Whether enough is known to predict (a few days with opens).
    public var hasLearned: Bool {
        weekday.mass.reduce(0, +) + weekend.mass.reduce(0, +) >= 2 && observedDays >= 2
    }

    /// Brings the histograms up to `day` (days since the epoch, local), counting days without opens too.
    public mutating func advance(to day: Int) {
        Self.advance(&weekday, to: day, decay: decay, counts: { !Self.isWeekend($0) })
        Self.advance(&weekend, to: day, decay: decay, counts: { Self.isWeekend($0) })
        advanceDaysUsed(to: day)
    }

    private mutating func advanceDaysUsed(to day: Int) {
        guard var counts = daysUsed else {
            var first = DaysUsed(day: day)
            first.seen = 1
            daysUsed = first
            return
        }
        guard day > counts.day else { return }
        let factor = pow(Self.usageDecay, Double(Self.daysBetween(counts.day, day)))
        counts.seen = counts.seen * factor + (1 - factor) / (1 - Self.usageDecay)
        counts.used *= factor
        counts.day = day
        counts.usedThatDay = false
        daysUsed = counts
    }

    /// Takes back days after `day`: a clock that was ahead and was set back
    /// left them, and an open is counted only on a later day than the last
    /// one seen, so nothing would be learned until the clock caught up. What
    /// was learned is kept; the later day's slots stop counting as counted.
    public mutating func rewind(to day: Int) {
        for kind in [\UsageHabit.weekday, \UsageHabit.weekend] where self[keyPath: kind].lastDay.map({ $0 > day }) == true {
            self[keyPath: kind].lastDay = day
            self[keyPath: kind].counted.removeAll()
        }
        if let counts = daysUsed, counts.day > day { daysUsed?.day = day }
    }

    /// Counts the first open of the current day in ``DaysUsed``.
    private mutating func countDayUsed() {
        guard var counts = daysUsed, !counts.usedThatDay else { return }
        counts.used += 1
        counts.usedThatDay = true
        daysUsed = counts
    }

    private static func advance(_ h: inout Histogram, to day: Int, decay: Double, counts: (Int) -> Bool) {
        guard let last = h.lastDay else {
            if counts(day) { h.days = 1 }
            h.lastDay = day
            return
        }
        guard day > last else { return }
        // Fold the days in between: each of this histogram's kind decays what is there and adds a day.
        // (A day from a damaged record can be anywhere: the gap saturates; beyond a year it is all the same.)
        let gap = Self.daysBetween(last, day)
        var steps = 0
        for d in (day - min(gap, 60) + 1)...day where counts(d) { steps += 1 }
        if gap > 60 { steps += (gap - 60) * (counts(day) ? 5 : 2) / 7 }
        if steps > 0 {
            let factor = pow(decay, Double(steps))
            for i in h.mass.indices { h.mass[i] *= factor }
            h.days = h.days * factor + (1 - factor) / (1 - decay)
            h.counted.removeAll()
        }
        h.lastDay = day
    }

    /// Records an open at a local time (seconds since the epoch, local).
    public mutating func recordOpen(atLocal seconds: Int) {
        let day = Self.day(seconds)
        advance(to: day)
        countDayUsed()
        let slot = Self.slot(seconds)
        if Self.isWeekend(day) {
            if weekend.counted.insert(slot).inserted { weekend.mass[slot] += 1 }
        } else if weekday.counted.insert(slot).inserted {
            weekday.mass[slot] += 1
        }
    }

    /// The chance of an open in the slot holding `seconds` (local), on a day of that kind.
    /// A kind of day seen little borrows from the other kind (weighing
    /// ``borrowWeight`` per day), so a first weekend is not planned as if
    /// the app were never used then.
    public func probability(atLocal seconds: Int) -> Double {
        let day = Self.day(seconds)
        let own = Self.isWeekend(day) ? weekend : weekday
        let other = Self.isWeekend(day) ? weekday : weekend
        let slot = Self.slot(seconds)
        let days = own.days + Self.borrowWeight * other.days
        guard days > 0 else { return 0 }
        return min(1, (own.mass[slot] + Self.borrowWeight * other.mass[slot]) / days)
    }

    /// Days of the kind of `seconds`'s day (weekday or weekend) observed, decayed.
    public func observedDays(likeLocal seconds: Int) -> Double {
        Self.isWeekend(Self.day(seconds)) ? weekend.days : weekday.days
    }

    /// Days from `earlier` to `later` (> `earlier`), at most 366: beyond a
    /// year whatever came before weighs nothing anyway, and a day read from
    /// a damaged record cannot overflow the subtraction.
    static func daysBetween(_ earlier: Int, _ later: Int) -> Int {
        let (gap, overflow) = later.subtractingReportingOverflow(earlier)
        return overflow ? 366 : min(gap, 366)
    }

    /// Days (since the epoch, local) a stored record may name: about 27,000
    /// years either side of 1970. Beyond, the record is damaged.
    public static let plausibleDays = -10_000_000...10_000_000

    /// How much a day of the other kind counts.
    public static let borrowWeight = 0.3

    // Calendar arithmetic on local seconds since the epoch; 1970-01-01 was a Thursday.
    public static func day(_ seconds: Int) -> Int { seconds >= 0 ? seconds / 86_400 : (seconds - 86_399) / 86_400 }
    public static func slot(_ seconds: Int) -> Int { ((seconds % 86_400 + 86_400) % 86_400) / (slotMinutes * 60) }
    /// Monday is 0.
    public static func weekday(_ day: Int) -> Int { ((day + 3) % 7 + 7) % 7 }
    public static func isWeekend(_ day: Int) -> Bool { weekday(day) >= 5 }
}
