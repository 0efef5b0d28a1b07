import Glibc
import Synchronization

/// Stops the bus and the daemon this process started when it is itself
/// interrupted (Ctrl-C, SIGTERM), so that they do not outlive it. Only those
/// two pids are signalled; the temporary directory stays behind in that case.
enum InterruptCleanup {
    /// The pids to stop, 0 when none (read from the signal handler: atomics only).
    static let busPID = Atomic<Int32>(0)
    static let daemonPID = Atomic<Int32>(0)

    static func install() {
        for signal in [SIGINT, SIGTERM, SIGHUP] {
            Glibc.signal(signal) { received in
                let daemon = InterruptCleanup.daemonPID.load(ordering: .relaxed)
                if daemon > 0 { kill(daemon, SIGKILL) }
                let bus = InterruptCleanup.busPID.load(ordering: .relaxed)
                if bus > 0 { kill(bus, SIGTERM) }
                // Die of the same signal, as if there were no handler.
                Glibc.signal(received, SIG_DFL)
                raise(received)
            }
        }
    }

    /// A reaped pid may be reused by an unrelated process: never signal it again.
    static func forget(_ pid: Int32) {
        _ = busPID.compareExchange(expected: pid, desired: 0, ordering: .relaxed)
        _ = daemonPID.compareExchange(expected: pid, desired: 0, ordering: .relaxed)
    }
}
