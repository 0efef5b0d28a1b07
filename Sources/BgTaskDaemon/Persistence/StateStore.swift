import Foundation
import GRDB
public import Logging

/// The daemon's durable state: one SQLite database, `<state dir>/bgtaskd.sqlite3`
/// (docs/DESIGN.md §2), holding the Background App Refresh switches, each app's usage
/// history, and the records mode plugins keep (fetch registrations, results,
/// offences, …) in a generic per-plugin store.
///
/// ## Implementation notes
///
/// - **Synchronous and loop-confined.** The daemon is single-threaded and its
///   writes are small, so every call runs on the caller's thread and every
///   write is committed before the call returns (unless it runs inside
///   ``transaction(_:)`` or ``group(_:)``, which commit once at their end:
///   group commit for high-rate writers). Use a store from one thread only.
/// - **Durability.** The database is in WAL mode with `synchronous=NORMAL`: a
///   commit is one `write(2)` to the `-wal` file, with no `fsync`. A process
///   crash — SIGKILL at any moment, included — loses nothing committed,
///   because the data is already in the kernel's page cache; the next open
///   replays the WAL. Only a power loss or kernel crash can lose the last
///   commits since the previous checkpoint (the database itself stays
///   consistent). This is the usual trade for desktop state: an `fsync` per
///   commit would cost milliseconds on every call of the event loop.
/// - **Refusing rather than resetting.** At start-up the file is checked with
///   `PRAGMA quick_check`, its `application_id` and its migration list before
///   anything is written. A corrupt file, another program's database, a
///   database migrated by a newer bgtaskd, an unwritable directory or a stray
///   `-wal` without its database each stop start-up with a ``StoreError``
///   that says what to do; nothing is ever erased to make start-up succeed.
/// - **Exclusive.** The daemon's store keeps the file locked while it is
///   open (SQLite's exclusive locking mode): a commit takes no file locks and
///   the WAL index lives in memory, which takes about a third off the cost
///   of a small transaction. Another process that opens the file meanwhile
///   (a second bgtaskd, an `sqlite3` shell) waits up to ``busyTimeout``
///   seconds and fails with ``StoreError/Code-swift.struct/busy``; stop
///   bgtaskd to look at its database.
public final class StateStore {
    /// The database's file name inside the state directory.
    public static let fileName = "bgtaskd.sqlite3"
    /// Seconds a write waits for another process's lock.
    static let busyTimeout: Double = 5

    /// The database file.
    public let path: String
    let logger: Logger
    private var queue: DatabaseQueue?
    /// The plugin-record writes, prepared on first use (see ``RecordStatement``).
    private var putStatement: RecordStatement?
    private var deleteStatement: RecordStatement?
    /// A group's BEGIN and COMMIT, run as the record writes are: through
    /// GRDB's statement wrapper each cost a few thousand instructions more,
    /// twice on every event's path to its app.
    private var beginStatement: RecordStatement?
    private var commitStatement: RecordStatement?

    /// Opens (creating if needed) `<directory>/bgtaskd.sqlite3`, checks it,
    /// switches it to WAL and brings its schema up to date.
    ///
    /// - Throws: ``StoreError`` when the directory or file cannot be created or
    ///   written, the file is corrupt or not a bgtaskd database, or it was
    ///   written by a newer bgtaskd. The file is left as it was.
    ///
    /// With `exclusive` (the daemon's way) the store holds the file locked
    /// from its first access until it is closed: commits then take no file
    /// locks and keep the WAL index in memory, and anything else that opens
    /// the file meanwhile (a second bgtaskd on the same state directory) waits
    /// ``busyTimeout`` seconds and is refused with
    /// ``StoreError/Code-swift.struct/busy``.
    public convenience init(directory: String, logger: Logger, exclusive: Bool = true) throws(StoreError) {
        try self.init(directory: directory, logger: logger, migrations: Self.migrations, exclusive: exclusive)
    }

    /// The database's path in a state directory.
    public static func path(inDirectory directory: String) -> String {
        let directory = withoutTrailingSlashes(directory)
        return (directory == "/" ? "" : directory) + "/" + fileName
    }

    private static func withoutTrailingSlashes(_ directory: String) -> String {
        var directory = directory
        while directory.count > 1, directory.hasSuffix("/") { directory.removeLast() }
        return directory
    }

    /// Opens the store with an explicit schema; tests pass extra migrations to
    /// play a newer bgtaskd.
    init(directory: String, logger: Logger, migrations: [Migration], exclusive: Bool = true) throws(StoreError) {
        let directory = Self.withoutTrailingSlashes(directory)
        self.path = Self.path(inDirectory: directory)
        self.logger = logger
        try Self.prepareFiles(directory: directory, path: path)
        queue = try Self.openDatabase(path: path, migrations: migrations, exclusive: exclusive, logger: logger)
        Self.finishCreation(path: path)
        identity = Self.identity(of: path)
        walIdentity = Self.identity(of: path + "-wal")
    }

    /// The file's device and inode once opened.
    private var identity: (device: UInt64, inode: UInt64)?
    /// The write-ahead log's, which SQLite keeps open (and in place) while
    /// the database is: commits land there first.
    private var walIdentity: (device: UInt64, inode: UInt64)?

    private static func identity(of path: String) -> (device: UInt64, inode: UInt64)? {
        var status = stat()
        guard stat(path, &status) == 0 else { return nil }
        return (UInt64(status.st_dev), UInt64(status.st_ino))
    }

    /// Whether the files opened are still at ``path`` and beside it:
    /// the database or its write-ahead log deleted, or replaced, what is
    /// written from now on would go where the next start cannot see it.
    public var isStillInPlace: Bool {
        func same(_ path: String, _ expected: (device: UInt64, inode: UInt64)?) -> Bool {
            guard let expected else { return true }
            guard let found = Self.identity(of: path) else { return false }
            return found == expected
        }
        return same(path, identity) && same(path + "-wal", walIdentity)
    }

    deinit { close() }

    /// Closes the database; the WAL is checkpointed into the main file. Calls
    /// after this throw ``StoreError/Code-swift.struct/closed``.
    public func close() {
        guard let queue else { return }
        self.queue = nil
        // Before the connection closes: SQLite will not close it under a live statement.
        queue.unsafeReentrantWrite { _ in
            for statement in [putStatement, deleteStatement, beginStatement, commitStatement] { statement?.finalize() }
        }
        (putStatement, deleteStatement, beginStatement, commitStatement) = (nil, nil, nil, nil)
        do {
            try queue.close()
        } catch {
            logger.warning("Could not close the state database cleanly", metadata: [
                "path": "\(path)", "error": "\(error)",
            ])
        }
    }

    // MARK: Background App Refresh

    /// The stored switches; all on for a new database.
    public func refreshSettings() throws(StoreError) -> RefreshSettings {
        try read("read the Background App Refresh settings") { db in
            var settings = RefreshSettings()
            let rows = try Self.rows(db, sql: "SELECT app_id, enabled FROM refresh_setting")
            while let row = try rows.next() {
                let appID: String = try row.decode(atIndex: 0)
                let enabled: Bool = try row.decode(atIndex: 1)
                if appID.isEmpty { settings.globalEnabled = enabled } else { settings.perApp[appID] = enabled }
            }
            return settings
        }
    }

    /// Sets one switch; `appID` `""` is the global switch.
    public func setRefreshEnabled(appID: String, enabled: Bool) throws(StoreError) {
        try write("store the Background App Refresh setting of '\(appID)'") { db in
            try Self.execute(
                db,
                sql: """
                    INSERT INTO refresh_setting (app_id, enabled) VALUES (?, ?)
                    ON CONFLICT (app_id) DO UPDATE SET enabled = excluded.enabled
                    """,
                arguments: [appID, enabled])
        }
    }

    // MARK: Usage history

    /// Records that `appID` became active at `at` (realtime µs since the epoch).
    /// Does nothing if it already has an open interval. Back within `gap` µs
    /// of the end of its last interval, that interval goes on: one row for a
    /// burst of switches, not one each.
    public func beginUsage(appID: String, at: UInt64, mergingWithin gap: UInt64 = 0) throws(StoreError) {
        let start = try storable(at)
        let gap = try storable(gap)
        try write("record that '\(appID)' became active") { db in
            if gap > 0 {
                try Self.execute(
                    db,
                    sql: """
                        UPDATE usage_interval SET end_usec = NULL
                        WHERE id = (SELECT id FROM usage_interval WHERE app_id = ? ORDER BY start_usec DESC, id DESC LIMIT 1)
                          AND end_usec IS NOT NULL AND end_usec + ? >= ?
                        """,
                    arguments: [appID, gap, start])
                if db.changesCount > 0 { return }
            }
            try Self.execute(
                db,
                sql: "INSERT INTO usage_interval (app_id, start_usec) VALUES (?, ?) ON CONFLICT DO NOTHING",
                arguments: [appID, start])
        }
    }

    /// Closes the open interval of `appID` at `at`; an `at` before its start
    /// (the realtime clock was set back) closes it empty. Does nothing if
    /// none is open.
    public func endUsage(appID: String, at: UInt64) throws(StoreError) {
        let end = try storable(at)
        try write("record that '\(appID)' stopped being active") { db in
            try Self.execute(
                db,
                sql: "UPDATE usage_interval SET end_usec = max(?, start_usec) WHERE app_id = ? AND end_usec IS NULL",
                arguments: [end, appID])
        }
    }

    /// Closes every open interval at `at`: at shutdown, and at start-up for
    /// intervals a crash left open (pass the best estimate of when the
    /// previous run ended).
    public func closeOpenUsage(at: UInt64) throws(StoreError) {
        let end = try storable(at)
        try write("close open usage intervals") { db in
            try Self.execute(
                db,
                sql: "UPDATE usage_interval SET end_usec = max(?, start_usec) WHERE end_usec IS NULL",
                arguments: [end])
        }
    }

    /// The intervals of `appID` that were still going at or after `since`
    /// (ended at or after it, or still open), oldest first.
    public func usage(appID: String, since: UInt64) throws(StoreError) -> [UsageInterval] {
        let since = try storable(since)
        return try read("read the usage history of '\(appID)'") { db in
            let rows = try Self.rows(
                db,
                sql: """
                    SELECT start_usec, end_usec FROM usage_interval
                    WHERE app_id = ? AND (end_usec IS NULL OR end_usec >= ?)
                    ORDER BY start_usec, id
                    """,
                arguments: [appID, since])
            var intervals: [UsageInterval] = []
            while let row = try rows.next() {
                let start: Int64 = try row.decode(atIndex: 0)
                let end: Int64? = try row.decode(atIndex: 1)
                intervals.append(UsageInterval(start: UInt64(clamping: start), end: end.map { UInt64(clamping: $0) }))
            }
            return intervals
        }
    }

    /// Deletes the intervals that ended before `before`; open ones stay.
    public func pruneUsage(before: UInt64) throws(StoreError) {
        let limit = try storable(before)
        try write("prune the usage history") { db in
            try Self.execute(db, sql: "DELETE FROM usage_interval WHERE end_usec < ?", arguments: [limit])
        }
    }

    // MARK: Plugin records

    /// Stores `data` under `key`, replacing what was there.
    public func putRecord(plugin: String, collection: String, key: String, data: [UInt8]) throws(StoreError) {
        try write("store record '\(key)' of \(plugin)/\(collection)") { db in
            if putStatement == nil {
                putStatement = try RecordStatement(
                    """
                    INSERT INTO plugin_record (plugin, collection, key, data) VALUES (?, ?, ?, ?)
                    ON CONFLICT (plugin, collection, key) DO UPDATE SET data = excluded.data
                    """, on: db)
            }
            try putStatement!.run([plugin, collection, key], blob: data, on: db)
        }
    }

    /// Deletes the record under `key`; returns whether there was one (the
    /// plugin ABI answers `-ENOENT` when there was not).
    @discardableResult
    public func deleteRecord(plugin: String, collection: String, key: String) throws(StoreError) -> Bool {
        var deleted = false
        try write("delete record '\(key)' of \(plugin)/\(collection)") { db in
            if deleteStatement == nil {
                deleteStatement = try RecordStatement("DELETE FROM plugin_record WHERE plugin = ? AND collection = ? AND key = ?", on: db)
            }
            deleted = try deleteStatement!.run([plugin, collection, key], on: db) > 0
        }
        return deleted
    }

    /// Every record of one collection, ordered by key (byte order of its UTF-8).
    public func records(plugin: String, collection: String) throws(StoreError) -> [(key: String, data: [UInt8])] {
        try read("read the records of \(plugin)/\(collection)") { db in
            let rows = try Self.rows(
                db,
                sql: "SELECT key, data FROM plugin_record WHERE plugin = ? AND collection = ? ORDER BY key",
                arguments: [plugin, collection])
            var records: [(key: String, data: [UInt8])] = []
            while let row = try rows.next() {
                let key: String = try row.decode(atIndex: 0)
                let data = try row.withUnsafeData(atIndex: 1) { $0.map { [UInt8]($0) } ?? [] }
                records.append((key: key, data: data))
            }
            return records
        }
    }

    /// Makes every commit durable on disk (a WAL checkpoint: the log is
    /// synced, copied into the database, and the database synced): before the
    /// machine sleeps, so that a battery that runs out meanwhile loses nothing.
    public func checkpoint() throws(StoreError) {
        try read("checkpoint the write-ahead log") { db in
            _ = try Row.fetchAll(db, sql: "PRAGMA wal_checkpoint(PASSIVE)")
        }
    }

    // MARK: Transactions

    /// Runs `body` as one transaction: the writes it makes through this store
    /// are committed together when it returns, or not at all if it throws.
    /// Nested calls are savepoints inside the outer transaction.
    ///
    /// - Throws: the ``StoreError`` `body` threw, a
    ///   ``StoreError/Code-swift.struct/transactionAborted`` wrapping any other
    ///   error it threw, or the error of the commit itself.
    public func transaction(_ body: () throws -> Void) throws(StoreError) {
        try write("commit a transaction") { db in
            try db.inSavepoint {
                do {
                    try body()
                } catch let error as StoreError {
                    throw error
                } catch {
                    throw StoreError(
                        .transactionAborted, path: path,
                        message: "\(path): a transaction was rolled back because its body failed: \(error)",
                        underlying: error)
                }
                return .commit
            }
        }
    }

    /// Runs `body` as a group commit: its writes join one transaction, begun
    /// by the first of them and committed when `body` returns. A body that
    /// writes nothing costs nothing (no `BEGIN`, no `COMMIT`). Nested groups
    /// join the outer one; ``transaction(_:)`` inside a group is a savepoint.
    ///
    /// Unlike ``transaction(_:)`` the body cannot fail as a whole: each write
    /// reports its own error. This is what the plugin host wraps around a call
    /// or a batch of events, holding back replies until the commit.
    ///
    /// - Throws: the commit's error; the group's writes are then rolled back.
    public func group(_ body: () -> Void) throws(StoreError) {
        guard groupState == .none else { return body() }
        let queue = try openQueue()
        groupState = .pending
        defer { groupState = .none }
        // One database access around it all: the writes inside are reentrant
        // and skip GRDB's dispatch-queue hop, a few µs each.
        var failure: StoreError?
        do {
            try queue.unsafeReentrantWrite { db in
                body()
                switch groupState {
                case .none, .pending:
                    return
                case .broken(let error):
                    failure = error
                    if db.isInsideTransaction { try db.execute(sql: "ROLLBACK") }
                case .begun:
                    do {
                        if commitStatement == nil { commitStatement = try RecordStatement("COMMIT", on: db) }
                        try commitStatement!.run([], on: db)
                    } catch {
                        failure = Self.failure(error, path: path, doing: "commit a group of writes")
                        if db.isInsideTransaction { try db.execute(sql: "ROLLBACK") }
                    }
                }
            }
        } catch {
            let error = failure ?? Self.failure(error, path: path, doing: "roll back a group of writes")
            reclaimLog(after: error)
            throw error
        }
        if let failure {
            reclaimLog(after: failure)
            throw failure
        }
    }

    /// Where ``group(_:)`` is: outside, inside before any write, inside its
    /// transaction, or inside after SQLite rolled that transaction back (a
    /// full disk, an I/O error), when nothing more may be written.
    private enum GroupState: Equatable {
        case none, pending, begun
        case broken(StoreError)

        static func == (a: GroupState, b: GroupState) -> Bool {
            switch (a, b) {
            case (.none, .none), (.pending, .pending), (.begun, .begun), (.broken, .broken): true
            default: false
            }
        }
    }

    private var groupState = GroupState.none

    /// Whether ``group(_:)`` has written something not yet committed.
    public var hasUncommittedWrites: Bool {
        switch groupState {
        case .begun, .broken: true
        case .none, .pending: false
        }
    }

    // MARK: Helpers

    /// Runs `body`, which writes with one statement: SQLite makes a statement
    /// atomic on its own, and commits it at once outside ``transaction(_:)``.
    ///
    /// GRDB's reentrant access is what lets the body of ``transaction(_:)``
    /// call this store's methods; "unsafe" there means "no transaction of its
    /// own", which one statement does not need.
    private func write(_ what: @autoclosure () -> String, _ body: (Database) throws -> Void) throws(StoreError) {
        let queue = try openQueue()
        do {
            try queue.unsafeReentrantWrite { db in
                switch groupState {
                case .none:
                    break
                case .pending:
                    if beginStatement == nil { beginStatement = try RecordStatement("BEGIN IMMEDIATE", on: db) }
                    try beginStatement!.run([], on: db)
                    groupState = .begun
                case .begun:
                    // SQLite rolls a transaction back by itself on some errors; what
                    // the group wrote before is gone, so nothing after may be kept.
                    guard db.isInsideTransaction else {
                        let error = StoreError(
                            .transactionAborted, path: path,
                            message: "\(path): a group of writes was rolled back by SQLite after an error")
                        groupState = .broken(error)
                        throw error
                    }
                case .broken(let error):
                    throw error
                }
                try body(db)
            }
        } catch {
            let error = error as? StoreError ?? Self.failure(error, path: path, doing: what())
            // Inside a group the group's end does it, once its transaction is gone.
            if groupState == .none { reclaimLog(after: error) }
            throw error
        }
    }

    /// After a write failed for want of room: the write-ahead log holds every
    /// page written since the last checkpoint, most of them superseded, and
    /// on a small file system it is what fills it. A checkpoint that
    /// truncates it gives that room back (it needs room only for pages the
    /// database file lacks, few since the open folded the log into it), so
    /// the next write can succeed without anything else being deleted.
    private func reclaimLog(after error: StoreError) {
        guard error.code == .diskFull, let queue = try? openQueue() else { return }
        do {
            let row = try queue.unsafeReentrantWrite { db -> Row? in
                guard !db.isInsideTransaction else { return nil }
                return try Row.fetchOne(db, sql: "PRAGMA wal_checkpoint(TRUNCATE)")
            }
            // (busy, log frames, frames checkpointed): busy 0 means the log was emptied.
            if let row, row[0] as Int? == 0 {
                logger.notice("the disk is full: emptied the state database's write-ahead log to make room")
            }
        } catch {
            logger.debug("cannot empty the write-ahead log after a full disk: \(error)")
        }
    }

    /// Runs `body`, which only reads (each of its statements is atomic).
    private func read<T>(_ what: @autoclosure () -> String, _ body: (Database) throws -> T) throws(StoreError) -> T {
        let queue = try openQueue()
        do {
            return try queue.unsafeReentrantWrite(body)
        } catch let error as StoreError {
            throw error
        } catch {
            throw Self.failure(error, path: path, doing: what())
        }
    }

    /// Runs one statement, prepared once per connection.
    private static func execute(_ db: Database, sql: String, arguments: StatementArguments = []) throws {
        try db.cachedStatement(sql: sql).execute(arguments: arguments)
    }

    /// The rows of one query, prepared once per connection.
    private static func rows(_ db: Database, sql: String, arguments: StatementArguments = []) throws -> RowCursor {
        try Row.fetchCursor(db.cachedStatement(sql: sql), arguments: arguments)
    }

    private func openQueue() throws(StoreError) -> DatabaseQueue {
        guard let queue else {
            throw StoreError(.closed, path: path, message: "\(path): the state database was used after it was closed")
        }
        return queue
    }

    /// `value` as SQLite's signed 64-bit integer.
    private func storable(_ value: UInt64) throws(StoreError) -> Int64 {
        guard let stored = Int64(exactly: value) else {
            throw StoreError(
                .invalidArgument, path: path,
                message: "\(path): timestamp \(value) µs is beyond what SQLite can store (\(Int64.max))")
        }
        return stored
    }

}
