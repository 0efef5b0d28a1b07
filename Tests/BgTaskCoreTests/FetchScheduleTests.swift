import BgTaskCore
import Testing

/// The fetch schedule until the adaptive policy: intervals, floor, offences,
/// coalescing. Times are realtime µs; no clock is read.
@Suite struct FetchScheduleTests {
    let t0: UInt64 = 1_700_000_000_000_000
    static func seconds(_ s: Double) -> UInt64 { UInt64(s * 1_000_000) }

    func record(_ interval: FetchInterval, at: UInt64) -> FetchRecord {
        FetchRecord(interval: interval, registeredAt: at)
    }

    @Test func intervalsAreFlooredAndNeverIsNeverScheduled() {
        var schedule = FetchSchedule(floor: 900)
        schedule.set("minimum", record(.minimum, at: t0))
        schedule.set("short", record(.custom(60), at: t0))
        schedule.set("long", record(.custom(3600), at: t0))
        schedule.set("never", record(.never, at: t0))
        #expect(schedule.nextFetch(of: "minimum") == t0 + Self.seconds(900))
        #expect(schedule.nextFetch(of: "short") == t0 + Self.seconds(900))
        #expect(schedule.nextFetch(of: "long") == t0 + Self.seconds(3600))
        #expect(schedule.nextFetch(of: "never") == nil)
        #expect(schedule.nextWake() == t0 + Self.seconds(900))
    }

    @Test func nextFetchCountsFromTheLastFetch() {
        var schedule = FetchSchedule(floor: 900)
        var r = record(.custom(1800), at: t0)
        r.lastFetchAt = t0 + Self.seconds(5000)
        schedule.set("app", r)
        #expect(schedule.nextFetch(of: "app") == t0 + Self.seconds(6800))
    }

    @Test func offencesDoubleTheIntervalUpToEightTimesAndCompletionsRedeemThem() {
        var r = record(.custom(1000), at: t0)
        let schedule = FetchSchedule(floor: 900)
        #expect(schedule.effectiveInterval(of: r) == 1000)
        for expected in [2000.0, 4000, 8000, 8000] {
            r.record(.init(at: t0, result: nil))
            #expect(schedule.effectiveInterval(of: r) == expected)
        }
        #expect(r.offences == 4)
        r.record(.init(at: t0, result: .noData))
        #expect(r.offences == 3)
        #expect(r.lastResult == .noData)
    }

    @Test func appsDueWithinAMinuteAreWokenTogether() {
        var schedule = FetchSchedule(floor: 900)
        schedule.set("a", record(.custom(900), at: t0))
        schedule.set("b", record(.custom(900), at: t0 + Self.seconds(30)))   // due 30 s after a
        schedule.set("c", record(.custom(900), at: t0 + Self.seconds(59)))   // 59 s after a
        schedule.set("d", record(.custom(900), at: t0 + Self.seconds(61)))   // 61 s after a: a wake of its own
        let due = t0 + Self.seconds(900)
        #expect(schedule.takeDue(at: due - 1) == [])
        #expect(schedule.takeDue(at: due) == ["a", "b", "c"])
        #expect(schedule.nextWake() == due + Self.seconds(61))
        #expect(schedule.takeDue(at: due + Self.seconds(61)) == ["d"])
        #expect(schedule.nextWake() == nil, "taken apps wait until they are set again after their wake")
    }

    @Test func heldAppsLeaveTheScheduleUntilReleased() {
        var schedule = FetchSchedule(floor: 900)
        schedule.set("a", record(.minimum, at: t0))
        schedule.hold("a")
        #expect(schedule.isHeld("a"))
        #expect(schedule.nextWake() == nil)
        #expect(schedule.takeDue(at: t0 + Self.seconds(10_000)) == [])
        schedule.release("a")
        #expect(schedule.nextWake() == t0 + Self.seconds(900))
    }

    @Test func historyIsBounded() {
        var r = record(.minimum, at: t0)
        for i in 0..<(FetchRecord.historyLimit + 10) { r.record(.init(at: t0 + UInt64(i), result: .newData)) }
        #expect(r.history.count == FetchRecord.historyLimit)
        #expect(r.history.first?.at == t0 + 10)
    }

    @Test(arguments: [(-1.0, "negative"), (Double.nan, "NaN")])
    func badIntervalsAreInvalidArgs(_ seconds: Double, _ reason: String) {
        let error = #expect(throws: CoreError.self) { try FetchInterval(seconds: seconds) }
        #expect(error?.code == .invalidArgs)
        #expect(error?.message.contains(reason) == true)
    }

    @Test func intervalSpellings() throws {
        #expect(try FetchInterval(seconds: 0) == .minimum)
        #expect(try FetchInterval(seconds: .infinity) == .never)
        #expect(try FetchInterval(seconds: 1e300) == .never)
        #expect(try FetchInterval(seconds: 1e299) == .custom(1e299))
        #expect(try FetchResult(parsing: "newData") == .newData)
        #expect(throws: CoreError.self) { try FetchResult(parsing: "NewData") }
    }
}

@Suite struct FetchRecordStorageTests {
    @Test(arguments: [FetchInterval.never, .minimum, .custom(1234.5)])
    func roundTrip(_ interval: FetchInterval) throws {
        var record = FetchRecord(interval: interval, registeredAt: 1_700_000_000_000_001)
        record.lastFetchAt = 1_700_000_123_000_000
        for (i, result) in [FetchResult.newData, nil, .noData, .failed].enumerated() {
            record.record(.init(at: 1_700_000_000_000_000 + UInt64(i), result: result))
        }
        #expect(try FetchRecord(storageBytes: record.storageBytes()) == record)
        var fresh = FetchRecord(interval: interval, registeredAt: 7)
        fresh.lastFetchAt = nil
        #expect(try FetchRecord(storageBytes: fresh.storageBytes()) == fresh)
    }

    @Test func recordsWrittenAsJSONByEarlierBuildsStillLoad() throws {
        let record = FetchRecord(interval: .custom(900), registeredAt: 42)
        let json = Array(try JSONEncoder().encode(record))
        #expect(try FetchRecord(storageBytes: json) == record)
    }

    @Test func truncatedOrUnknownRecordsAreErrorsNotTraps() {
        let bytes = FetchRecord(interval: .minimum, registeredAt: 1).storageBytes()
        for length in 0..<bytes.count {
            #expect(throws: CoreError.self) { try FetchRecord(storageBytes: Array(bytes.prefix(length))) }
        }
        #expect(throws: CoreError.self) { try FetchRecord(storageBytes: [9] + bytes.dropFirst()) }
    }

    @Test func fullHistoryIsCompact() {
        var record = FetchRecord(interval: .minimum, registeredAt: 1)
        for i in 0..<FetchRecord.historyLimit { record.record(.init(at: UInt64(i), result: .newData)) }
        #expect(record.storageBytes().count == 33 + 9 * FetchRecord.historyLimit)
    }
}

import Foundation
