public import BgTaskProtocol
// Storage format of an AppLearning, version 4, little-endian:
//
//   u8  version (4; 3 and 1 end before the days-used line; 2 is 3 with a
//       line "u8 has anchor, u64 anchor" at the end, the beat of a timer
//       earlier planners followed, read and dropped)
//   f64 habit decay
//   two histograms (weekdays, then weekends), each:
//       u16 slot count, then f64 mass per slot
//       f64 days   u8 has lastDay   i64 lastDay
//       u16 counted count, then u16 slot per counted slot (ascending)
//   f64 content found   f64 content hours   u8 has updatedAt   u64 updatedAt
//   u32 noData streak   u8 has upToDateAt   u64 upToDateAt
//   u8 has days used   f64 seen   f64 used   i64 day   u8 used that day
//
// What the planner learned is written after every fetch and read for every
// app at start-up; JSONDecoder took about 300 µs for the two 96-slot
// histograms, three quarters of a start-up with 1,000 apps. Learning written
// as JSON by an earlier build (first byte '{') still loads.

import Foundation

extension AppLearning {
    static let storageVersion: UInt8 = 4

    /// What was learned, in its storage format.
    public func storageBytes() -> [UInt8] {
        var bytes: [UInt8] = [Self.storageVersion]
        bytes.reserveCapacity(2 * UsageHabit.slotsPerDay * 8 + 128)
        bytes.append(double: habit.decay)
        for histogram in [habit.weekday, habit.weekend] {
            bytes.append(integer: UInt16(histogram.mass.count))
            for mass in histogram.mass { bytes.append(double: mass) }
            bytes.append(double: histogram.days)
            bytes.append(histogram.lastDay == nil ? 0 : 1)
            bytes.append(integer: Int64(histogram.lastDay ?? 0))
            let counted = histogram.counted.sorted().filter { (0..<Int(UInt16.max)).contains($0) }
            bytes.append(integer: UInt16(counted.count))
            for slot in counted { bytes.append(integer: UInt16(slot)) }
        }
        bytes.append(double: content.found)
        bytes.append(double: content.hours)
        bytes.append(content.updatedAt == nil ? 0 : 1)
        bytes.append(integer: content.updatedAt ?? 0)
        bytes.append(integer: UInt32(clamping: noDataStreak))
        bytes.append(upToDateAt == nil ? 0 : 1)
        bytes.append(integer: upToDateAt ?? 0)
        let used = habit.daysUsed
        bytes.append(used == nil ? 0 : 1)
        bytes.append(double: used?.seen ?? 0)
        bytes.append(double: used?.used ?? 0)
        bytes.append(integer: Int64(used?.day ?? 0))
        bytes.append(used?.usedThatDay == true ? 1 : 0)
        return bytes
    }

    /// Reads what was learned in its storage format (or the JSON of earlier builds).
    public init(storageBytes bytes: [UInt8]) throws(BgTaskError) {
        if bytes.first == UInt8(ascii: "{") {
            do {
                self = try JSONDecoder().decode(AppLearning.self, from: Data(bytes))
                return
            } catch {
                throw BgTaskError(.failed, "unreadable learning record: \(error)")
            }
        }
        var reader = ByteReader(bytes: bytes)
        let version = try reader.byte()
        guard (1...Self.storageVersion).contains(version) else {
            throw BgTaskError(.failed, "learning record of an unknown format version \(bytes.first ?? 0)")
        }
        var habit = UsageHabit(decay: Double(bitPattern: try reader.integer(UInt64.self)))
        for kind in 0..<2 {
            var histogram = UsageHabit.Histogram()
            let slots = Int(try reader.integer(UInt16.self))
            guard slots == UsageHabit.slotsPerDay else {
                throw BgTaskError(.failed, "learning record with \(slots) slots a day, not \(UsageHabit.slotsPerDay)")
            }
            for slot in 0..<slots { histogram.mass[slot] = Double(bitPattern: try reader.integer(UInt64.self)) }
            histogram.days = Double(bitPattern: try reader.integer(UInt64.self))
            let hasLastDay = try reader.byte() != 0
            let lastDay = Int(try reader.integer(Int64.self))
            // A day far from any clock would freeze what is learned (nothing after it is ever folded in).
            guard !hasLastDay || UsageHabit.plausibleDays.contains(lastDay) else {
                throw BgTaskError(.failed, "learning record with day \(lastDay), far from any clock")
            }
            histogram.lastDay = hasLastDay ? lastDay : nil
            let counted = Int(try reader.integer(UInt16.self))
            for _ in 0..<counted { histogram.counted.insert(Int(try reader.integer(UInt16.self))) }
            if kind == 0 { habit.weekday = histogram } else { habit.weekend = histogram }
        }
        var content = ContentRate()
        content.found = Double(bitPattern: try reader.integer(UInt64.self))
        content.hours = Double(bitPattern: try reader.integer(UInt64.self))
        let hasUpdatedAt = try reader.byte() != 0
        let updatedAt = try reader.integer(UInt64.self)
        content.updatedAt = hasUpdatedAt ? updatedAt : nil
        let streak = Int(try reader.integer(UInt32.self))
        let hasUpToDate = try reader.byte() != 0
        let upToDate = try reader.integer(UInt64.self)
        if version == 2 {
            _ = try reader.byte()
            _ = try reader.integer(UInt64.self)
        }
        if version >= 4 {
            let hasDaysUsed = try reader.byte() != 0
            let seen = Double(bitPattern: try reader.integer(UInt64.self))
            let used = Double(bitPattern: try reader.integer(UInt64.self))
            let day = Int(try reader.integer(Int64.self))
            let usedThatDay = try reader.byte() != 0
            if hasDaysUsed {
                // Stored by us, but a damaged record must hold counts a habit could
                // have reached (decayed, `seen` never passes 1 / (1 − decay)), and a
                // day some clock could show: else the share is wrong, or frozen, for years.
                let most = 1 / (1 - UsageHabit.usageDecay) + 1e-6
                guard seen.isFinite, used.isFinite, seen >= 0, used >= 0, seen <= most, used <= seen + 1e-6,
                      UsageHabit.plausibleDays.contains(day) else {
                    throw BgTaskError(.failed, "learning record with impossible days-used counts (\(used) of \(seen) days, day \(day))")
                }
                var counts = UsageHabit.DaysUsed(day: day)
                counts.seen = seen
                counts.used = used
                counts.usedThatDay = usedThatDay
                habit.daysUsed = counts
            }
        }
        self.init(habit: habit, content: content, noDataStreak: streak, upToDateAt: hasUpToDate ? upToDate : nil)
    }
}
