import Synchronization

/// Wake events (`PerformFetch`, `NotificationReceived`, `RegionEvent`,
/// `SignificantLocationChange`) on their way to the handler the app installs
/// for them.
///
/// The daemon sends the events waiting for a launched app right after the
/// `CheckIn` reply, which is usually before the app has installed its
/// handler. Events are therefore queued here until a handler is set, then
/// handed to it in the order they arrived, one at a time.
///
/// ``received(_:)`` and ``drain()`` run on the SDK's thread only, so the
/// handler is never called twice at once; ``setDeliver(_:)`` and
/// ``discardQueued()`` may be called from anywhere (the caller then asks the
/// SDK's thread to drain).
final class WakeDispatcher<Event: Sendable>: Sendable {
    /// Hands one event to the app (builds its completion and calls its handler).
    typealias Deliver = @Sendable (Event) -> Void

    private struct State {
        var deliver: Deliver?
        var queue: [Event] = []
    }

    /// At most this many events wait for a handler; older ones are dropped
    /// (the daemon expires their wakes anyway once their budget is spent).
    let maxQueued: Int

    private let state = Mutex(State())

    init(maxQueued: Int) {
        self.maxQueued = maxQueued
    }

    /// An event from the daemon (SDK thread).
    func received(_ event: Event) {
        state.withLock { state in
            state.queue.append(event)
            if state.queue.count > maxQueued { state.queue.removeFirst(state.queue.count - maxQueued) }
        }
        drain()
    }

    /// Installs (or replaces) where events go. Call ``drain()`` on the SDK's
    /// thread afterwards to hand over what was queued.
    func setDeliver(_ deliver: @escaping Deliver) {
        state.withLock { $0.deliver = deliver }
    }

    /// Hands every queued event to the handler, if one is set (SDK thread).
    func drain() {
        while let (deliver, event) = state.withLock({ state -> (Deliver, Event)? in
            guard let deliver = state.deliver, !state.queue.isEmpty else { return nil }
            return (deliver, state.queue.removeFirst())
        }) {
            deliver(event)
        }
    }

    /// Forgets the events not yet delivered: the daemon that sent them left.
    func discardQueued() {
        state.withLock { $0.queue.removeAll() }
    }
}

/// `PerformFetch` tokens waiting for the fetch handler.
typealias FetchDispatcher = WakeDispatcher<String>

/// One `NotificationReceived`: the wake's token and the push's payload.
struct NotificationSignal: Sendable {
    var token: String
    var payloadJSON: String
}

/// `NotificationReceived` signals waiting for the notification handler.
typealias NotificationDispatcher = WakeDispatcher<NotificationSignal>

/// One `RegionEvent` or `SignificantLocationChange`: the wake's token and
/// the event; nil when the daemon named a crossing this SDK does not know
/// (the SDK then completes it without bothering the app).
struct LocationSignal: Sendable {
    var token: String
    var event: LocationEvent?
}

/// Location events waiting for the location handler.
typealias LocationDispatcher = WakeDispatcher<LocationSignal>

/// Lets a completion through once: the completion handlers the SDK gives
/// the app's fetch, notification and location handlers send their answer
/// the first time they are called and do nothing after.
final class CompletionLatch: Sendable {
    private let used = Mutex(false)

    /// True the first time only.
    func claim() -> Bool {
        used.withLock { used in
            defer { used = true }
            return !used
        }
    }
}

/// One `TransferFinished`: the wake's token and the transfer's result.
struct TransferSignal: Sendable {
    var token: String
    var result: TransferResult
    /// How many results the token carries (1 from a daemon that does not say).
    var tokenTransfers: Int
}

/// `TransferFinished` signals waiting for the transfer handler.
typealias TransferDispatcher = WakeDispatcher<TransferSignal>
