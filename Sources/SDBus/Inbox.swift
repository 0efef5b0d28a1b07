import CBgTaskShim
import Glibc
import Synchronization

/// Hands closures from any thread to an ``EventLoop``'s thread, through an
/// eventfd the loop watches. Closures run in the order they were posted.
///
/// ``post(_:)`` may be called from any thread; the inbox itself must be
/// released on the loop's thread (or after the loop stopped running), because
/// releasing it removes its event source from the loop.
public final class Inbox: Sendable {
    private let fd: Int32
    private let jobs = Mutex<[@Sendable () -> Void]>([])
    private nonisolated(unsafe) var source: EventSource?

    init(loop: EventLoop) throws(BusError) {
        let fd = try check(bgt_eventfd(), "eventfd")
        self.fd = fd
        // The closure holds the inbox weakly: the loop must not keep it alive.
        source = try loop.watch(fd: fd, events: UInt32(EPOLLIN.rawValue)) { [weak self] _ in self?.drain() }
    }

    deinit {
        source?.cancel()
        close(fd)
    }

    /// Runs `job` on the loop's thread, soon.
    public func post(_ job: @escaping @Sendable () -> Void) {
        let wasEmpty = jobs.withLock { queue in
            queue.append(job)
            return queue.count == 1
        }
        if wasEmpty { _ = bgt_eventfd_signal(fd) }
    }

    private func drain() {
        _ = bgt_eventfd_drain(fd)
        let batch = jobs.withLock { queue in
            defer { queue.removeAll(keepingCapacity: true) }
            return queue
        }
        for job in batch { job() }
    }
}
