import BackgroundTasks
import Synchronization

/// The test app's open tasks, so that each is ended (or reported expired)
/// once, and the app knows when all are closed.
final class TaskBook: Sendable {
    private struct State {
        var open: Set<BackgroundTaskIdentifier> = []
        /// Closed before `opened` was called (expiry of a task begun in the warning window).
        var closed: Set<BackgroundTaskIdentifier> = []
        var waiters: [CheckedContinuation<Void, Never>] = []
    }

    private let state = Mutex(State())

    /// A task was begun.
    func opened(_ id: BackgroundTaskIdentifier) {
        state.withLock { state in
            if !state.closed.contains(id) { state.open.insert(id) }
        }
    }

    /// A task was ended or expired; false when it was closed already.
    @discardableResult
    func closed(_ id: BackgroundTaskIdentifier) -> Bool {
        let (first, waiters) = state.withLock { state -> (Bool, [CheckedContinuation<Void, Never>]) in
            let first = state.closed.insert(id).inserted
            state.open.remove(id)
            guard state.open.isEmpty else { return (first, []) }
            defer { state.waiters.removeAll() }
            return (first, state.waiters)
        }
        for waiter in waiters { waiter.resume() }
        return first
    }

    /// Whether the task was ended or expired.
    func isClosed(_ id: BackgroundTaskIdentifier) -> Bool {
        state.withLock { $0.closed.contains(id) }
    }

    /// The tasks still open, by id.
    var openTasks: [BackgroundTaskIdentifier] {
        state.withLock { $0.open.sorted { $0.rawValue < $1.rawValue } }
    }

    /// Returns once no task is open.
    func waitUntilAllClosed() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let done = state.withLock { state -> Bool in
                if state.open.isEmpty { return true }
                state.waiters.append(continuation)
                return false
            }
            if done { continuation.resume() }
        }
    }
}
