@testable import BgTaskDaemon
import Synchronization
import Testing

/// Where a run's task ids start, from what the previous run reserved.
@Suite struct TaskIDReservationTests {
    @Test func aRunStartsPastThePreviousReservationOrFromOneWhenTooFewAreLeft() {
        let block = TaskIDReservation.block
        #expect(TaskIDReservation.start(after: nil) == 0)
        #expect(TaskIDReservation.start(after: 5) == 5)
        #expect(TaskIDReservation.start(after: UInt32.max - 2 * block) == UInt32.max - 2 * block)
        #expect(TaskIDReservation.start(after: UInt32.max - 2 * block + 1) == 0)
        #expect(TaskIDReservation.start(after: UInt32.max) == 0)
    }

    /// A previous reservation that cannot be read started ids again from 1,
    /// the very ids clients of the previous run may have kept.
    @Test func idsStartAtARandomPlaceWhenThePreviousReservationCannotBeRead() {
        struct Unreadable: Error {}
        let log = RecordingLog()
        let stored = Mutex<UInt32?>(nil)
        let starts = (0..<2).map { _ in
            var reservation = TaskIDReservation(
                load: { throw Unreadable() },
                save: { (end) throws(StoreError) in stored.withLock { $0 = end } },
                logger: log.logger)
            let start = reservation.begin()
            #expect(start > 0 && start <= UInt32.max - 2 * TaskIDReservation.block)
            #expect(stored.withLock { $0 } == start + TaskIDReservation.block, "the block after it is reserved")
            return start
        }
        #expect(starts[0] != starts[1])
        #expect(log.all.filter { $0.message.contains("a random place") }.count == 2, "\(log.all)")
    }

    /// A stored reservation that held no number was taken for none, and ids
    /// started again from 1 without a word (found by an outside test).
    @Test func aStoredReservationThatHoldsNoNumberIsUnreadable() throws {
        let directory = try TemporaryDirectory()
        let store = try StateStore(directory: directory.root, logger: RecordingLog().logger)
        defer { store.close() }
        try store.putRecord(plugin: TaskIDReservation.plugin, collection: TaskIDReservation.collection,
                            key: TaskIDReservation.key, data: Array("garbage".utf8))
        let log = RecordingLog()
        var reservation = TaskIDReservation(store: store, logger: log.logger)
        #expect(reservation.begin() > 0)
        #expect(log.all.contains { $0.message.contains("its record holds no number") }, "\(log.all)")
    }

    /// A reservation that cannot be stored (a full disk) lets no id past the
    /// stored block go out: it would be handed out again after a crash. The
    /// failure is logged once, and ids go on once it can be stored.
    @Test func noIDPastTheStoredReservationGoesOutWhenTheReservationFails() throws {
        let log = RecordingLog()
        let stored = Mutex<UInt32?>(nil)
        let full = Mutex(false)
        var reservation = TaskIDReservation(
            load: { stored.withLock { $0 } },
            save: { (end) throws(StoreError) in
                if full.withLock({ $0 }) { throw StoreError(.diskFull, path: "/state", message: "/state: the disk is full") }
                stored.withLock { $0 = end }
            },
            logger: log.logger)
        let block = TaskIDReservation.block
        #expect(reservation.begin() == 0)
        #expect(stored.withLock { $0 } == block)
        try reservation.reserve(through: block)
        full.withLock { $0 = true }
        for _ in 0..<3 {
            #expect(throws: StoreError.self) { try reservation.reserve(through: block + 1) }
        }
        #expect(reservation.reservedUpTo == block)
        #expect(log.all.filter { $0.message.contains("cannot reserve task ids") }.count == 1, "\(log.all)")
        full.withLock { $0 = false }
        try reservation.reserve(through: block + 1)
        #expect(stored.withLock { $0 } == 2 * block)
        #expect(log.all.contains { $0.message.contains("reserved again") })
    }
}
