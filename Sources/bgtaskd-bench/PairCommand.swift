import ArgumentParser

/// Figure 1: a BeginBackgroundTask + EndBackgroundTask pair against two Echo
/// calls of the C baseline, both measured by the baseline's own `callbench`
/// on the same bus.
///
/// The machine is noisy, so the two run interleaved for several rounds (in
/// alternating order, echo first in odd rounds, tasks first in even ones) and
/// the figure is the median over rounds of pair_median / (2 × echo_median).
struct PairCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "pair",
        abstract: "Begin+End pair latency against two Echo calls of the C baseline (median of rounds).")

    @Option(help: ArgumentHelp("The baseline's callbench binary.", valueName: "PATH"))
    var callbench: String

    @Option(help: "Interleaved rounds of `callbench echo` and `callbench tasks`.")
    var rounds = 5

    @Option(help: "Echo calls per round.")
    var echoCalls = 4000

    @Option(help: "Begin+End pairs per round.")
    var pairs = 2000

    @Option(help: "Target: the largest acceptable pair / (2 × echo) ratio.")
    var maxRatio = 1.2

    func validate() throws {
        guard rounds >= 1 else { throw ValidationError("--rounds must be at least 1") }
    }

    func run() throws {
        var ratios: [Double] = []
        var echoMedians: [Double] = []
        var pairMedians: [Double] = []
        let runStart = CPUTimes.now()
        say("pair: \(rounds) rounds of callbench echo \(echoCalls) / callbench tasks \(pairs), alternating order")
        for round in 1...rounds {
            let echoFirst = round % 2 == 1
            var echo: Callbench.Run?
            var tasks: Callbench.Run?
            let before = CPUTimes.now()
            for kind in echoFirst ? ["echo", "tasks"] : ["tasks", "echo"] {
                let result = try Callbench.run(callbench, kind, kind == "echo" ? echoCalls : pairs)
                if kind == "echo" { echo = result } else { tasks = result }
            }
            let load = CPUTimes.now()?.summary(since: before) ?? ""
            let ratio = tasks!.median / (2 * echo!.median)
            ratios.append(ratio)
            echoMedians.append(echo!.median)
            pairMedians.append(tasks!.median)
            say("  round \(round): echo median \(format(echo!.median, 1)) µs, pair median \(format(tasks!.median, 1)) µs"
                + " (p99 \(format(echo!.p99, 1)) / \(format(tasks!.p99, 1)) µs), ratio \(format(ratio, 3)); \(load)")
        }
        let ratio = LatencyStats.median(ratios)
        say("pair: median of rounds: echo \(format(LatencyStats.median(echoMedians), 1)) µs,"
            + " pair \(format(LatencyStats.median(pairMedians), 1)) µs, ratio \(format(ratio, 3))"
            + " (rounds: \(ratios.map { format($0, 3) }.joined(separator: " ")))")
        Figure.atMost("pair", "Begin+End pair / 2 Echo calls (median of \(rounds) rounds)",
                      value: ratio, limit: maxRatio, unit: "x", decimals: 3,
                      machine: CPUTimes.brief(since: runStart)).report()
    }
}
