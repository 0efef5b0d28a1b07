import BgTaskCore
import Logging

/// Task ids that are not handed out again after a restart: a client that
/// kept an id from an earlier run (an SDK ending a task begun before the
/// daemon was killed) must not end a task of this run that got the same id.
///
/// The database keeps the end of a block of ids reserved for the running
/// daemon; a run starts past it and reserves the next block before it hands
/// out the first id, and a further one when it reaches the end of a block.
/// So a crash never costs more than one block, and no id is written per task.
/// When fewer than two blocks are left, a run starts again from 1.
struct TaskIDReservation {
    /// Ids reserved at once.
    static let block: UInt32 = 1 << 16
    /// The record's place: no plugin can have a name with a slash.
    static let plugin = "/daemon"
    static let collection = "tasks"
    static let key = "reserved-ids"

    private let store: StateStore
    private let logger: Logger
    /// The last id this run may hand out before it reserves more.
    private(set) var reservedUpTo: UInt32 = 0

    init(store: StateStore, logger: Logger) {
        self.store = store
        self.logger = logger
    }

    /// Where this run's ids start (the first is one past it), given the
    /// stored end of the previous run's reservation.
    static func start(after stored: UInt32?) -> UInt32 {
        guard let stored, stored <= UInt32.max - 2 * block else { return 0 }
        return stored
    }

    /// Reads the previous reservation and reserves this run's first block;
    /// returns the id to continue after. A failed write is logged: ids then
    /// go on from the stored end, and only a second crash could reuse them.
    mutating func begin() -> UInt32 {
        var stored: UInt32?
        do {
            let record = try store.records(plugin: Self.plugin, collection: Self.collection).first { $0.key == Self.key }
            stored = record.flatMap { UInt32(String(decoding: $0.data, as: UTF8.self)) }
        } catch {
            logger.warning("cannot read the task ids reserved by the previous run (\(error)); task ids start again from 1")
        }
        let start = Self.start(after: stored)
        reserve(after: start)
        return start
    }

    /// Reserves the next block once `lastID` has reached the end of this one.
    mutating func issued(_ lastID: UInt32) {
        guard lastID >= reservedUpTo else { return }
        reserve(after: lastID)
    }

    private mutating func reserve(after id: UInt32) {
        let end = id > UInt32.max - Self.block ? UInt32.max : id + Self.block
        do {
            try store.putRecord(plugin: Self.plugin, collection: Self.collection, key: Self.key, data: Array(String(end).utf8))
            reservedUpTo = end
        } catch {
            // Tried again at the next task; until then ids go on unreserved.
            logger.warning("cannot reserve task ids up to \(end) (\(error)); after a crash, ids from \(id + 1) on may be handed out again")
            reservedUpTo = id
        }
    }
}
