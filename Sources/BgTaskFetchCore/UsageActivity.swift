/// When the user uses any app: the sum of every app's ``UsageHabit``
/// counts, kept up to date by difference as each habit changes, and the
/// share of a day's opens that falls in each slot (weekdays and weekends
/// apart). Opens the planner cannot place in an app's own habit (an erratic
/// user, a rarely used app, a new one) are expected in these hours, not at
/// 3 a.m.
public struct UsageActivity: Sendable {
    /// Summed counts: weekday slots, then weekend slots.
    private var mass = [Double](repeating: 0, count: 2 * UsageHabit.slotsPerDay)
    private var cached: [Double]?

    /// Of a slot's share, this part is spread evenly over the day (nobody's hours are certain).
    static let floorShare = 0.1

    public init() {}

    /// An app's habit changed from `old` to `new` (nil: no such app).
    public mutating func replace(_ old: UsageHabit?, with new: UsageHabit?) {
        let count = UsageHabit.slotsPerDay
        if let old {
            for i in 0..<count {
                mass[i] -= old.weekday.mass[i]
                mass[count + i] -= old.weekend.mass[i]
            }
        }
        if let new {
            for i in 0..<count {
                mass[i] += new.weekday.mass[i]
                mass[count + i] += new.weekend.mass[i]
            }
        }
        cached = nil
    }

    /// Per slot (weekdays, then weekends) the share of a day's opens in it:
    /// each kind sums to 1. Even before any open is seen.
    public mutating func shares() -> [Double] {
        if let cached { return cached }
        let count = UsageHabit.slotsPerDay
        var shares = [Double](repeating: 0, count: 2 * count)
        for kind in 0..<2 {
            var smoothed = [Double](repeating: 0, count: count)
            for slot in 0..<count {
                for (offset, weight) in OpenChances.kernel.enumerated() {
                    // Sums by difference can leave −0.000…1 where there is nothing.
                    smoothed[slot] += weight * max(0, mass[kind * count + (slot + offset - 2 + count) % count])
                }
            }
            let total = smoothed.reduce(0, +)
            for slot in 0..<count {
                let learned = total > 0 ? smoothed[slot] / total : 1 / Double(count)
                shares[kind * count + slot] = (1 - Self.floorShare) * learned + Self.floorShare / Double(count)
            }
        }
        cached = shares
        return shares
    }
}
