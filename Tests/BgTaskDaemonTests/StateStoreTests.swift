@testable import BgTaskDaemon
import Foundation
import GRDB
import Logging
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// The state database: round trips, durability across close and crash, and
/// the refusals at start-up (docs/DESIGN.md §2, the state directory).
@Suite struct StateStoreTests {
    static let logger = Logger(label: "bgtaskd-test") { _ in SwiftLogNoOpLogHandler() }

    let directory: TemporaryDirectory
    var databasePath: String { directory.root + "/" + StateStore.fileName }

    init() throws { directory = try TemporaryDirectory() }

    func open(_ root: String? = nil) throws -> StateStore {
        try StateStore(directory: root ?? directory.root, logger: Self.logger)
    }

    /// The error that opening `root` must fail with.
    func refusal(_ root: String? = nil) -> StoreError? {
        #expect(throws: StoreError.self) { _ = try StateStore(directory: root ?? directory.root, logger: Self.logger) }
    }

    static func bytes(_ text: String) -> [UInt8] { Array(text.utf8) }

    // MARK: Background App Refresh

    @Test func refreshSettingsStartAllOnAndRoundTrip() throws {
        let store = try open()
        #expect(try store.refreshSettings() == RefreshSettings())

        try store.setRefreshEnabled(appID: "", enabled: false)
        try store.setRefreshEnabled(appID: "org.example.News", enabled: false)
        try store.setRefreshEnabled(appID: "org.example.Mail", enabled: false)
        try store.setRefreshEnabled(appID: "org.example.Mail", enabled: true)
        let expected = RefreshSettings(
            globalEnabled: false, perApp: ["org.example.News": false, "org.example.Mail": true])
        #expect(try store.refreshSettings() == expected)
        #expect(!expected.isEnabled(appID: "org.example.Mail"))

        try store.setRefreshEnabled(appID: "", enabled: true)
        let settings = try store.refreshSettings()
        #expect(settings.globalEnabled)
        #expect(settings.isEnabled(appID: "org.example.Mail"))
        #expect(!settings.isEnabled(appID: "org.example.News"))
        #expect(settings.isEnabled(appID: "org.example.NeverSet"))
    }

    @Test func refreshSettingsSurviveReopening() throws {
        let store = try open()
        try store.setRefreshEnabled(appID: "", enabled: false)
        try store.setRefreshEnabled(appID: "org.example.News", enabled: false)
        store.close()

        let reopened = try open()
        #expect(try reopened.refreshSettings() == RefreshSettings(globalEnabled: false, perApp: ["org.example.News": false]))
    }

    // MARK: Usage history

    @Test func usageIntervalsOpenAndClose() throws {
        let store = try open()
        let app = "org.example.News"
        try store.beginUsage(appID: app, at: 100)
        try store.beginUsage(appID: app, at: 150)  // already open: no-op
        #expect(try store.usage(appID: app, since: 0) == [UsageInterval(start: 100, end: nil)])

        try store.endUsage(appID: app, at: 200)
        try store.endUsage(appID: app, at: 300)  // nothing open: no-op
        #expect(try store.usage(appID: app, since: 0) == [UsageInterval(start: 100, end: 200)])

        try store.beginUsage(appID: app, at: 400)
        try store.beginUsage(appID: "org.example.Mail", at: 410)
        try store.endUsage(appID: app, at: 390)  // realtime clock set back: closed empty, never negative
        #expect(try store.usage(appID: app, since: 0) == [
            UsageInterval(start: 100, end: 200), UsageInterval(start: 400, end: 400),
        ])
        #expect(try store.usage(appID: "org.example.Mail", since: 0) == [UsageInterval(start: 410, end: nil)])
        #expect(try store.usage(appID: "org.example.Unknown", since: 0).isEmpty)
    }

    /// A row per switch to the foreground let an app in a loop add hundreds
    /// of kilobytes a second: back within the gap, its last interval goes on.
    @Test func usageBackWithinTheGapContinuesTheLastInterval() throws {
        let store = try open()
        let app = "org.example.News"
        for index in 0..<1_000 as Range<UInt64> {
            try store.beginUsage(appID: app, at: 1_000 + index * 10, mergingWithin: 60)
            try store.endUsage(appID: app, at: 1_005 + index * 10)
        }
        #expect(try store.usage(appID: app, since: 0) == [UsageInterval(start: 1_000, end: 10_995)])
        // Past the gap: a new interval.
        try store.beginUsage(appID: app, at: 11_100, mergingWithin: 60)
        #expect(try store.usage(appID: app, since: 0) == [UsageInterval(start: 1_000, end: 10_995), UsageInterval(start: 11_100, end: nil)])
        // Already open: nothing.
        try store.beginUsage(appID: app, at: 11_120, mergingWithin: 60)
        #expect(try store.usage(appID: app, since: 0).count == 2)
    }

    @Test func usageSinceKeepsIntervalsThatReachIt() throws {
        let store = try open()
        let app = "org.example.News"
        for (start, end) in [(100, 200), (300, 400), (500, 600)] as [(UInt64, UInt64)] {
            try store.beginUsage(appID: app, at: start)
            try store.endUsage(appID: app, at: end)
        }
        try store.beginUsage(appID: app, at: 700)
        #expect(try store.usage(appID: app, since: 350) == [
            UsageInterval(start: 300, end: 400), UsageInterval(start: 500, end: 600), UsageInterval(start: 700, end: nil),
        ])
        #expect(try store.usage(appID: app, since: 601) == [UsageInterval(start: 700, end: nil)])
    }

    @Test func closeOpenUsageClosesEveryAppAndSurvivesReopening() throws {
        let store = try open()
        try store.beginUsage(appID: "org.example.A", at: 1_000)
        try store.beginUsage(appID: "org.example.B", at: 2_000)
        try store.beginUsage(appID: "org.example.C", at: 3_000)
        try store.endUsage(appID: "org.example.C", at: 3_500)
        store.close()

        // As after a crash: the intervals are still open in the database.
        let reopened = try open()
        #expect(try reopened.usage(appID: "org.example.A", since: 0) == [UsageInterval(start: 1_000, end: nil)])
        try reopened.closeOpenUsage(at: 5_000)
        #expect(try reopened.usage(appID: "org.example.A", since: 0) == [UsageInterval(start: 1_000, end: 5_000)])
        #expect(try reopened.usage(appID: "org.example.B", since: 0) == [UsageInterval(start: 2_000, end: 5_000)])
        #expect(try reopened.usage(appID: "org.example.C", since: 0) == [UsageInterval(start: 3_000, end: 3_500)])
        // A new interval can be opened after closing.
        try reopened.beginUsage(appID: "org.example.A", at: 6_000)
        #expect(try reopened.usage(appID: "org.example.A", since: 0).count == 2)
    }

    @Test func pruneDropsOnlyIntervalsThatEndedBefore() throws {
        let store = try open()
        let app = "org.example.News"
        try store.beginUsage(appID: app, at: 100)
        try store.endUsage(appID: app, at: 200)
        try store.beginUsage(appID: app, at: 250)
        try store.endUsage(appID: app, at: 350)
        try store.beginUsage(appID: "org.example.Old", at: 50)  // open since long ago: kept
        try store.pruneUsage(before: 300)
        #expect(try store.usage(appID: app, since: 0) == [UsageInterval(start: 250, end: 350)])
        #expect(try store.usage(appID: "org.example.Old", since: 0) == [UsageInterval(start: 50, end: nil)])
    }

    @Test func timestampsBeyondInt64AreRefusedNotTruncated() throws {
        let store = try open()
        let error = try #require(#expect(throws: StoreError.self) {
            try store.beginUsage(appID: "org.example.News", at: UInt64(Int64.max) + 1)
        })
        #expect(error.code == .invalidArgument)
        #expect(try store.usage(appID: "org.example.News", since: 0).isEmpty)
        try store.beginUsage(appID: "org.example.News", at: UInt64(Int64.max))
        #expect(try store.usage(appID: "org.example.News", since: 0) == [UsageInterval(start: UInt64(Int64.max), end: nil)])
    }

    // MARK: Plugin records

    @Test func recordsRoundTripByKeyPerCollection() throws {
        let store = try open()
        try store.putRecord(plugin: "fetch", collection: "registrations", key: "org.example.Mail", data: Self.bytes("mail"))
        try store.putRecord(plugin: "fetch", collection: "registrations", key: "org.example.Archive", data: Self.bytes("arc"))
        try store.putRecord(plugin: "fetch", collection: "registrations", key: "org.example.News", data: [0, 255, 0, 1])
        try store.putRecord(plugin: "fetch", collection: "results", key: "org.example.Mail", data: [])
        try store.putRecord(plugin: "location", collection: "registrations", key: "org.example.Mail", data: Self.bytes("loc"))
        try store.putRecord(plugin: "fetch", collection: "registrations", key: "org.example.Mail", data: Self.bytes("mail v2"))

        let registrations = try store.records(plugin: "fetch", collection: "registrations")
        #expect(registrations.map(\.key) == ["org.example.Archive", "org.example.Mail", "org.example.News"])
        #expect(registrations.map(\.data) == [Self.bytes("arc"), Self.bytes("mail v2"), [0, 255, 0, 1]])
        let results = try store.records(plugin: "fetch", collection: "results")
        #expect(results.map(\.key) == ["org.example.Mail"])
        #expect(results.first?.data == [])
        #expect(try store.records(plugin: "location", collection: "registrations").map(\.data) == [Self.bytes("loc")])
        #expect(try store.records(plugin: "fetch", collection: "offences").isEmpty)

        #expect(try store.deleteRecord(plugin: "fetch", collection: "registrations", key: "org.example.Mail"))
        #expect(try !store.deleteRecord(plugin: "fetch", collection: "registrations", key: "org.example.Mail"))
        #expect(try store.records(plugin: "fetch", collection: "registrations").map(\.key)
            == ["org.example.Archive", "org.example.News"])
        // Same key elsewhere is untouched.
        #expect(try store.records(plugin: "location", collection: "registrations").count == 1)
    }

    @Test func recordsSurviveReopening() throws {
        let store = try open()
        let payload = (0..<5_000).map { UInt8(truncatingIfNeeded: $0 &* 31) }
        try store.putRecord(plugin: "remote-notification", collection: "pending", key: "push-1", data: payload)
        try store.putRecord(plugin: "fetch", collection: "offences", key: "org.example.Slow", data: [3])
        try store.putRecord(plugin: "fetch", collection: "offences", key: "org.example.Gone", data: [1])
        try store.deleteRecord(plugin: "fetch", collection: "offences", key: "org.example.Gone")
        store.close()

        let reopened = try open()
        #expect(try reopened.records(plugin: "remote-notification", collection: "pending").first?.data == payload)
        #expect(try reopened.records(plugin: "fetch", collection: "offences").map(\.key) == ["org.example.Slow"])
    }

    @Test func aClosedStoreSaysSo() throws {
        let store = try open()
        store.close()
        let error = try #require(#expect(throws: StoreError.self) {
            try store.putRecord(plugin: "fetch", collection: "c", key: "k", data: [1])
        })
        #expect(error.code == .closed)
        #expect(error.description.contains(databasePath))
    }

    // MARK: Transactions

    @Test func aTransactionCommitsTogether() throws {
        let store = try open()
        try store.transaction {
            for index in 0..<10 {
                try store.putRecord(plugin: "fetch", collection: "results", key: "k\(index)", data: [UInt8(index)])
            }
            try store.setRefreshEnabled(appID: "org.example.News", enabled: false)
        }
        store.close()
        let reopened = try open()
        #expect(try reopened.records(plugin: "fetch", collection: "results").count == 10)
        #expect(try reopened.refreshSettings().perApp == ["org.example.News": false])
    }

    struct Interrupted: Error {}

    @Test func aFailingTransactionLeavesNothing() throws {
        let store = try open()
        try store.putRecord(plugin: "fetch", collection: "results", key: "before", data: [1])
        let error = try #require(#expect(throws: StoreError.self) {
            try store.transaction {
                try store.putRecord(plugin: "fetch", collection: "results", key: "inside", data: [2])
                try store.deleteRecord(plugin: "fetch", collection: "results", key: "before")
                throw Interrupted()
            }
        })
        #expect(error.code == .transactionAborted)
        #expect(error.underlying is Interrupted)
        #expect(try store.records(plugin: "fetch", collection: "results").map(\.key) == ["before"])

        // A StoreError thrown inside comes out as it is.
        let inner = try #require(#expect(throws: StoreError.self) {
            try store.transaction {
                try store.putRecord(plugin: "fetch", collection: "results", key: "inside", data: [2])
                try store.beginUsage(appID: "org.example.News", at: .max)
            }
        })
        #expect(inner.code == .invalidArgument)
        #expect(try store.records(plugin: "fetch", collection: "results").map(\.key) == ["before"])
    }

    @Test func aNestedFailureRollsBackOnlyItself() throws {
        let store = try open()
        try store.transaction {
            try store.putRecord(plugin: "fetch", collection: "results", key: "outer", data: [1])
            #expect(throws: StoreError.self) {
                try store.transaction {
                    try store.putRecord(plugin: "fetch", collection: "results", key: "inner", data: [2])
                    throw Interrupted()
                }
            }
        }
        #expect(try store.records(plugin: "fetch", collection: "results").map(\.key) == ["outer"])
    }

    @Test func aGroupCommitsOnceAtItsEnd() throws {
        // Shared, so that a second connection can look while the group runs.
        let store = try StateStore(directory: directory.root, logger: Self.logger, exclusive: false)
        let observer = try StateStore(directory: directory.root, logger: Self.logger, exclusive: false)
        try store.group {
            try? store.putRecord(plugin: "remote-notification", collection: "pushes", key: "p1", data: [1])
            try? store.putRecord(plugin: "remote-notification", collection: "apps", key: "org.example.News", data: [2])
            // Visible to the group itself, not yet to another connection: nothing is committed.
            #expect((try? store.records(plugin: "remote-notification", collection: "pushes").map(\.key)) == ["p1"])
            #expect((try? observer.records(plugin: "remote-notification", collection: "pushes").count) == 0)
        }
        #expect(try observer.records(plugin: "remote-notification", collection: "pushes").map(\.key) == ["p1"])
        #expect(try observer.records(plugin: "remote-notification", collection: "apps").map(\.key) == ["org.example.News"])
    }

    @Test func aFailedTransactionInsideAGroupRollsBackOnlyItself() throws {
        let store = try open()
        try store.group {
            try? store.putRecord(plugin: "fetch", collection: "results", key: "kept", data: [1])
            #expect(throws: StoreError.self) {
                try store.transaction {
                    try store.putRecord(plugin: "fetch", collection: "results", key: "undone", data: [2])
                    throw Interrupted()
                }
            }
            try? store.putRecord(plugin: "fetch", collection: "results", key: "after", data: [3])
        }
        store.close()
        #expect(try open().records(plugin: "fetch", collection: "results").map(\.key) == ["after", "kept"])
    }

    @Test func aGroupWithoutWritesLeavesTheDatabaseFreeForOthers() throws {
        let store = try StateStore(directory: directory.root, logger: Self.logger, exclusive: false)
        let other = try StateStore(directory: directory.root, logger: Self.logger, exclusive: false)
        try store.group {
            _ = try? store.records(plugin: "fetch", collection: "results")
            // Had the group begun a write transaction, this would wait for the busy timeout and fail.
            #expect(throws: Never.self) { try other.putRecord(plugin: "fetch", collection: "results", key: "k", data: [1]) }
        }
        #expect(try store.records(plugin: "fetch", collection: "results").map(\.key) == ["k"])
    }

    @Test func anExclusiveStoreRefusesASecondOpenerUntilItCloses() throws {
        let store = try open()
        try store.putRecord(plugin: "fetch", collection: "results", key: "k", data: [1])
        let error = try #require(self.refusal())
        #expect(error.code == .busy)
        #expect(error.message.contains("Is another bgtaskd using the same state directory?"), "\(error.message)")
        #expect(!FileManager.default.fileExists(atPath: databasePath + "-shm"), "the WAL index is in memory")
        store.close()
        #expect(try open().records(plugin: "fetch", collection: "results").map(\.key) == ["k"])
    }

    // MARK: Files

    @Test func createsAPrivateDirectoryAndDatabase() throws {
        let nested = directory.root + "/state/bgtaskd/"
        let store = try open(nested)
        #expect(store.path == directory.root + "/state/bgtaskd/" + StateStore.fileName)
        var info = stat()
        #expect(stat(directory.root + "/state/bgtaskd", &info) == 0)
        #expect(info.st_mode & 0o777 == 0o700)
        #expect(stat(store.path, &info) == 0)
        #expect(info.st_mode & 0o777 == 0o600)
        // Page 1 is in the main file from the start: SQLite deletes a WAL found
        // beside an empty database file, which would lose every commit after a crash.
        #expect(info.st_size >= 4096)
        #expect(stat(store.path + "-wal", &info) == 0)
        #expect(info.st_mode & 0o777 == 0o600)
    }

    // MARK: Refusals at start-up

    @Test func aNewerSchemaIsRefusedAndLeftIntact() throws {
        let future = StateStore.migrations + [StateStore.Migration("v2_from_the_future", sql: "CREATE TABLE future_thing (x)")]
        let newer = try StateStore(directory: directory.root, logger: Self.logger, migrations: future)
        try newer.putRecord(plugin: "fetch", collection: "results", key: "k", data: [7])
        newer.close()

        let error = try #require(refusal())
        #expect(error.code == .newerSchema)
        #expect(error.description == """
            \(databasePath) was written by a newer bgtaskd (it has schema changes this version does not know: \
            v2_from_the_future); refusing to start rather than lose them. Upgrade bgtaskd or move the file away.
            """)

        // The newer bgtaskd still finds all of its data.
        let again = try StateStore(directory: directory.root, logger: Self.logger, migrations: future)
        #expect(try again.records(plugin: "fetch", collection: "results").map(\.data) == [[7]])
    }

    @Test func recordsKeepAnyKeyAndBytesExactly() throws {
        let store = try open()
        let key = "ключ/🔑 with spaces and 'quotes'"
        try store.putRecord(plugin: "remote-notification", collection: "pushes", key: key, data: [0, 255, 0, 7])
        try store.putRecord(plugin: "remote-notification", collection: "pushes", key: "", data: [])
        store.close()
        let records = try open().records(plugin: "remote-notification", collection: "pushes")
        #expect(records.map(\.key) == ["", key])
        #expect(records.map(\.data) == [[], [0, 255, 0, 7]])
    }

    @Test func recordsOfTheFirstSchemaSurviveItsMigration() throws {
        let first = try StateStore(directory: directory.root, logger: Self.logger, migrations: [StateStore.migrations[0]])
        try first.putRecord(plugin: "fetch", collection: "apps", key: "org.example.News", data: [1, 2])
        try first.putRecord(plugin: "remote-notification", collection: "pushes", key: "p1", data: [])
        first.close()

        let store = try open()
        #expect(try store.records(plugin: "fetch", collection: "apps").map(\.data) == [[1, 2]])
        #expect(try store.records(plugin: "remote-notification", collection: "pushes").map(\.key) == ["p1"])
        try store.putRecord(plugin: "fetch", collection: "apps", key: "org.example.News", data: [3])
        #expect(try store.records(plugin: "fetch", collection: "apps").map(\.data) == [[3]], "still one record per key")
        #expect(try store.deleteRecord(plugin: "remote-notification", collection: "pushes", key: "p1"))
    }

    @Test func aGarbageFileIsRefusedAndLeftIntact() throws {
        let garbage = Data(String(repeating: "This is not an SQLite database at all.\n", count: 200).utf8)
        #expect(FileManager.default.createFile(atPath: databasePath, contents: garbage))

        let error = try #require(refusal())
        #expect(error.code == .notADatabase)
        #expect(error.description == """
            \(databasePath) is not a bgtaskd database or is corrupt (SQLite: file is not a database); refusing to start. \
            Move it away (with its -wal and -shm files, if any) to start afresh.
            """)
        #expect(FileManager.default.contents(atPath: databasePath) == garbage)
        #expect(!FileManager.default.fileExists(atPath: databasePath + "-wal"))
    }

    /// A real database with enough records to span many pages, closed.
    func makeDatabase() throws -> Data {
        let store = try open()
        try store.transaction {
            for index in 0..<300 {
                try store.putRecord(
                    plugin: "fetch", collection: "results", key: "key-\(index)", data: [UInt8](repeating: UInt8(index % 251), count: 1_000))
            }
        }
        store.close()
        return try #require(FileManager.default.contents(atPath: databasePath))
    }

    @Test func aTruncatedDatabaseIsRefused() throws {
        let whole = try makeDatabase()
        #expect(whole.count > 100 * 4096)
        #expect(truncate(databasePath, off_t(whole.count / 2)) == 0)

        let error = try #require(refusal())
        #expect(error.code == .corrupt)
        #expect(error.description.hasPrefix(databasePath + " is not a bgtaskd database or is corrupt (SQLite: "))
        #expect(error.description.hasSuffix("refusing to start. Move it away (with its -wal and -shm files, if any) to start afresh."))
        #expect(FileManager.default.contents(atPath: databasePath) == whole.prefix(whole.count / 2))
    }

    @Test func aDamagedPageIsFoundByQuickCheck() throws {
        let whole = try makeDatabase()
        // Overwrite one page in the middle of the records table with noise.
        var damaged = whole
        let page = 4096 * (whole.count / 4096 / 2)
        damaged.replaceSubrange(page..<(page + 4096), with: [UInt8](repeating: 0xA5, count: 4096))
        #expect(FileManager.default.createFile(atPath: databasePath, contents: damaged))

        let error = try #require(refusal())
        #expect(error.code == .corrupt)
        #expect(error.description.hasPrefix(databasePath + " is corrupt (SQLite quick_check: "), "\(error.description)")
        #expect(error.description.hasSuffix("refusing to start. Move it away (with its -wal and -shm files, if any) to start afresh."))
        #expect(!error.description.contains("\n"))
        #expect(FileManager.default.contents(atPath: databasePath) == damaged)
    }

    @Test func anotherProgramsDatabaseIsRefused() throws {
        let other = [StateStore.Migration("other", sql: "PRAGMA application_id = 42; CREATE TABLE notes (body TEXT)")]
        try StateStore(directory: directory.root, logger: Self.logger, migrations: other).close()

        let error = try #require(refusal())
        #expect(error.code == .notADatabase)
        #expect(error.description.hasPrefix("\(databasePath) is not a bgtaskd database (it is an SQLite database of another program: application_id 0x2a"))
    }

    /// An empty database file is never bgtaskd's own: what it held was lost,
    /// and starting afresh on it would hide that (it used to start silently).
    @Test func anEmptyDatabaseIsRefusedNotStartedAfresh() throws {
        #expect(FileManager.default.createFile(atPath: databasePath, contents: Data()))
        let error = try #require(refusal())
        #expect(error.code == .corrupt)
        #expect(error.description.hasPrefix("\(databasePath) is empty, but bgtaskd never leaves its database empty"))
        #expect(error.description.contains("To start afresh, remove the file"))
        var info = stat()
        #expect(stat(databasePath, &info) == 0 && info.st_size == 0, "left as it was")
    }

    /// A creation a crash interrupted (the empty file beside its marker) is carried on.
    @Test func anInterruptedCreationStartsAfresh() throws {
        #expect(FileManager.default.createFile(atPath: databasePath + ".creating", contents: Data()))
        #expect(FileManager.default.createFile(atPath: databasePath, contents: Data()))
        let store = try open()
        try store.putRecord(plugin: "fetch", collection: "apps", key: "k", data: [1])
        store.close()
        #expect(!FileManager.default.fileExists(atPath: databasePath + ".creating"), "the marker goes once the schema is written")
        #expect(try open().records(plugin: "fetch", collection: "apps").map(\.key) == ["k"])
    }

    /// A first start on a full disk wrote GRDB's list of migrations and no
    /// more; with room again, every start refused the file as another
    /// program's (found by an outside test). Beside its marker it is carried
    /// on; without the marker, or holding anything else, it is still refused.
    @Test func aCreationAFullDiskStoppedIsCarriedOnWithRoomAgain() throws {
        func unfinished(_ extra: String?) throws {
            let queue = try DatabaseQueue(path: databasePath)
            try queue.write { db in
                try db.execute(sql: "CREATE TABLE IF NOT EXISTS grdb_migrations (identifier TEXT NOT NULL PRIMARY KEY)")
                if let extra { try db.execute(sql: extra) }
            }
            try queue.close()
        }
        try unfinished(nil)
        #expect(try #require(refusal()).code == .notADatabase, "without its marker it may be another program's")
        #expect(FileManager.default.createFile(atPath: databasePath + ".creating", contents: Data()))
        try unfinished("CREATE TABLE notes (text TEXT)")
        #expect(try #require(refusal()).code == .notADatabase, "it holds more than an unfinished creation")

        for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: databasePath + suffix) }
        try unfinished(nil)
        let store = try open()
        try store.putRecord(plugin: "fetch", collection: "apps", key: "k", data: [1])
        store.close()
        #expect(!FileManager.default.fileExists(atPath: databasePath + ".creating"))
        #expect(try open().records(plugin: "fetch", collection: "apps").map(\.key) == ["k"])
    }

    @Test(arguments: [false, true])
    func aWALWithoutItsDatabaseIsRefused(emptyDatabase: Bool) throws {
        let wal = Data(repeating: 1, count: 100)
        #expect(FileManager.default.createFile(atPath: databasePath + "-wal", contents: wal))
        if emptyDatabase { #expect(FileManager.default.createFile(atPath: databasePath, contents: Data())) }
        let error = try #require(refusal())
        #expect(error.code == .notADatabase)
        #expect(error.description.hasPrefix(
            "\(databasePath)-wal holds changes but \(databasePath) \(emptyDatabase ? "is empty" : "does not exist"): "))
        #expect(FileManager.default.fileExists(atPath: databasePath) == emptyDatabase)
        #expect(FileManager.default.contents(atPath: databasePath + "-wal") == wal)
    }

    @Test func aStateDirectoryThatCannotBeCreatedIsReported() throws {
        try directory.write("file", "a regular file where a directory should be\n")
        let error = try #require(refusal(directory.path("file/bgtaskd")))
        #expect(error.code == .notWritable)
        #expect(error.description == """
            \(directory.path("file/bgtaskd")): cannot create the state directory (Not a directory). \
            Fix the permissions of its parent or choose another one with --state-dir.
            """)
    }

    /// A state directory another user may write to: a link put there as
    /// `bgtaskd.sqlite3.frozen`, to a file of the user's, was emptied and
    /// written through (found by an outside test). The fix it prints quotes
    /// the path for the shell.
    @Test func aStateDirectoryOthersCanWriteToIsRefused() throws {
        let shared = directory.path("shared by all")
        try FileManager.default.createDirectory(atPath: shared, withIntermediateDirectories: true)
        #expect(chmod(shared, 0o1777) == 0)
        let error = try #require(refusal(shared))
        #expect(error.code == .notWritable)
        #expect(error.description.hasPrefix(
            "\(shared): the state directory is writable by everyone (mode 1777); another user could"), "\(error)")
        #expect(!FileManager.default.fileExists(atPath: shared + "/bgtaskd.sqlite3"), "nothing is made there")
        #expect(error.description.contains("(chmod go-w '\(shared)')"), "\(error)")
        #expect(chmod(shared, 0o700) == 0)
        try open(shared).close()
    }

    /// A state directory of another owner was to be fixed with `chmod go-w`,
    /// which cannot give it back (found by an outside test).
    @Test(.enabled(if: geteuid() == 0, "needs root to give a directory away"))
    func aStateDirectoryOfAnotherOwnerIsToBeChowned() throws {
        let theirs = directory.path("theirs too")
        try FileManager.default.createDirectory(atPath: theirs, withIntermediateDirectories: true)
        #expect(chmod(theirs, 0o700) == 0 && chown(theirs, 65534, 65534) == 0)
        let error = try #require(refusal(theirs))
        #expect(error.description.contains("belongs to uid 65534") && error.description.contains("(as root: chown \(geteuid()) '\(theirs)')"),
                "\(error)")
    }

    /// A umask of 002 makes directories writable by the user's private
    /// group, which holds no one else: such a state directory is the user's.
    /// One writable by another group is not.
    @Test func aStateDirectoryWritableByTheUsersPrivateGroupIsTheirs() throws {
        let shared = directory.path("grouped")
        try FileManager.default.createDirectory(atPath: shared, withIntermediateDirectories: true)
        #expect(chmod(shared, 0o775) == 0)
        let user = try #require(getpwuid(geteuid())).pointee
        let privateGroup = getgrgid(user.pw_gid).map { strcmp($0.pointee.gr_name, user.pw_name) == 0 && $0.pointee.gr_mem.pointee == nil } ?? false
        #expect(chown(shared, geteuid(), user.pw_gid) == 0)
        if privateGroup {
            try open(shared).close()
        } else {
            #expect(try #require(refusal(shared)).code == .notWritable)
        }
        // A group the user is not (root may give the directory one): refused.
        let other: gid_t = user.pw_gid == 65534 ? 65533 : 65534
        #expect(chown(shared, geteuid(), other) == 0 || geteuid() != 0)
        if geteuid() == 0 {
            let error = try #require(refusal(shared))
            #expect(error.description.contains("is writable by its group, gid \(other)"), "\(error)")
        }
    }

    /// Permission bits do not stop root, so these run only as another user.
    @Test(.enabled(if: getuid() != 0, "root ignores permission bits"))
    func anUnwritableDirectoryOrFileIsReported() throws {
        let locked = directory.path("locked")
        try FileManager.default.createDirectory(atPath: locked, withIntermediateDirectories: true)
        #expect(chmod(locked, 0o500) == 0)
        defer { chmod(locked, 0o700) }
        let error = try #require(refusal(locked))
        #expect(error.code == .notWritable)
        #expect(error.description.hasPrefix("\(locked): the state directory is not writable (Permission denied)"))

        try open().close()
        #expect(chmod(databasePath, 0o400) == 0)
        let fileError = try #require(refusal())
        #expect(fileError.code == .notWritable)
        #expect(fileError.description.hasPrefix("\(databasePath) is not readable and writable by this user"))
    }

    // MARK: Crash safety

    /// Copies the database files as they are now, as a SIGKILL would leave them.
    func crashCopy(to target: TemporaryDirectory, withSharedMemory: Bool) throws {
        for suffix in withSharedMemory ? ["", "-wal", "-shm"] : ["", "-wal"] {
            let source = databasePath + suffix
            guard FileManager.default.fileExists(atPath: source) else { continue }
            try FileManager.default.copyItem(atPath: source, toPath: target.root + "/" + StateStore.fileName + suffix)
        }
    }

    @Test(arguments: [true, false])
    func everyCommittedWriteSurvivesAKill(withSharedMemory: Bool) throws {
        let store = try open()
        for index in 0..<200 {
            try store.putRecord(plugin: "fetch", collection: "results", key: "key-\(index)", data: [UInt8(index)])
        }
        try store.deleteRecord(plugin: "fetch", collection: "results", key: "key-7")
        try store.setRefreshEnabled(appID: "", enabled: false)
        try store.beginUsage(appID: "org.example.News", at: 1_000)
        try store.endUsage(appID: "org.example.News", at: 2_000)
        try store.beginUsage(appID: "org.example.News", at: 3_000)

        let crashed = try TemporaryDirectory()
        try crashCopy(to: crashed, withSharedMemory: withSharedMemory)
        // The commits are in the WAL, not yet checkpointed: the copy tests recovery.
        let walSize = try FileManager.default.attributesOfItem(atPath: databasePath + "-wal")[.size] as? Int
        #expect((walSize ?? 0) > 200 * 64)

        let recovered = try open(crashed.root)
        let records = try recovered.records(plugin: "fetch", collection: "results")
        #expect(records.count == 199)
        #expect(!records.contains { $0.key == "key-7" })
        #expect(records.first { $0.key == "key-199" }?.data == [199])
        #expect(try !recovered.refreshSettings().globalEnabled)
        #expect(try recovered.usage(appID: "org.example.News", since: 0) == [
            UsageInterval(start: 1_000, end: 2_000), UsageInterval(start: 3_000, end: nil),
        ])
        store.close()
    }

    @Test func aKillInsideATransactionKeepsEarlierCommitsOnly() throws {
        let store = try open()
        try store.putRecord(plugin: "fetch", collection: "results", key: "before", data: [1])
        let crashed = try TemporaryDirectory()
        try store.transaction {
            try store.putRecord(plugin: "fetch", collection: "results", key: "inside", data: [2])
            try store.deleteRecord(plugin: "fetch", collection: "results", key: "before")
            try crashCopy(to: crashed, withSharedMemory: true)
        }
        #expect(try store.records(plugin: "fetch", collection: "results").map(\.key) == ["inside"])

        let recovered = try open(crashed.root)
        #expect(try recovered.records(plugin: "fetch", collection: "results").map(\.key) == ["before"])
    }

    /// Environment variable that turns ``crashWriterChild()`` on, naming its state directory.
    static let crashChildVariable = "BGTASKD_STORE_CRASH_CHILD_DIR"

    /// The data of record `index` in the crash tests.
    static func crashPayload(_ index: Int) -> [UInt8] {
        (0..<(64 + index % 512)).map { UInt8(truncatingIfNeeded: index &* 7 &+ $0) }
    }

    /// A real SIGKILL at an arbitrary moment: a child process (this test
    /// binary, running ``crashWriterChild()``) writes as fast as it can and
    /// acknowledges each call once it returned; it is killed mid-stream, three
    /// times over the same database. Every acknowledged write must be there.
    @Test func everyAcknowledgedWriteSurvivesSIGKILL() throws {
        var acknowledged = -1
        for round in 0..<3 {
            let child = Process()
            child.executableURL = URL(fileURLWithPath: "/proc/self/exe")
            child.arguments = ["--testing-library", "swift-testing", "--filter", "StateStoreTests/crashWriterChild"]
            // Its own temporary files (the suite's directory) inside ours: killed,
            // it cannot remove them, and they went with nobody.
            let childTemporary = directory.path("child-tmp-\(round)")
            try FileManager.default.createDirectory(atPath: childTemporary, withIntermediateDirectories: true)
            child.environment = ProcessInfo.processInfo.environment.merging(
                [Self.crashChildVariable: directory.root, "TMPDIR": childTemporary]) { $1 }
            let output = Pipe()
            child.standardOutput = output
            child.standardError = FileHandle.nullDevice
            try child.run()

            // Let it write a few hundred more, then kill it wherever it is.
            let target = acknowledged + 200 + Int.random(in: 0..<300)
            var pending = ""
            var acks: [Int] = []
            while acks.last ?? -1 < target {
                let chunk = output.fileHandleForReading.availableData
                if chunk.isEmpty { break }  // the child ended early: the checks below fail
                pending += String(decoding: chunk, as: UTF8.self)
                let lines = pending.split(separator: "\n", omittingEmptySubsequences: false)
                pending = String(lines.last ?? "")
                acks += lines.dropLast().compactMap { $0.hasPrefix("ACK ") ? Int($0.dropFirst(4)) : nil }
            }
            kill(child.processIdentifier, SIGKILL)
            child.waitUntilExit()
            // Acknowledgements already in the pipe were printed before the kill: they count.
            pending += String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            acks += pending.split(separator: "\n").compactMap { $0.hasPrefix("ACK ") ? Int($0.dropFirst(4)) : nil }
            #expect(child.terminationReason == .uncaughtSignal, "round \(round)")
            #expect(acks.last ?? -1 >= target, "round \(round): the child stopped acknowledging at \(acks.last ?? -1)")
            acknowledged = max(acknowledged, acks.last ?? -1)

            let store = try open()
            let records = try store.records(plugin: "fetch", collection: "crash")
            var stored: [String: [UInt8]] = [:]
            for record in records { stored[record.key] = record.data }
            let missing = (0...max(acknowledged, 0)).filter { stored["key-\($0)"] != Self.crashPayload($0) }
            #expect(missing.count == 0, "round \(round): \(missing.count) acknowledged writes lost, first \(missing.prefix(5))")
            // At most the write in flight may be there beyond the last acknowledgement.
            #expect(records.count <= acknowledged + 2)
            let usage = try store.usage(appID: "org.example.Crash", since: 0)
            #expect(usage.count >= (acknowledged + 1) / 10)
            store.close()
        }
    }

    /// The writer of ``everyAcknowledgedWriteSurvivesSIGKILL()``; runs only in
    /// the child process it starts.
    @Test(.enabled(if: ProcessInfo.processInfo.environment[crashChildVariable] != nil, "runs only as a crash-test child"))
    func crashWriterChild() throws {
        let root = try #require(ProcessInfo.processInfo.environment[Self.crashChildVariable])
        let store = try open(root)
        var next = try store.records(plugin: "fetch", collection: "crash").count
        // Writes until it is killed (or, as a safety net, for a minute).
        let deadline = ContinuousClock.now + .seconds(60)
        while ContinuousClock.now < deadline {
            if next % 10 == 0 {
                try store.transaction {
                    try store.putRecord(plugin: "fetch", collection: "crash", key: "key-\(next)", data: Self.crashPayload(next))
                    try store.beginUsage(appID: "org.example.Crash", at: UInt64(next) * 10)
                    try store.endUsage(appID: "org.example.Crash", at: UInt64(next) * 10 + 5)
                }
            } else {
                try store.putRecord(plugin: "fetch", collection: "crash", key: "key-\(next)", data: Self.crashPayload(next))
            }
            let line = Array("ACK \(next)\n".utf8)
            _ = line.withUnsafeBytes { write(STDOUT_FILENO, $0.baseAddress, $0.count) }
            next += 1
        }
    }

    // MARK: Performance

    @Test func thousandPutsAndTenThousandReadsTakeWellUnderASecond() throws {
        let store = try open()
        let clock = ContinuousClock()
        let payload = [UInt8](repeating: 0x42, count: 200)

        let puts = try clock.measure {
            for index in 0..<1_000 {
                try store.putRecord(plugin: "fetch", collection: "single", key: "key-\(index)", data: payload)
            }
        }
        let batch = try clock.measure {
            try store.transaction {
                for index in 0..<10_000 {
                    try store.putRecord(plugin: "fetch", collection: "bulk", key: "key-\(index)", data: payload)
                }
            }
        }
        var records: [(key: String, data: [UInt8])] = []
        let reads = try clock.measure { records = try store.records(plugin: "fetch", collection: "bulk") }

        print("StateStore timings: 1,000 committed putRecord: \(puts); 10,000 putRecord in one transaction: \(batch); "
            + "reading 10,000 records: \(reads)")
        #expect(records.count == 10_000)
        #expect(records.allSatisfy { $0.data == payload })
        // Only an order of magnitude: timings under load are the benchmark's business.
        #expect(puts < .seconds(10))
        #expect(reads < .seconds(10))
    }
}
