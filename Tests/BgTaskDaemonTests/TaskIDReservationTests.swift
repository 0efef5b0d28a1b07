@testable import BgTaskDaemon
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
}
