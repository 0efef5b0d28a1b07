import CBgTaskShim
import SDBus

/// Connects again to the system bus after it went away (the bus daemon
/// crashed or was restarted): tries after 1 s, then at doubling intervals up
/// to a minute, until `attempt` succeeds. Only after a loss: a machine with
/// no system bus at start-up is not polled for one.
final class SystemBusReconnection {
    static let firstDelay: UInt64 = 1_000_000
    static let longestDelay: UInt64 = 60_000_000

    private let loop: EventLoop
    private let attempt: () -> Bool
    private var timer: SDBus.Timer?
    private var delay = SystemBusReconnection.firstDelay
    /// When the last attempt succeeded (monotonic µs): a connection lost soon
    /// after is tried again at the longer interval, not every second.
    private var connectedAt: UInt64 = 0
    static let steadyAfter: UInt64 = 30_000_000

    /// `attempt` connects and follows what it followed before; true when it could.
    init(loop: EventLoop, attempt: @escaping () -> Bool) {
        self.loop = loop
        self.attempt = attempt
    }

    /// The connection `bus` (with its match `slots`) went away: releases it
    /// after the current callback, not inside its own dispatch, and starts trying.
    func lost(_ bus: Bus?, _ slots: [Slot]) {
        loop.later { _ = (slots, bus) }
        start()
    }

    private func start() {
        let now = bgt_monotonic_usec()
        delay = now &- connectedAt >= Self.steadyAfter ? Self.firstDelay : min(delay * 2, Self.longestDelay)
        arm()
    }

    func cancel() {
        timer?.arm(at: nil)
    }

    private func arm() {
        if timer == nil { timer = try? loop.makeTimer { [weak self] in self?.fire() } }
        timer?.arm(at: bgt_monotonic_usec() + delay)
    }

    private func fire() {
        guard !attempt() else {
            connectedAt = bgt_monotonic_usec()
            return
        }
        delay = min(delay * 2, Self.longestDelay)
        arm()
    }
}
