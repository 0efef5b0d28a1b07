import CBgTaskShim
import CSystemd
import Glibc

/// An sd-event loop. Everything attached to it runs on the thread that calls
/// ``run()``, one callback at a time; only ``Inbox`` may be used from other threads.
public final class EventLoop {
    /// The `sd_event *`.
    public let handle: OpaquePointer

    /// A new loop of its own (not the thread's default), so that an SDK loop
    /// and the host app's never collide.
    public init() throws(BusError) {
        var event: OpaquePointer?
        try check(sd_event_new(&event), "sd_event_new")
        handle = event!
    }

    deinit { sd_event_unref(handle) }

    /// Runs until ``exit(code:)``; returns the exit code.
    @discardableResult
    public func run() throws(BusError) -> Int32 {
        try check(sd_event_loop(handle), "sd_event_loop")
    }

    /// Makes ``run()`` return `code` after the current callback.
    public func exit(code: Int32 = 0) {
        sd_event_exit(handle, code)
    }

    /// The loop's idea of now on CLOCK_MONOTONIC (µs), cached per iteration.
    public var now: UInt64 {
        var usec: UInt64 = 0
        if sd_event_now(handle, CLOCK_MONOTONIC, &usec) < 0 { return bgt_monotonic_usec() }
        return usec
    }

    /// The clock a timer counts on.
    public enum TimerClock: Sendable {
        /// CLOCK_MONOTONIC: stops while the machine sleeps.
        case monotonic
        /// CLOCK_REALTIME: wall-clock time, for times that survive restarts and suspends.
        case realtime

        var id: clockid_t { self == .monotonic ? CLOCK_MONOTONIC : CLOCK_REALTIME }
    }

    /// A disarmed one-shot timer on `clock` (µs on that clock); arm it with ``Timer/arm(at:)``.
    /// `priority` orders it against other sources ready at once (lower runs
    /// first; the bus is attached at 0).
    public func makeTimer(clock: TimerClock = .monotonic, priority: Int64 = 0, _ handler: @escaping () -> Void) throws(BusError) -> Timer {
        final class Box {
            let handler: () -> Void
            weak var timer: Timer?
            init(_ handler: @escaping () -> Void) { self.handler = handler }
        }
        let box = Box(handler)
        var source: OpaquePointer?
        try check(
            sd_event_add_time(handle, &source, clock.id, .max, 1, { _, _, userdata in
                let box = Unmanaged<Box>.fromOpaque(userdata!).takeUnretainedValue()
                box.timer?.fired()
                box.handler()
                return 0
            }, Unmanaged.passUnretained(box).toOpaque()),
            "sd_event_add_time")
        sd_event_source_set_enabled(source, bgt_event_off)
        if priority != 0 { sd_event_source_set_priority(source, priority) }
        let timer = Timer(source: EventSource(handle: source, retained: box))
        box.timer = timer
        return timer
    }

    /// Calls `handler` with the returned events whenever `fd` is ready for `events` (EPOLLIN …).
    public func watch(fd: Int32, events: UInt32, _ handler: @escaping (UInt32) -> Void) throws(BusError) -> EventSource {
        final class Box {
            let handler: (UInt32) -> Void
            init(_ handler: @escaping (UInt32) -> Void) { self.handler = handler }
        }
        let box = Box(handler)
        var source: OpaquePointer?
        try check(
            sd_event_add_io(handle, &source, fd, events, { _, _, revents, userdata in
                Unmanaged<Box>.fromOpaque(userdata!).takeUnretainedValue().handler(revents)
                return 0
            }, Unmanaged.passUnretained(box).toOpaque()),
            "sd_event_add_io")
        return EventSource(handle: source, retained: box)
    }

    /// Calls `handler` when `signal` arrives. The signal is blocked in the
    /// calling thread first, as sd-event requires; call this before starting
    /// other threads so that they inherit the mask.
    public func onSignal(_ signal: Int32, _ handler: @escaping () -> Void) throws(BusError) -> EventSource {
        final class Box {
            let handler: () -> Void
            init(_ handler: @escaping () -> Void) { self.handler = handler }
        }
        try check(bgt_block_signal(signal), "blocking signal \(signal)")
        let box = Box(handler)
        var source: OpaquePointer?
        try check(
            sd_event_add_signal(handle, &source, signal, { _, _, userdata in
                Unmanaged<Box>.fromOpaque(userdata!).takeUnretainedValue().handler()
                return 0
            }, Unmanaged.passUnretained(box).toOpaque()),
            "sd_event_add_signal")
        return EventSource(handle: source, retained: box)
    }

    /// Runs `job` once on this loop's thread, after the current callback
    /// (for work that must not run inside the callback that asks for it).
    public func later(_ job: @escaping () -> Void) {
        final class Box {
            let job: () -> Void
            var source: EventSource?
            init(_ job: @escaping () -> Void) { self.job = job }
        }
        let box = Box(job)
        let userdata = Unmanaged.passRetained(box).toOpaque()
        var source: OpaquePointer?
        let r = sd_event_add_defer(handle, &source, { _, userdata in
            let box = Unmanaged<Box>.fromOpaque(userdata!).takeRetainedValue()
            box.job()
            box.source = nil  // disables and frees this one-shot source
            return 0
        }, userdata)
        guard r >= 0 else {
            Unmanaged<Box>.fromOpaque(userdata).release()
            job()
            return
        }
        sd_event_source_set_enabled(source, bgt_event_oneshot)
        box.source = EventSource(handle: source, retained: nil)
    }

    /// A job to run after the current callback whenever it is scheduled (see ``DeferredJob``).
    public func makeDeferred(_ job: @escaping () -> Void) throws(BusError) -> DeferredJob {
        final class Box {
            let job: () -> Void
            init(_ job: @escaping () -> Void) { self.job = job }
        }
        let box = Box(job)
        var source: OpaquePointer?
        try check(
            sd_event_add_defer(handle, &source, { _, userdata in
                Unmanaged<Box>.fromOpaque(userdata!).takeUnretainedValue().job()
                return 0
            }, Unmanaged.passUnretained(box).toOpaque()),
            "sd_event_add_defer")
        sd_event_source_set_enabled(source, bgt_event_off)
        return DeferredJob(source: EventSource(handle: source, retained: box))
    }

    /// A thread-safe way to run closures on this loop.
    public func makeInbox() throws(BusError) -> Inbox {
        try Inbox(loop: self)
    }
}
