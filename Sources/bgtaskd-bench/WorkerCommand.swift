import ArgumentParser
import CBgTaskShim
import Glibc

/// The app the sleep benchmarks run, each in an app scope of its own: it
/// moves itself into `--scope` (so that the daemon tells its app id from the
/// cgroup and can freeze it), begins a task, goes to the background and prints
/// `ready`. With `--wait-for-go` it then waits for SIGUSR1 (sent while it is
/// frozen, the signal starts its work only when it is thawed). Then it either spins (`--spin`: a busy loop, for CPU figures) or
/// works `--work` seconds of running time in 10 ms steps, and prints when it
/// ran, from its own clock:
///
///     ran <start>-<end>,<start>-<end>…
///
/// (CLOCK_MONOTONIC ns; steps less than 50 ms apart are one run, so a freeze
/// splits runs). It prints that before ending its task: an app whose last
/// task ended in the background is suspended at once. Then it waits to be
/// killed. On a failure it prints `error <why>` and exits 1.
struct WorkerCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "worker",
        abstract: "A background app in an app scope (spawned by the sleep benchmarks).",
        shouldDisplay: false)

    @OptionGroup var target: BusOptions

    @Option(help: "The app scope (a cgroup v2 directory) to move into first.")
    var scope: String

    @Option(help: "Seconds of work, in 10 ms steps.")
    var work = 1.0

    @Flag(help: "Spin instead of working in steps, until killed.")
    var spin = false

    @Flag(help: "Start working only on SIGUSR1.")
    var waitForGo = false

    /// Steps closer than this are one run (ns).
    static let gap: Int64 = 50_000_000

    func run() throws {
        // Blocked before anything else: the signal then waits for sigwait.
        if waitForGo { _ = bgt_block_signal(SIGUSR1) }
        do {
            try join()
            let client = try target.connect()
            let task = try client.begin("bench-work")
            try client.setState("background")
            emit("ready")
            if waitForGo {
                var set = sigset_t()
                sigemptyset(&set)
                sigaddset(&set, SIGUSR1)
                var taken: Int32 = 0
                while sigwait(&set, &taken) != 0 {}
            }
            if spin { Self.spinForever() }
            // The instant it starts working opens its first run.
            let begun = MonotonicTime.nanoseconds()
            var runs: [(start: Int64, end: Int64)] = [(begun, begun)]
            for _ in 0..<max(1, Int((work * 100).rounded())) {
                MonotonicTime.sleep(seconds: 0.01)
                let now = MonotonicTime.nanoseconds()
                if let last = runs.last, now - last.end <= Self.gap {
                    runs[runs.count - 1].end = now
                } else {
                    runs.append((now, now))
                }
            }
            emit("ran " + runs.map { "\($0.start)-\($0.end)" }.joined(separator: ","))
            try client.end(task.id)
        } catch {
            emit("error \(error)")
            Glibc.exit(1)
        }
        while true { pause() }
    }

    private func join() throws {
        let fd = open(scope + "/cgroup.procs", O_WRONLY)
        guard fd >= 0 else { throw BenchError("cannot open \(scope)/cgroup.procs: \(String(cString: strerror(errno)))") }
        defer { close(fd) }
        let pid = "\(getpid())"
        guard write(fd, pid, pid.utf8.count) == pid.utf8.count else {
            throw BenchError("cannot move into \(scope): \(String(cString: strerror(errno)))")
        }
    }

    /// Writes one line at once (no stdio buffer: a frozen or killed app loses nothing printed).
    private func emit(_ line: String) {
        let text = line + "\n"
        _ = text.withCString { write(STDOUT_FILENO, $0, strlen($0)) }
    }

    private static func spinForever() -> Never {
        var counter: UInt64 = 0
        while true {
            counter &+= 1
            // Opaque to the optimizer, so that the loop stays.
            if counter == 0 { emitNothing(counter) }
        }
    }

    @inline(never)
    private static func emitNothing(_ value: UInt64) {
        if value == 1 { print(value) }
    }
}
