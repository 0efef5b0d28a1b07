import Synchronization

/// A one-shot event that one task can wait for: fired by an expiration
/// handler (on the SDK's thread), awaited by ``BackgroundTaskManager/withBackgroundTask(name:_:)``.
final class ExpirySignal: Sendable {
    private enum State {
        case waiting(CheckedContinuation<Void, Never>?)
        case fired
    }

    private let state = Mutex(State.waiting(nil))

    /// Fires the event; later calls do nothing.
    func fire() {
        let waiter = state.withLock { state -> CheckedContinuation<Void, Never>? in
            guard case .waiting(let waiter) = state else { return nil }
            state = .fired
            return waiter
        }
        waiter?.resume()
    }

    /// Returns once the event fired or the waiting task is cancelled.
    func wait() async {
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let resumeNow = state.withLock { state -> Bool in
                    guard case .waiting = state, !Task.isCancelled else { return true }
                    state = .waiting(continuation)
                    return false
                }
                if resumeNow { continuation.resume() }
            }
        } onCancel: {
            fire()
        }
    }
}
