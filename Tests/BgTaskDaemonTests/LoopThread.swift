import Foundation
import SDBus
import Synchronization

/// Runs an ``EventLoop`` on a thread of its own, as the daemon runs its loop,
/// so that a test can drive loop-confined objects: ``sync(_:)`` runs a
/// closure on the loop's thread and waits for its result.
final class LoopThread: @unchecked Sendable {
    /// Carries a value between threads; the semaphore orders the accesses.
    private final class Box<T>: @unchecked Sendable {
        var value: T?
    }

    let loop: EventLoop
    private let inbox: Inbox
    private let finished = DispatchSemaphore(value: 0)
    private let running = Atomic<Bool>(true)

    init() throws {
        loop = try EventLoop()
        inbox = try loop.makeInbox()
        let thread = Thread { [self] in
            _ = try? loop.run()
            finished.signal()
        }
        thread.name = "test-loop"
        thread.start()
    }

    /// Runs `body` on the loop's thread and returns what it returned;
    /// throws once the loop is stopped.
    func sync<T>(_ body: @escaping () throws -> T) throws -> T {
        guard running.load(ordering: .acquiring) else { throw MockError("the loop thread is stopped") }
        let box = Box<Result<T, any Error>>()
        let done = DispatchSemaphore(value: 0)
        nonisolated(unsafe) let body = body
        inbox.post {
            box.value = Result { try body() }
            done.signal()
        }
        // A loop that stopped behind our back must fail the test, not hang it.
        guard done.wait(timeout: .now() + 30) == .success else { throw MockError("the loop thread did not answer within 30 s") }
        return try box.value!.get()
    }

    /// Polls `condition` on the loop's thread until it holds; false on timeout.
    func wait(timeout: Duration = .seconds(10), until condition: @escaping () -> Bool) -> Bool {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            if (try? sync(condition)) == true { return true }
            Thread.sleep(forTimeInterval: 0.01)
        }
        return (try? sync(condition)) == true
    }

    /// Stops the loop and waits for its thread to finish.
    func stop() {
        guard running.exchange(false, ordering: .acquiringAndReleasing) else { return }
        inbox.post { [self] in loop.exit(code: 0) }
        finished.wait()
    }

    deinit { stop() }
}
