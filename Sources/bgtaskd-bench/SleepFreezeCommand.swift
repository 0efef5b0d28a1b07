import ArgumentParser
import Glibc

/// Freezing one app, and what frozen apps cost. One background app with a
/// task is put to sleep and woken `--cycles` times: freeze latency is the
/// SimulateSleep round trip (it is answered once the app's cgroup reports
/// `frozen 1`; an upper bound), thaw latency from SimulateWake until
/// `cgroup.events` says `frozen 0`. Then `--spinners` busy-looping background
/// apps: their CPU time (cgroup `cpu.stat`) over `--seconds` awake, and over
/// as long frozen.
struct SleepFreezeCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "sleep-freeze",
        abstract: "Freeze and thaw latency of one app's cgroup, and CPU used by frozen busy-looping apps (needs root, cgroup v2).")

    @OptionGroup var target: BusOptions

    @Option(help: "Sleep/wake cycles of one app.")
    var cycles = 100

    @Option(help: "Busy-looping apps for the CPU figure.")
    var spinners = 2

    @Option(help: "Seconds each CPU reading lasts.")
    var seconds = 2.0

    func validate() throws {
        guard cycles >= 1, spinners >= 1, seconds > 0 else { throw ValidationError("--cycles, --spinners and --seconds must be positive") }
    }

    func run() throws {
        if let why = AppScope.unavailable {
            Figure.info("sleep-freeze", "freeze and thaw of an app's cgroup: not measured", value: "skipped: \(why)").report()
            return
        }
        let client = try target.connect()
        try latency(client)
        try cpu(client)
    }

    private func latency(_ client: ManagerClient) throws {
        say("sleep-freeze: \(cycles) sleep/wake cycles of one background app")
        let workers = try ScopedWorkers(count: 1, name: "Freeze", bus: target.bus, arguments: ["--work", "100000"])
        defer { workers.stop() }
        _ = try workers.waitForLines("ready", timeout: 30)
        let scope = workers.scopes[0]
        let events = open(scope.path + "/cgroup.events", O_RDONLY | O_CLOEXEC)
        guard events >= 0 else { throw BenchError("cannot open \(scope.path)/cgroup.events") }
        defer { close(events) }
        var freezes: [Double] = [], thaws: [Double] = []
        let load = CPUTimes.now()
        for _ in 0..<cycles {
            let asleep = MonotonicTime.nanoseconds()
            try client.simulate(sleeping: true)
            freezes.append(MonotonicTime.microseconds(since: asleep))
            guard scope.isFrozen else { throw BenchError("SimulateSleep answered before the app was frozen") }
            let awake = MonotonicTime.nanoseconds()
            try client.simulate(sleeping: false)
            guard Self.wait(events, frozen: false, timeoutMs: 5000) else { throw BenchError("the app was not thawed within 5 s") }
            thaws.append(MonotonicTime.microseconds(since: awake))
        }
        let machine = CPUTimes.brief(since: load)
        let freeze = LatencyStats(freezes), thaw = LatencyStats(thaws)
        say("  freeze (SimulateSleep until frozen): \(freeze.summaryInMilliseconds)")
        say("  thaw (SimulateWake until thawed):    \(thaw.summaryInMilliseconds)")
        Figure.info("sleep-freeze", "freeze one app's cgroup (SimulateSleep until frozen), p50 / p99 of \(cycles)",
                    value: "\(milliseconds(freeze.median)) / \(milliseconds(freeze.p99)) ms", machine: machine).report()
        Figure.info("sleep-thaw", "thaw it (SimulateWake until thawed), p50 / p99 of \(cycles)",
                    value: "\(milliseconds(thaw.median)) / \(milliseconds(thaw.p99)) ms", machine: machine).report()
    }

    private func cpu(_ client: ManagerClient) throws {
        say("sleep-freeze: CPU of \(spinners) busy-looping background apps, \(format(seconds, 1)) s awake and \(format(seconds, 1)) s frozen")
        let workers = try ScopedWorkers(count: spinners, name: "Spin", bus: target.bus, arguments: ["--spin"])
        defer { workers.stop() }
        _ = try workers.waitForLines("ready", timeout: 30)
        func used() -> Int { workers.scopes.compactMap(\.cpuMicroseconds).reduce(0, +) }
        let load = CPUTimes.now()
        let awakeStart = used()
        MonotonicTime.sleep(seconds: seconds)
        let awake = used() - awakeStart
        try client.simulate(sleeping: true)
        let frozenStart = used()
        MonotonicTime.sleep(seconds: seconds)
        let frozen = used() - frozenStart
        try client.simulate(sleeping: false)
        let machine = CPUTimes.brief(since: load)
        say("  awake: \(format(Double(awake) / 1000, 1)) ms of CPU; frozen: \(format(Double(frozen) / 1000, 3)) ms")
        guard awake > 0 else { throw BenchError("the busy-looping apps used no CPU while awake: is cpu.stat there?") }
        Figure.atMost("sleep-frozen-cpu",
                      "CPU of \(spinners) frozen busy-looping apps in \(format(seconds, 0)) s (awake: \(format(Double(awake) / 1000, 0)) ms)",
                      value: Double(frozen) / 1000, limit: 0, unit: "ms", decimals: 1, machine: machine).report()
    }

    /// Waits until `cgroup.events` (open as `fd`) reports `frozen` as asked; false after `timeoutMs`.
    static func wait(_ fd: Int32, frozen: Bool, timeoutMs: Int32) -> Bool {
        let deadline = MonotonicTime.nanoseconds() + Int64(timeoutMs) * 1_000_000
        while true {
            var buffer = [UInt8](repeating: 0, count: 256)
            let n = buffer.withUnsafeMutableBytes { pread(fd, $0.baseAddress, $0.count, 0) }
            let text = n > 0 ? String(decoding: buffer[0..<n], as: UTF8.self) : ""
            if AppScope.parse(text)["frozen"] == (frozen ? "1" : "0") { return true }
            let left = deadline - MonotonicTime.nanoseconds()
            if left <= 0 { return false }
            // cgroup.events signals a change as POLLPRI, but at most every 10 ms: look every 0.1 ms as well.
            var poller = pollfd(fd: fd, events: Int16(POLLPRI), revents: 0)
            _ = poll(&poller, 1, 0)
            MonotonicTime.sleep(seconds: 0.0001)
        }
    }
}
