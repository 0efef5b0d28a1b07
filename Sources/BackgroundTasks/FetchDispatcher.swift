import Synchronization

/// `PerformFetch` tokens on their way to the app's fetch handler.
///
/// The daemon sends the events waiting for a launched app right after the
/// `CheckIn` reply, which is usually before the app has installed its fetch
/// handler. Tokens are therefore queued here until a handler is set, then
/// handed to it in the order they arrived, one at a time.
///
/// ``received(_:)`` and ``drain()`` run on the SDK's thread only, so the
/// handler is never called twice at once; ``setDeliver(_:)`` and
/// ``discardQueued()`` may be called from anywhere (the caller then asks the
/// SDK's thread to drain).
final class FetchDispatcher: Sendable {
    /// Hands one token to the app (builds its completion and calls its handler).
    typealias Deliver = @Sendable (String) -> Void

    private struct State {
        var deliver: Deliver?
        var queue: [String] = []
    }

    /// At most this many tokens wait for a handler; older ones are dropped (the
    /// daemon expires them anyway after `Fetch.WakeBudgetSec`).
    static let maxQueued = 64

    private let state = Mutex(State())

    /// A `PerformFetch` from the daemon (SDK thread).
    func received(_ token: String) {
        state.withLock { state in
            state.queue.append(token)
            if state.queue.count > Self.maxQueued { state.queue.removeFirst(state.queue.count - Self.maxQueued) }
        }
        drain()
    }

    /// Installs (or replaces) where tokens go. Call ``drain()`` on the SDK's
    /// thread afterwards to hand over what was queued.
    func setDeliver(_ deliver: @escaping Deliver) {
        state.withLock { $0.deliver = deliver }
    }

    /// Hands every queued token to the handler, if one is set (SDK thread).
    func drain() {
        while let (deliver, token) = state.withLock({ state -> (Deliver, String)? in
            guard let deliver = state.deliver, !state.queue.isEmpty else { return nil }
            return (deliver, state.queue.removeFirst())
        }) {
            deliver(token)
        }
    }

    /// Forgets the tokens not yet delivered: the daemon that gave them left.
    func discardQueued() {
        state.withLock { $0.queue.removeAll() }
    }
}
