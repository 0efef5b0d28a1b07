import ArgumentParser
import CBgTaskShim
import Foundation
import Glibc
import SDBus

/// The overstaying app that `expiry` spawns: it opens a task, goes to the
/// background and never ends the task, then waits for the daemon's SIGTERM.
///
/// It prints one line for its parent,
///
///     term t0=<ns> t1=<ns> sigterm=<ns> steal=<ticks> dlo=<ns> dhi=<ns> remaining=<s>
///
/// with CLOCK_MONOTONIC instants: t0 just before `SetApplicationState("background")`,
/// t1 after its reply, `sigterm` when the signal was taken. `dlo`…`dhi` is
/// where the daemon's deadline lies by its own account: a
/// `GetBackgroundTimeRemaining` answer r, read live by the daemon at some
/// instant between sending the call (s) and its reply (e), puts the deadline
/// in [s + r, e + r]; the victim asks a few times and keeps the intersection.
/// `remaining` is the first answer (to check the budget). `steal` is the
/// hypervisor's steal time (/proc/stat, 10 ms ticks, all CPUs) from 30 ms
/// before the deadline until SIGTERM came, -1 if unknown: an expiry
/// disturbed by the host is then known as such. On a timeout the
/// line starts with `timeout`, on a failure with `error`.
struct VictimCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "victim",
        abstract: "An app that overstays its background time (spawned by `expiry`).",
        shouldDisplay: false)

    @OptionGroup var target: BusOptions

    @Option(help: "Seconds to wait for SIGTERM before giving up.")
    var timeout = 30.0

    @Option(help: "GetBackgroundTimeRemaining calls that locate the daemon's deadline.")
    var queries = 3

    func run() throws {
        // Blocked before anything else: the signal then waits for sigtimedwait
        // instead of killing the process, and every later thread inherits the mask.
        _ = bgt_block_signal(SIGTERM)
        let line: String
        do {
            let client = try target.connect()
            _ = try client.begin("victim")
            let t0 = MonotonicTime.nanoseconds()
            try client.setState("background")
            let t1 = MonotonicTime.nanoseconds()
            var remaining: Double?
            var deadline = (low: Int64.min, high: Int64.max)
            for _ in 0..<queries {
                let sent = MonotonicTime.nanoseconds()
                let answer = try client.timeRemaining()
                let replied = MonotonicTime.nanoseconds()
                let left = Int64((answer * 1e9).rounded())
                deadline = (max(deadline.low, sent + left), min(deadline.high, replied + left))
                remaining = remaining ?? answer
            }
            let bounds = "dlo=\(deadline.low) dhi=\(deadline.high) remaining=\(remaining ?? .nan)"
            // Dispatch the bus from here on, as an app's bus library does: the
            // daemon sends SIGTERM once TaskExpired was taken in (a Peer.Ping answered).
            Self.dispatch(client.bus)
            // Wake up shortly before the deadline to note the steal time so far.
            var received = Self.waitForSIGTERM(until: deadline.low == .min ? t1 : deadline.low - 30_000_000)
            let stealBefore = received == nil ? CPUTimes.now()?.steal : nil
            if received == nil {
                received = Self.waitForSIGTERM(until: MonotonicTime.nanoseconds() + Int64(timeout * 1e9))
            }
            let steal = stealBefore.flatMap { before in CPUTimes.now().map { $0.steal - before } } ?? -1
            if let received {
                line = "term t0=\(t0) t1=\(t1) sigterm=\(received) steal=\(steal) \(bounds)"
            } else {
                line = "timeout t0=\(t0) t1=\(t1) \(bounds)"
            }
        } catch {
            line = "error \(error)"
        }
        say(line)
        // Leave at once: the daemon's SIGKILL follows if this process lingers.
        _exit(0)
    }

    /// Answers the bus (Peer.Ping included) on a thread of its own; the main
    /// thread no longer uses the connection.
    private static func dispatch(_ bus: Bus) {
        nonisolated(unsafe) let bus = bus
        let thread = Thread {
            while true {
                while (try? bus.processPending()) == true {}
                do { try bus.wait(timeout: .max) } catch { return }
            }
        }
        thread.start()
    }

    /// The CLOCK_MONOTONIC instant (ns) SIGTERM was taken, or nil at `until` (ns).
    private static func waitForSIGTERM(until end: Int64) -> Int64? {
        var set = sigset_t()
        sigemptyset(&set)
        sigaddset(&set, SIGTERM)
        var now = MonotonicTime.nanoseconds()
        while true {
            let left = max(0, end - now)
            var limit = timespec(tv_sec: Int(left / 1_000_000_000), tv_nsec: Int(left % 1_000_000_000))
            let r = sigtimedwait(&set, nil, &limit)
            now = MonotonicTime.nanoseconds()
            if r == SIGTERM { return now }
            if r < 0 && errno == EINTR && now < end { continue }
            return nil
        }
    }
}
