import BgTaskProtocol
import Foundation
import GRDB
import Logging

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Start-up: the state directory and files, the checks that refuse a database
/// rather than reset it, and the translation of SQLite errors into messages.
extension StateStore {
    /// What the person who reads a start-up refusal should do.
    static let moveAwayAdvice = "Move it away (with its -wal and -shm files, if any) to start afresh."

    // MARK: Files

    /// Creates the state directory (mode 0700) and an empty database file
    /// (mode 0600: usage history is private), and checks that both can be
    /// written, so that problems are reported here in words rather than by
    /// SQLite later.
    ///
    /// An existing database file that is empty is refused: an empty database
    /// the daemon did not just create lost what it held (a truncation, a file
    /// system that lost its data), and starting afresh on it would hide that.
    /// The daemon tells its own new database by a marker, `<file>.creating`,
    /// made before the file and removed once its schema is written
    /// (``finishCreation(path:)``): an empty file beside the marker is a
    /// creation a crash interrupted, which is carried on.
    static func prepareFiles(directory: String, path: String) throws(StoreError) {
        if let errorNumber = makeDirectories(directory) {
            throw StoreError(
                .notWritable, path: path,
                message: "\(directory): cannot create the state directory (\(describe(errorNumber))). "
                    + "Fix the permissions of its parent or choose another one with --state-dir.")
        }
        guard fileType(directory) == S_IFDIR else {
            throw StoreError(
                .notWritable, path: path,
                message: "\(directory): the state directory is not a directory. Move it away or choose another one with --state-dir.")
        }
        if let shared = writableByOthers(directory) {
            throw StoreError(
                .notWritable, path: path,
                message: "\(directory): the state directory \(shared.why); another user could put links there that bgtaskd "
                    + "would write through, or change its state. Refusing to start. Make it the user's own "
                    + "(\(shared.fix)), or choose another one with --state-dir.")
        }
        guard access(directory, W_OK | X_OK) == 0 else {
            throw StoreError(
                .notWritable, path: path,
                message: "\(directory): the state directory is not writable (\(describe(errno))); bgtaskd keeps "
                    + "its database and write-ahead log there. Fix its owner or mode, or choose another one with --state-dir.")
        }
        // A WAL beside a missing or empty database belongs to a database that
        // was moved, deleted or truncated: SQLite would delete it or replay it
        // into a new file, losing or corrupting what it holds.
        if fileSize(path + "-wal") ?? 0 > 0, fileSize(path) ?? 0 == 0 {
            let state = fileType(path) == nil ? "does not exist" : "is empty"
            throw StoreError(
                .notADatabase, path: path,
                message: "\(path)-wal holds changes but \(path) \(state): the WAL belongs to a database that was "
                    + "moved, deleted or truncated; refusing to start rather than lose it or apply it to a new one. "
                    + "Put the database back beside it, or move \(path)-wal (and \(path)-shm) away too.")
        }
        if let type = fileType(path) {
            guard type == S_IFREG else {
                throw StoreError(
                    .notADatabase, path: path,
                    message: "\(path) is not a regular file; refusing to start. Move it away to start afresh.")
            }
            for file in [path, path + "-wal", path + "-shm"] where fileType(file) != nil {
                guard access(file, R_OK | W_OK) == 0 else {
                    throw StoreError(
                        .notWritable, path: path,
                        message: "\(file) is not readable and writable by this user (\(describe(errno))); "
                            + "refusing to start. Fix its owner or mode.")
                }
            }
            if fileSize(path) == 0, fileType(creationMarker(path)) == nil {
                throw StoreError(
                    .corrupt, path: path,
                    message: "\(path) is empty, but bgtaskd never leaves its database empty: what it held "
                        + "(fetch registrations, what was learned, held pushes, settings) was lost, by a truncation "
                        + "or a file system that lost data. Refusing to start afresh on it silently. "
                        + "To start afresh, remove the file; to recover, restore it from a backup.")
            }
        } else {
            let marker = open(creationMarker(path), O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0o600)
            let descriptor = marker < 0 ? -1 : open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
            let failure = errno
            if marker >= 0 { _ = Glibc.close(marker) }
            if descriptor >= 0 {
                _ = Glibc.close(descriptor)
            } else if failure != EEXIST {
                let code: StoreError.Code = failure == ENOSPC || failure == EDQUOT ? .diskFull : .notWritable
                throw StoreError(
                    code, path: path,
                    message: "\(path) cannot be created (\(describe(failure))). "
                        + "Fix the permissions of \(directory), make room, or choose another state directory with --state-dir.")
            }
        }
    }

    /// The marker of a database being created (see ``prepareFiles(directory:path:)``).
    static func creationMarker(_ path: String) -> String { path + ".creating" }

    /// The new database has its schema: it is no longer empty, and its marker goes.
    static func finishCreation(path: String) {
        _ = unlink(creationMarker(path))
    }

    /// `mkdir -p` with mode 0700; the `errno` of the first failure, if any.
    private static func makeDirectories(_ directory: String) -> Int32? {
        var prefix = directory.hasPrefix("/") ? "" : "."
        for component in directory.split(separator: "/") {
            prefix += "/" + component
            if mkdir(prefix, 0o700) != 0, errno != EEXIST { return errno }
        }
        return nil
    }

    /// Why another user could change what is in `directory`, or nil if none
    /// can: it belongs to someone else (root aside), or everyone, or a group
    /// other than the user's own private one, may write to it (a sticky bit
    /// does not stop new files and links). A umask of 002 (Fedora, RHEL)
    /// makes directories writable by the user's private group, which holds
    /// no one else.
    ///
    /// Returns why, and the command that makes it the user's own (for the
    /// user to paste): another owner is fixed by chown, as root (chmod cannot
    /// give it back), a mode by chmod.
    static func writableByOthers(_ directory: String) -> (why: String, fix: String)? {
        var info = stat()
        guard stat(directory, &info) == 0 else { return nil }
        let path = ShellWord.quoted(directory)
        if info.st_uid != 0 && info.st_uid != geteuid() { return ("belongs to uid \(info.st_uid)", "as root: chown \(geteuid()) \(path)") }
        let mode = String(info.st_mode & 0o7777, radix: 8)
        if info.st_mode & S_IWOTH != 0 { return ("is writable by everyone (mode \(mode))", "chmod go-w \(path)") }
        if info.st_mode & S_IWGRP != 0, !isPrivateGroup(info.st_gid) {
            return ("is writable by its group, gid \(info.st_gid) (mode \(mode))", "chmod go-w \(path)")
        }
        return nil
    }

    /// Whether `gid` is the user's private group: their primary group,
    /// named as they are, with no other members listed.
    private static func isPrivateGroup(_ gid: gid_t) -> Bool {
        var user = passwd(), group = Glibc.group()
        var foundUser: UnsafeMutablePointer<passwd>?, foundGroup: UnsafeMutablePointer<Glibc.group>?
        var userBuffer = [CChar](repeating: 0, count: 4096), groupBuffer = [CChar](repeating: 0, count: 16384)
        guard getpwuid_r(geteuid(), &user, &userBuffer, userBuffer.count, &foundUser) == 0, foundUser != nil,
              user.pw_gid == gid, getgrgid_r(gid, &group, &groupBuffer, groupBuffer.count, &foundGroup) == 0, foundGroup != nil,
              let userName = user.pw_name, let groupName = group.gr_name, strcmp(userName, groupName) == 0
        else { return false }
        return group.gr_mem == nil || group.gr_mem.pointee == nil
    }

    private static func fileType(_ path: String) -> mode_t? {
        var info = stat()
        guard stat(path, &info) == 0 else { return nil }
        return info.st_mode & S_IFMT
    }

    private static func fileSize(_ path: String) -> Int64? {
        var info = stat()
        guard stat(path, &info) == 0 else { return nil }
        return Int64(info.st_size)
    }

    private static func describe(_ errorNumber: Int32) -> String {
        String(cString: strerror(errorNumber))
    }

    // MARK: Database

    /// Opens the database, refuses it if it is corrupt, another program's or
    /// newer, then switches it to WAL and migrates it. Nothing is written
    /// before the checks pass.
    static func openDatabase(path: String, migrations: [Migration], exclusive: Bool, logger: Logger) throws(StoreError) -> DatabaseQueue {
        var configuration = GRDB.Configuration()
        configuration.label = "bgtaskd.state"
        configuration.busyMode = .timeout(busyTimeout)
        configuration.foreignKeysEnabled = true
        // StateStore.group(_:) begins its transaction in one access and commits it in a later one.
        configuration.allowsUnsafeTransactions = true
        // Per connection. WAL itself is switched on after the checks, below:
        // GRDB's `journalMode = .wal` would write to the file before them.
        configuration.prepareDatabase { db in
            try db.execute(sql: "PRAGMA synchronous = NORMAL")
            // The log is truncated to this after a checkpoint empties it, instead of keeping its largest size.
            try db.execute(sql: "PRAGMA journal_size_limit = 1048576")
            // Before the first access, so that WAL keeps its index in memory, not in a -shm file.
            if exclusive { try db.execute(sql: "PRAGMA locking_mode = EXCLUSIVE") }
        }
        let migrator = migrator(for: migrations)

        let queue: DatabaseQueue
        do {
            queue = try DatabaseQueue(path: path, configuration: configuration)
        } catch {
            throw failure(error, path: path)
        }
        do {
            let alreadyApplied = try queue.writeWithoutTransaction { db in
                try check(db, path: path, migrator: migrator)
                let mode = try String.fetchOne(db, sql: "PRAGMA journal_mode = WAL")
                guard mode == "wal" else {
                    throw StoreError(
                        .operationFailed, path: path,
                        message: "\(path): cannot switch to write-ahead logging (journal mode stays \(mode ?? "unknown")); "
                            + "refusing to start. Is the state directory on a file system without shared memory?")
                }
                return try migrator.appliedIdentifiers(db)
            }
            try migrator.migrate(queue)
            // The state is in the database file from here, not only in the
            // log: a copy of the file alone is the state, and a later
            // checkpoint that must make room on a full disk needs little.
            _ = try? queue.writeWithoutTransaction { db in try Row.fetchOne(db, sql: "PRAGMA wal_checkpoint(TRUNCATE)") }
            let applied = migrator.migrations.filter { !alreadyApplied.contains($0) }
            if !applied.isEmpty {
                logger.notice("Migrated the state database", metadata: [
                    "path": "\(path)", "migrations": "\(applied.joined(separator: ","))",
                ])
            }
            logger.info("Opened the state database", metadata: [
                "path": "\(path)", "schema": "\(migrator.migrations.last ?? "none")",
            ])
            return queue
        } catch let error as StoreError {
            try? queue.close()
            throw error
        } catch {
            try? queue.close()
            throw failure(error, path: path)
        }
    }

    /// The start-up checks, which only read.
    private static func check(_ db: Database, path: String, migrator: DatabaseMigrator) throws {
        // quick_check reports what it finds as rows, and may then fail on a
        // page it cannot read: keep both. A failure before any row is
        // reported by `failure(_:path:doing:)` like any other.
        var problems: [String] = []
        do {
            let rows = try String.fetchCursor(db, sql: "PRAGMA quick_check(3)")
            while let row = try rows.next() {
                problems.append(row.replacingOccurrences(of: "*** in database main ***\n", with: ""))
            }
        } catch let error as DatabaseError where !problems.isEmpty {
            problems.append(error.message ?? "\(error.resultCode)")
        }
        guard problems == ["ok"] else {
            throw StoreError(
                .corrupt, path: path,
                message: "\(path) is corrupt (SQLite quick_check: "
                    + "\(problems.joined(separator: "; ").replacingOccurrences(of: "\n", with: "; "))); "
                    + "refusing to start. \(moveAwayAdvice)")
        }
        let applicationID = try Int32.fetchOne(db, sql: "PRAGMA application_id") ?? 0
        if applicationID != Self.applicationID {
            let objects = try Int.fetchOne(db, sql: "SELECT count(*) FROM sqlite_master") ?? 0
            if applicationID != 0 || (objects > 0 && !isUnfinishedCreation(db, path: path)) {
                let hex = String(UInt32(bitPattern: applicationID), radix: 16)
                throw StoreError(
                    .notADatabase, path: path,
                    message: "\(path) is not a bgtaskd database (it is an SQLite database of another program: "
                        + "application_id 0x\(hex), \(objects) schema objects); refusing to start. \(moveAwayAdvice)")
            }
        }
        let unknown = try migrator.appliedIdentifiers(db).subtracting(migrator.migrations).sorted()
        guard unknown.isEmpty else {
            throw StoreError(
                .newerSchema, path: path,
                message: "\(path) was written by a newer bgtaskd (it has schema changes this version does not know: "
                    + "\(unknown.joined(separator: ", "))); refusing to start rather than lose them. "
                    + "Upgrade bgtaskd or move the file away.")
        }
    }

    /// Whether the database is one of bgtaskd's own whose creation stopped
    /// before its first migration landed (a full disk): its marker is there,
    /// and it holds only GRDB's list of migrations, with none in it. It is
    /// carried on; refused as another program's, it could never be used.
    private static func isUnfinishedCreation(_ db: Database, path: String) -> Bool {
        guard fileType(creationMarker(path)) == S_IFREG,
              (try? Int.fetchOne(db, sql: "SELECT count(*) FROM sqlite_master WHERE tbl_name != 'grdb_migrations'")) == 0
        else { return false }
        return (try? Int.fetchOne(db, sql: "SELECT count(*) FROM grdb_migrations")) == 0
    }

    // MARK: Errors

    private static func diskFullMessage(path: String, doing: String?, sqlite: String) -> String {
        (doing.map { "\(path): could not \($0)" } ?? "\(path) cannot be opened for writing")
            + ": the disk is full (\(sqlite)). Nothing was written; make room on its file system"
            + (doing == nil ? " and start bgtaskd again." : ": bgtaskd goes on and writes again once there is room.")
    }

    /// Whether the file system holding `path` has (next to) no room left for this user.
    static func diskIsFull(near path: String) -> Bool {
        var info = statvfs()
        let directory = path.split(separator: "/", omittingEmptySubsequences: false).dropLast().joined(separator: "/")
        guard statvfs(directory.isEmpty ? "/" : directory, &info) == 0 else { return false }
        // Root may use the reserved blocks too.
        let blocks = getuid() == 0 ? info.f_bfree : info.f_bavail
        let inodes = getuid() == 0 ? info.f_ffree : info.f_favail
        return UInt64(blocks) * UInt64(info.f_frsize) < 64 * 1024 || (info.f_files > 0 && inodes == 0)
    }

    /// A ``StoreError`` for an SQLite or system error: at start-up when `doing`
    /// is nil, else while trying to `doing`.
    static func failure(_ error: any Error, path: String, doing: String? = nil) -> StoreError {
        guard let databaseError = error as? DatabaseError else {
            let message = doing.map { "\(path): could not \($0): \(error)" }
                ?? "\(path) cannot be opened (\(error)); refusing to start."
            return StoreError(.operationFailed, path: path, message: message, underlying: error)
        }
        let sqlite = "SQLite: " + (databaseError.message ?? "\(databaseError.resultCode)")
        let code: StoreError.Code
        let message: String
        switch databaseError.resultCode {
        case .SQLITE_NOTADB, .SQLITE_CORRUPT:
            code = databaseError.resultCode == .SQLITE_NOTADB ? .notADatabase : .corrupt
            message = doing.map {
                "\(path): could not \($0) because the database is corrupt (\(sqlite)). "
                    + "Stop bgtaskd and move the file away (with its -wal and -shm files) to start afresh."
            } ?? "\(path) is not a bgtaskd database or is corrupt (\(sqlite)); refusing to start. \(moveAwayAdvice)"
        case .SQLITE_READONLY, .SQLITE_CANTOPEN, .SQLITE_PERM, .SQLITE_AUTH:
            code = .notWritable
            message = (doing.map { "\(path): could not \($0) (\(sqlite))" }
                ?? "\(path) cannot be opened for reading and writing (\(sqlite)); refusing to start")
                + ". Check the owner and mode of the file and of its directory."
        case .SQLITE_BUSY, .SQLITE_LOCKED:
            code = .busy
            message = (doing.map { "\(path): could not \($0)" } ?? "\(path) cannot be opened")
                + ": another process held it locked for more than \(Int(busyTimeout)) s (\(sqlite)). "
                + "Is another bgtaskd using the same state directory?"
        case .SQLITE_FULL:
            code = .diskFull
            message = diskFullMessage(path: path, doing: doing, sqlite: sqlite)
        // A write that ran out of room outside the database file itself (the
        // WAL index, a truncate) comes back as an I/O error: say what it is.
        case .SQLITE_IOERR where diskIsFull(near: path):
            code = .diskFull
            message = diskFullMessage(path: path, doing: doing, sqlite: sqlite)
        default:
            code = .operationFailed
            message = doing.map { "\(path): could not \($0) (\(sqlite))." }
                ?? "\(path) cannot be opened (\(sqlite)); refusing to start."
        }
        return StoreError(code, path: path, message: message, underlying: error)
    }
}
