import GRDB

extension StateStore {
    /// One step of the schema, applied once and recorded in `grdb_migrations`
    /// under its identifier.
    ///
    /// Rules for adding one: append, never edit or reorder a shipped step;
    /// name it `v<N>_<what>`; keep it additive where possible. A database that
    /// lists an identifier this build does not know was written by a newer
    /// bgtaskd and is refused (``StoreError/Code-swift.struct/newerSchema``).
    struct Migration: Sendable {
        let identifier: String
        let migrate: @Sendable (Database) throws -> Void

        init(_ identifier: String, migrate: @escaping @Sendable (Database) throws -> Void) {
            self.identifier = identifier
            self.migrate = migrate
        }

        init(_ identifier: String, sql: String) {
            self.init(identifier) { db in try db.execute(sql: sql) }
        }
    }

    /// `PRAGMA application_id` of a bgtaskd database: "bgtd" in ASCII. Lets
    /// `file(1)` and start-up tell our database from another program's.
    static let applicationID: Int32 = 0x6267_7464

    /// The schema of this build, oldest step first.
    static let migrations: [Migration] = [
        Migration("v1_initial", sql: """
            PRAGMA application_id = \(applicationID);

            -- Background App Refresh switches; app_id '' is the global switch.
            CREATE TABLE refresh_setting (
                app_id  TEXT    NOT NULL PRIMARY KEY,
                enabled INTEGER NOT NULL CHECK (enabled IN (0, 1))
            ) WITHOUT ROWID;

            -- When each app was in the foreground, in realtime µs since the epoch.
            -- end_usec is NULL while the interval is open; at most one open per app.
            CREATE TABLE usage_interval (
                id         INTEGER PRIMARY KEY,
                app_id     TEXT    NOT NULL,
                start_usec INTEGER NOT NULL CHECK (start_usec >= 0),
                end_usec   INTEGER CHECK (end_usec IS NULL OR end_usec >= start_usec)
            );
            CREATE INDEX usage_interval_by_app ON usage_interval (app_id, start_usec);
            CREATE UNIQUE INDEX usage_interval_open ON usage_interval (app_id) WHERE end_usec IS NULL;

            -- Opaque records that plugins keep (fetch registrations, results, offences, …).
            CREATE TABLE plugin_record (
                id         INTEGER PRIMARY KEY,
                plugin     TEXT NOT NULL,
                collection TEXT NOT NULL,
                key        TEXT NOT NULL,
                data       BLOB NOT NULL,
                UNIQUE (plugin, collection, key)
            );
            """),
        // Keyed by (plugin, collection, key) alone: a record written or deleted
        // touches one b-tree instead of the table and its index, so a commit
        // writes fewer pages to the WAL.
        Migration("v2_plugin_record_without_rowid", sql: """
            CREATE TABLE plugin_record_v2 (
                plugin     TEXT NOT NULL,
                collection TEXT NOT NULL,
                key        TEXT NOT NULL,
                data       BLOB NOT NULL,
                PRIMARY KEY (plugin, collection, key)
            ) WITHOUT ROWID;
            INSERT INTO plugin_record_v2 (plugin, collection, key, data)
                SELECT plugin, collection, key, data FROM plugin_record;
            DROP TABLE plugin_record;
            ALTER TABLE plugin_record_v2 RENAME TO plugin_record;
            """),
    ]

    /// A migrator for `migrations`.
    static func migrator(for migrations: [Migration]) -> DatabaseMigrator {
        var migrator = DatabaseMigrator()
        for migration in migrations {
            migrator.registerMigration(migration.identifier, migrate: migration.migrate)
        }
        return migrator
    }
}
