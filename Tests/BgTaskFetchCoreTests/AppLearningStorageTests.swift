import BgTaskProtocol
@testable import BgTaskFetchCore
import BgTaskCore
import Foundation
import Testing

/// What the planner learned about an app, as the fetch mode stores it.
@Suite struct AppLearningStorageTests {
    static func sample() -> AppLearning {
        var habit = UsageHabit()
        // A few days of opens at 08:00 and 19:30 local, weekdays and a weekend.
        for day in 0..<9 {
            habit.recordOpen(atLocal: day * 86_400 + 8 * 3600)
            habit.recordOpen(atLocal: day * 86_400 + 19 * 3600 + 1800)
        }
        var content = ContentRate()
        content.record(gap: 3600, newData: true, at: 1_700_000_000_000_000)
        content.record(gap: 900, newData: false, at: 1_700_000_900_000_000)
        return AppLearning(habit: habit, content: content, noDataStreak: 3, upToDateAt: 1_700_000_123_456_789)
    }

    @Test func roundTripsExactly() throws {
        let learned = Self.sample()
        #expect(learned.habit.hasLearned, "the sample has habits to lose")
        #expect(try AppLearning(storageBytes: learned.storageBytes()) == learned)
        let bare = AppLearning(habit: UsageHabit(), content: ContentRate(), noDataStreak: 0, upToDateAt: nil)
        #expect(try AppLearning(storageBytes: bare.storageBytes()) == bare)
    }

    @Test func earlierVersionsStillLoad() throws {
        // Versions 1 and 3 end before the days-used line of 4 (26 bytes); 2
        // added the beat of a timer (9 bytes at the end), now dropped.
        var sample = Self.sample()
        #expect(sample.habit.usedShare != nil, "the sample has a share of days to lose")
        sample.habit.daysUsed = nil
        let v3 = Array(Self.sample().storageBytes().dropLast(26))
        var v1 = v3
        v1[0] = 1
        for (version, bytes) in [(1, v1), (3, { var b = v3; b[0] = 3; return b }())] {
            #expect(try AppLearning(storageBytes: bytes) == sample, "version \(version)")
        }
        var v2 = v3 + [1, 1, 0, 0, 0, 0, 0, 0, 0]
        v2[0] = 2
        #expect(try AppLearning(storageBytes: v2) == sample)
        var truncated = v2.dropLast(1).map { $0 }
        truncated[0] = 2
        #expect(throws: BgTaskError.self) { try AppLearning(storageBytes: truncated) }
    }

    @Test func learningWrittenAsJSONByEarlierBuildsStillLoads() throws {
        let learned = Self.sample()
        #expect(try AppLearning(storageBytes: Array(JSONEncoder().encode(learned))) == learned)
    }

    @Test func damagedRecordsAreErrorsNotTraps() {
        let bytes = Self.sample().storageBytes()
        for length in [0, 1, 9, bytes.count / 2, bytes.count - 1] {
            #expect(throws: BgTaskError.self) { try AppLearning(storageBytes: Array(bytes.prefix(length))) }
        }
        var otherVersion = bytes
        otherVersion[0] = 9
        #expect(throws: BgTaskError.self) { try AppLearning(storageBytes: otherVersion) }
        // Days used that no habit could have counted (more used than seen, NaN) are refused.
        let seenAt = bytes.count - 25
        for (seen, used) in [(2.0, 5.0), (Double.nan, 1.0), (-1.0, 0.0), (1e300, 0.0), (11.0, 1.0)] {
            var damaged = bytes
            damaged.replaceSubrange(seenAt..<seenAt + 8, with: withUnsafeBytes(of: seen.bitPattern.littleEndian, Array.init))
            damaged.replaceSubrange(seenAt + 8..<seenAt + 16, with: withUnsafeBytes(of: used.bitPattern.littleEndian, Array.init))
            #expect(throws: BgTaskError.self, "\(used) of \(seen) days") { try AppLearning(storageBytes: damaged) }
        }
        // A day no clock shows, in the days-used line or a histogram, would freeze what is learned.
        for at in [bytes.count - 9, 1 + 8 + 2 + 96 * 8 + 8 + 1] {
            for day in [Int64.max, Int64.min, 10_000_001] {
                var damaged = bytes
                damaged.replaceSubrange(at..<at + 8, with: withUnsafeBytes(of: day.littleEndian, Array.init))
                #expect(throws: BgTaskError.self, "day \(day) at byte \(at)") { try AppLearning(storageBytes: damaged) }
            }
        }
    }
}
