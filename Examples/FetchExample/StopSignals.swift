import Dispatch
import Synchronization

/// The first stop signal (SIGTERM, SIGINT) the process received, as a value
/// a task can await: the user-started app runs until then. The dispatch
/// sources that feed it are the caller's to keep alive.
final class StopSignals: Sendable {
    private struct State {
        var received: String?
        var waiters: [CheckedContinuation<String, Never>] = []
    }

    private let state = Mutex(State())

    /// A signal arrived (on a dispatch queue).
    func received(_ name: String) {
        let waiters = state.withLock { state -> [CheckedContinuation<String, Never>] in
            guard state.received == nil else { return [] }
            state.received = name
            defer { state.waiters.removeAll() }
            return state.waiters
        }
        for waiter in waiters { waiter.resume(returning: name) }
    }

    /// Returns the signal's name once one arrived.
    func next() async -> String {
        await withCheckedContinuation { continuation in
            let name = state.withLock { state -> String? in
                if let received = state.received { return received }
                state.waiters.append(continuation)
                return nil
            }
            if let name { continuation.resume(returning: name) }
        }
    }
}
