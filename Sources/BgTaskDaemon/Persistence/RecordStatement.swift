import GRDB
import GRDBSQLite

/// One statement on plugin records, prepared once on the store's connection
/// and bound and stepped through SQLite's C API.
///
/// Plugin records are written on the path of every push and every fetch
/// wake, and GRDB's argument handling (each value boxed as a
/// `DatabaseValue`, the blob copied into `Data`) took about a tenth of the
/// daemon's time there. Text and blobs are bound straight from Swift's
/// buffers (SQLite copies them). Used only inside the store's database
/// accesses, on its one connection; ``finalize()`` before the connection
/// closes.
final class RecordStatement {
    private var handle: OpaquePointer?
    let sql: String

    /// Prepares `sql` on the connection of `db`.
    init(_ sql: String, on db: Database) throws {
        self.sql = sql
        var statement: OpaquePointer?
        let code = sqlite3_prepare_v3(db.sqliteConnection, sql, -1, UInt32(SQLITE_PREPARE_PERSISTENT), &statement, nil)
        guard code == SQLITE_OK, let statement else {
            sqlite3_finalize(statement)
            throw DatabaseError(resultCode: ResultCode(rawValue: code), message: String(cString: sqlite3_errmsg(db.sqliteConnection)), sql: sql)
        }
        handle = statement
    }

    deinit { finalize() }

    func finalize() {
        sqlite3_finalize(handle)
        handle = nil
    }

    /// Binds `texts` (then `blob`, if given) to the parameters in order, runs
    /// the statement to its end, and returns how many rows it changed.
    @discardableResult
    func run(_ texts: [String], blob: [UInt8]? = nil, on db: Database) throws -> Int {
        guard let handle else { throw DatabaseError(resultCode: .SQLITE_MISUSE, message: "statement used after it was finalized", sql: sql) }
        defer {
            sqlite3_reset(handle)
            sqlite3_clear_bindings(handle)
        }
        // SQLITE_TRANSIENT: SQLite copies the bytes before the bind returns.
        let transient = unsafeBitCast(-1, to: sqlite3_destructor_type.self)
        var code = SQLITE_OK
        for (index, text) in texts.enumerated() where code == SQLITE_OK {
            code = text.utf8.withContiguousStorageIfAvailable { bytes in
                sqlite3_bind_text(handle, Int32(index + 1), UnsafeRawPointer(bytes.baseAddress!).assumingMemoryBound(to: CChar.self), Int32(bytes.count), transient)
            } ?? sqlite3_bind_text(handle, Int32(index + 1), text, -1, transient)
        }
        if let blob, code == SQLITE_OK {
            // A zero-length blob, never NULL (the column is NOT NULL).
            code = blob.isEmpty
                ? sqlite3_bind_zeroblob(handle, Int32(texts.count + 1), 0)
                : blob.withUnsafeBytes { sqlite3_bind_blob(handle, Int32(texts.count + 1), $0.baseAddress, Int32($0.count), transient) }
        }
        if code == SQLITE_OK {
            code = sqlite3_step(handle)
            if code == SQLITE_DONE || code == SQLITE_ROW { return Int(sqlite3_changes(db.sqliteConnection)) }
        }
        throw DatabaseError(resultCode: ResultCode(rawValue: code), message: String(cString: sqlite3_errmsg(db.sqliteConnection)), sql: sql)
    }
}
