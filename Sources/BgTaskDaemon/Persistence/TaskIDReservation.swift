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

    /// Reads the stored end of the last reservation.
    private let load: () throws -> UInt32?
    /// Stores the end of a reservation.
    private let save: (UInt32) throws(StoreError) -> Void
    private let logger: Logger
    /// The last id this run may hand out before it reserves more.
    private(set) var reservedUpTo: UInt32 = 0

    init(store: StateStore, logger: Logger) {
        self.init(
            load: {
                guard let record = try store.records(plugin: Self.plugin, collection: Self.collection).first(where: { $0.key == Self.key })
                else { return nil }
                // A record that holds no number is unreadable, not absent: ids must not start again from 1.
                guard let end = UInt32(String(decoding: record.data, as: UTF8.self)) else {
                    throw StoreError(.corrupt, path: store.path, message: "its record holds no number")
                }
                return end
            },
            save: { (end) throws(StoreError) in
                try store.putRecord(plugin: Self.plugin, collection: Self.collection, key: Self.key, data: Array(String(end).utf8))
            },
            logger: logger)
    }

    /// With the record read and written by the given functions (for tests).
    init(load: @escaping () throws -> UInt32?, save: @escaping (UInt32) throws(StoreError) -> Void, logger: Logger) {
        self.load = load
        self.save = save
        self.logger = logger
    }

    /// Where this run's ids start (the first is one past it), given the
    /// stored end of the previous run's reservation.
    static func start(after stored: UInt32?) -> UInt32 {
        guard let stored, stored <= UInt32.max - 2 * block else { return 0 }
        return stored
    }

    /// Reads the previous reservation and reserves this run's first block;
    /// returns the id to continue after. A failed write is logged, and tried
    /// again before the first task (see ``reserve(through:)``).
    ///
    /// When the previous reservation cannot be read, ids start at a random
    /// place: from 1 they would meet the ids clients kept from the previous
    /// run for certain, from a random place only by a rare chance.
    mutating func begin() -> UInt32 {
        let start: UInt32
        do {
            start = Self.start(after: try load())
        } catch {
            start = UInt32.random(in: 1...(UInt32.max - 2 * Self.block))
            logger.warning("cannot read the task ids reserved by the previous run (\(error)); task ids start after \(start), a random place")
        }
        reserve(after: start)
        return start
    }

    /// Call before `id` goes out: past the reserved block, the next block is
    /// reserved first. Throws when that cannot be stored: the id must not go
    /// out then (after a crash it would be handed out again), and the task
    /// is refused, as every write is while the disk is full.
    mutating func reserve(through id: UInt32) throws(StoreError) {
        guard id > reservedUpTo else { return }
        if let failure = reserve(after: id - 1) { throw failure }
    }

    /// Stores the end of the block after `id`; the failure, logged once for a run of them.
    @discardableResult
    private mutating func reserve(after id: UInt32) -> StoreError? {
        let end = id > UInt32.max - Self.block ? UInt32.max : id + Self.block
        do {
            try save(end)
            reservedUpTo = end
            if failing {
                failing = false
                logger.notice("task ids are reserved again (up to \(end)): tasks can begin")
            }
            return nil
        } catch {
            // Tried again at the next task; until then no id past this one goes out.
            if !failing {
                failing = true
                logger.warning("cannot reserve task ids past \(id) (\(error)); new tasks are refused until it can")
            }
            reservedUpTo = id
            return error
        }
    }

    /// The last reservation failed (logged once until one succeeds).
    private var failing = false
}
