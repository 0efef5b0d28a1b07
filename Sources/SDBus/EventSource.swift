import CBgTaskShim
import CSystemd

/// An sd-event source and the Swift closure it calls. The source is disabled
/// and released when this object goes away, or earlier with ``cancel()``.
public final class EventSource {
    var handle: OpaquePointer?
    /// Keeps the closure box alive while sd-event holds its raw pointer.
    let retained: AnyObject?

    init(handle: OpaquePointer?, retained: AnyObject?) {
        self.handle = handle
        self.retained = retained
    }

    /// Stops the source for good.
    public func cancel() {
        if let handle {
            sd_event_source_disable_unref(handle)
            self.handle = nil
        }
    }

    deinit { cancel() }
}

/// A CLOCK_MONOTONIC timer that fires once when armed and can be re-armed
/// cheaply; accuracy is 1 µs, because deadlines are enforced to the ms.
public final class Timer {
    private let source: EventSource

    init(source: EventSource) {
        self.source = source
    }

    /// The instant (µs on CLOCK_MONOTONIC) the timer is armed for, nil when disarmed.
    public private(set) var armedAt: UInt64?

    /// Fires once at `usec` (on the timer's clock); nil disarms, and so does
    /// `UInt64.max` (never: what a saturated deadline comes to).
    public func arm(at usec: UInt64?) {
        let usec = usec == .max ? nil : usec
        guard usec != armedAt, let handle = source.handle else { return }
        armedAt = usec
        if let usec {
            sd_event_source_set_time(handle, usec)
            sd_event_source_set_enabled(handle, bgt_event_oneshot)
        } else {
            sd_event_source_set_enabled(handle, bgt_event_off)
        }
    }

    /// Called by the loop when the timer fired (it is then disarmed).
    func fired() { armedAt = nil }
}
