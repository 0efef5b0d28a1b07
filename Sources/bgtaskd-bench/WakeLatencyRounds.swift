/// The method `fetch-latency` and `push-latency` share: rounds of the C
/// baseline's `callbench echo` and of wakes through the daemon, in
/// alternating order (echo first in odd rounds), each round giving
/// wake median ÷ echo median; the figure is the median of the rounds'
/// ratios. The CPU time each service spends on its side is taken from
/// /proc/PID/stat around its part of each round.
struct WakeLatencyRounds {
    /// How the printed lines name the timed path, the reply and the completion
    /// (`SimulateFetch→PerformFetch`, `SimulateFetch reply`, `CompleteFetch`).
    var path: String
    var reply: String
    var complete: String

    private(set) var ratios: [Double] = []
    private(set) var echoMedians: [Double] = []
    private(set) var wakeMedians: [Double] = []
    private(set) var all: [WakeSample] = []
    private(set) var daemonCPU = 0.0
    private(set) var baselineCPU = 0.0
    private(set) var echoCalls = 0

    init(path: String, reply: String, complete: String) {
        self.path = path
        self.reply = reply
        self.complete = complete
    }

    /// Runs the rounds, printing a line for each.
    mutating func run(rounds: Int, echoCalls: Int, wakes: Int, callbench: String, baseline: ProcStatus?, daemon: ProcStatus,
                      wake: () throws -> WakeSample) throws {
        for round in 1...rounds {
            var echo: Callbench.Run?
            var samples: [WakeSample] = []
            samples.reserveCapacity(wakes)
            let before = CPUTimes.now()
            for step in round % 2 == 1 ? ["echo", "wake"] : ["wake", "echo"] {
                if step == "echo" {
                    let before = baseline?.cpuSeconds ?? .nan
                    echo = try Callbench.run(callbench, "echo", echoCalls)
                    baselineCPU += (baseline?.cpuSeconds ?? .nan) - before
                    self.echoCalls += echoCalls
                } else {
                    let before = daemon.cpuSeconds ?? .nan
                    for _ in 0..<wakes { samples.append(try wake()) }
                    daemonCPU += (daemon.cpuSeconds ?? .nan) - before
                }
            }
            let load = CPUTimes.now()?.summary(since: before) ?? ""
            let signal = LatencyStats(samples.map(\.signal))
            let ratio = signal.median / echo!.median
            ratios.append(ratio)
            echoMedians.append(echo!.median)
            wakeMedians.append(signal.median)
            all += samples
            say("  round \(round): echo median \(format(echo!.median, 1)) µs, \(path) median \(format(signal.median, 1)) µs"
                + " (p99 \(format(echo!.p99, 1)) / \(format(signal.p99, 1)) µs), ratio \(format(ratio, 3));"
                + " \(reply) \(format(LatencyStats(samples.map(\.reply)).median, 1)) µs,"
                + " \(complete) \(format(LatencyStats(samples.map(\.complete)).median, 1)) µs; \(load)")
        }
    }

    /// The figure: the median of the rounds' ratios.
    var ratio: Double { LatencyStats.median(ratios) }
    var wakeMedian: Double { LatencyStats.median(wakeMedians) }
    var signal: LatencyStats { LatencyStats(all.map(\.signal)) }

    /// Prints the medians of the rounds, every sample's distribution and the
    /// CPU time per wake (`noun`: "pushes", "wakes") against the baseline's per Echo.
    func summarize(_ command: String, noun: String, cpuNote: String) {
        say("\(command): median of rounds: echo \(format(LatencyStats.median(echoMedians), 1)) µs,"
            + " \(path) \(format(wakeMedian, 1)) µs, ratio \(format(ratio, 3))"
            + " (rounds: \(ratios.map { format($0, 3) }.joined(separator: " ")))")
        let head = "all \(all.count) \(noun):"
        let labels = [path, reply, complete + " call"]
        let width = labels.map(\.count).max() ?? 0
        for (index, (label, values)) in zip(labels, [all.map(\.signal), all.map(\.reply), all.map(\.complete)]).enumerated() {
            let lead = index == 0 ? head : String(repeating: " ", count: head.count)
            say("  \(lead) \(label.padding(toLength: width, withPad: " ", startingAt: 0)) \(LatencyStats(values).summaryInMilliseconds)")
        }
        // callbench makes 200 untimed calls before its timed ones.
        let echoes = echoCalls + 200 * ratios.count
        say("  CPU time: bgtaskd \(format(daemonCPU * 1e6 / Double(max(all.count, 1)), 0)) µs per \(cpuNote);"
            + " C baseline \(format(baselineCPU * 1e6 / Double(max(echoes, 1)), 1)) µs per Echo")
    }
}
