import Glibc
import SDBus

/// A stand-in for logind (`org.freedesktop.login1`) on a private system bus:
/// `Inhibit` hands out the write end of a pipe and keeps the read end, so the
/// instant the holder closes its lock shows as a hang-up here, to the
/// microsecond; `PrepareForSleep` is emitted on demand. No event loop: the
/// owner polls ``bus``'s fd and the locks, and calls ``process()``.
final class FakeLogind {
    let bus: Bus
    private var object: ExportedObject?
    /// Read ends of the locks handed out and not yet seen closed.
    private(set) var locks: [Int32] = []
    /// How many `Inhibit` calls came.
    private(set) var inhibitCalls = 0

    init(address: String, delayMax: UInt64 = 5_000_000) throws {
        bus = try Bus.open(Bus.Address(parsing: address), description: "bench-logind")
        let inhibit = BusMethod(
            "Inhibit", inputs: [.init("what", "s"), .init("who", "s"), .init("why", "s"), .init("mode", "s")],
            outputs: [.init("fd", "h")]
        ) { [unowned self] (call) throws(BusError) in
            var ends: [Int32] = [-1, -1]
            guard pipe(&ends) == 0 else { throw BusError.errno(-Glibc.errno, "making a lock") }
            for fd in ends { _ = fcntl(fd, F_SETFD, FD_CLOEXEC) }
            defer { close(ends[1]) }  // the reply carries a copy
            try call.reply { (reply) throws(BusError) in try reply.append(unixFD: ends[1]) }
            self.locks.append(ends[0])
            self.inhibitCalls += 1
        }
        object = try bus.export(
            BusInterface(
                name: "org.freedesktop.login1.Manager", methods: [inhibit],
                signals: [BusSignal("PrepareForSleep", [.init("start", "b")])],
                properties: [BusProperty("InhibitDelayMaxUSec", "t", change: .constant) { (reply) throws(BusError) in
                    try reply.append(delayMax)
                }]),
            at: "/org/freedesktop/login1")
        try bus.requestName("org.freedesktop.login1")
    }

    deinit {
        for fd in locks { close(fd) }
    }

    /// Dispatches everything that arrived.
    func process() throws {
        while try bus.processPending() {}
    }

    /// Emits `PrepareForSleep(sleeping)` and sends it out.
    func prepareForSleep(_ sleeping: Bool) throws {
        let signal = try bus.newSignal(path: "/org/freedesktop/login1", interface: "org.freedesktop.login1.Manager", member: "PrepareForSleep")
        try signal.append(sleeping)
        try bus.send(signal)
        bus.flush()
    }

    /// Waits up to `timeout` s, answering calls meanwhile, until a lock is
    /// closed by its holder; returns the instant (CLOCK_MONOTONIC ns) it was seen, nil on timeout.
    func waitForRelease(timeout: Double) throws -> Int64? {
        try wait(timeout: timeout) {
            guard let index = locks.firstIndex(where: Self.isClosed) else { return nil }
            close(locks.remove(at: index))
            return MonotonicTime.nanoseconds()
        }
    }

    /// Waits up to `timeout` s, answering calls meanwhile, until `count` locks are held.
    func waitForLocks(_ count: Int, timeout: Double) throws -> Bool {
        try wait(timeout: timeout) { locks.count >= count ? true : nil } ?? false
    }

    /// Polls the bus and the locks until `done` returns a value or `timeout` passes.
    private func wait<T>(timeout: Double, _ done: () throws -> T?) throws -> T? {
        let deadline = MonotonicTime.nanoseconds() + Int64(timeout * 1e9)
        while true {
            try process()
            if let value = try done() { return value }
            let left = deadline - MonotonicTime.nanoseconds()
            if left <= 0 { return nil }
            var pollers = [pollfd(fd: bus.fd, events: Int16(POLLIN), revents: 0)]
                + locks.map { pollfd(fd: $0, events: Int16(POLLIN), revents: 0) }
            _ = poll(&pollers, nfds_t(pollers.count), Int32(min(left / 1_000_000 + 1, 100)))
        }
    }

    /// A lock whose write end is closed everywhere: the pipe reports a hang-up.
    private static func isClosed(_ fd: Int32) -> Bool {
        var poller = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        return poll(&poller, 1, 0) > 0 && poller.revents & Int16(POLLHUP) != 0
    }
}
