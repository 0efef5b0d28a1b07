import ArgumentParser
import BgTaskProtocol
import BgTaskSimulator
import Foundation

/// Prints the simulator's figures (targets in the README) with PASS/FAIL; exits 1 if any fails.
struct FiguresCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "figures",
        abstract: "Run the three policies on the default generated trace and check the scheduling figures.",
        discussion: """
            The traces: `generate --apps 30 --days 14 --seed 1` for the costs and staleness, and the same with \
            `--shift 0:7:4 --app-content 0:24` (app 0's opens move 4 h later from 0-based day 7, the 8th day, \
            on; it gets 24 content items a day) for the habit shift. Checks: adaptive wake_events ≤ 40 % and \
            fetch_wakes ≤ 50 % of naive's; adaptive mean staleness ≤ 0.7× and p90 ≤ the plain timer's at equal \
            fetch_wakes (as `compare` reads its curve); the \
            shifted app's mean staleness per day back within 20 % (+ 60 s) of its level on days 1…6 \
            no later than 3 days after the shift day (back on day d: the days from d on average within); no rule violations; one adaptive simulation < 5 s (build with -c release). \
            Exits 0 when all pass, 1 otherwise.
            """
    )

    @Option(help: "PRNG seed of the trace.") var seed: UInt64 = 1
    @Option(help: "Number of apps.") var apps = 30
    @Option(help: "Number of days.") var days = 14
    @Option(help: "Fetch.MinimumIntervalSec, seconds.") var floor = 900.0
    @Flag(help: "Print one JSON object.") var json = false
    @Option(help: ArgumentHelp("Also compare adaptive's and naive's staleness and cost on this many seeds from --seed on (text output; no PASS/FAIL).", valueName: "N"))
    var compareSeeds = 0

    func validate() throws {
        try Arguments.checkSize(apps: apps, days: days, minimumDays: 2)
        try Arguments.checkFloor(floor)
        guard compareSeeds >= 0, compareSeeds <= 1000 else { throw ValidationError("--compare-seeds must be 0…1000") }
    }

    func run() throws {
        let figures = Figures(seed: seed, apps: apps, days: days, floor: floor)
        let report = figures.run()
        if json {
            print(Self.json(report, figures))
        } else {
            print(Self.text(report, figures))
            if compareSeeds > 0 { print("\n" + comparison()) }
        }
        if !report.passed { throw ExitCode(1) }
    }

    /// Adaptive against naive on the unshifted default trace of each of
    /// `compareSeeds` seeds: how far one seed's staleness figure is from chance.
    func comparison() -> String {
        var lines = ["seed  adaptive_mean_s  naive_mean_s  fetch_wakes  wake_events"]
        var sums = (adaptive: 0.0, naive: 0.0)
        var (noWorse, fetchRatios, wakeRatios) = (0, [Double](), [Double]())
        for seed in seed..<(seed + UInt64(compareSeeds)) {
            var generator = Figures(seed: seed, apps: apps, days: days, floor: floor).generator
            generator.shifts = []
            generator.contentPerDayOf = [:]
            let trace = generator.generate()
            let a = SimulationPolicy.adaptive.run(trace, floor: floor).metrics
            let n = SimulationPolicy.naive.run(trace, floor: floor).metrics
            sums.adaptive += a.meanStalenessS
            sums.naive += n.meanStalenessS
            if a.meanStalenessS <= n.meanStalenessS { noWorse += 1 }
            fetchRatios.append(Double(a.fetchWakes) / Double(max(n.fetchWakes, 1)))
            wakeRatios.append(Double(a.wakeEvents) / Double(max(n.wakeEvents, 1)))
            lines.append(String(format: "%4llu  %15.2f  %12.2f  %10.1f%%  %10.1f%%", seed, a.meanStalenessS, n.meanStalenessS,
                                100 * fetchRatios.last!, 100 * wakeRatios.last!))
        }
        let count = Double(compareSeeds)
        lines.append(String(format: "mean staleness over %d seeds: adaptive %.2f s, naive %.2f s; adaptive ≤ naive on %d of %d;"
                            + " fetch_wakes %.0f–%.0f %%, wake_events %.0f–%.0f %% of naive's",
                            compareSeeds, sums.adaptive / count, sums.naive / count, noWorse, compareSeeds,
                            100 * fetchRatios.min()!, 100 * fetchRatios.max()!, 100 * wakeRatios.min()!, 100 * wakeRatios.max()!))
        return lines.joined(separator: "\n")
    }

    static let order: [SimulationPolicy] = [.adaptive, .naive, .oracle]

    static func text(_ report: Figures.Report, _ figures: Figures) -> String {
        let g = figures.generator
        var out = "bgtaskd-sim figures: seed \(g.seed), \(g.apps) apps, \(g.days) days, floor \(RunCommand.number(figures.floor)) s, "
            + "\(report.events) events\n\n"
        func cell(_ text: String, _ width: Int) -> String { String(repeating: " ", count: max(0, width - text.count)) + text }
        out += "policy".padding(toLength: 10, withPad: " ", startingAt: 0)
            + ["fetch_wakes", "wake_events", "nodata", "mean_stale_s", "p90_stale_s", "opens", "violations"].map { cell($0, 13) }.joined() + "\n"
        for policy in order {
            let m = report.metrics[policy]!
            out += policy.rawValue.padding(toLength: 10, withPad: " ", startingAt: 0)
                + ["\(m.fetchWakes)", "\(m.wakeEvents)", "\(m.nodataFetches)", String(format: "%.1f", m.meanStalenessS),
                   String(format: "%.1f", m.p90StalenessS), "\(m.opens)", "\(m.ruleViolations)"].map { cell($0, 13) }.joined() + "\n"
        }
        out += "\n\(report.shiftedApp): mean staleness per day, s (shift from day \(figures.shift.fromDay); - = no opens)\n"
        out += "day       " + (0..<g.days).map { cell("\($0)", 7) }.joined() + "\n"
        for policy in order {
            out += policy.rawValue.padding(toLength: 10, withPad: " ", startingAt: 0)
                + report.dailyStaleness[policy]!.map { cell($0.map { String(Int($0.rounded())) } ?? "-", 7) }.joined() + "\n"
        }
        out += "\n"
        for check in report.checks {
            out += (check.passed ? "PASS  " : "FAIL  ") + check.name + ": " + check.detail + "\n"
        }
        out += "\n" + (report.passed ? "all figures pass" : "\(report.checks.filter { !$0.passed }.count) of \(report.checks.count) figures fail")
        return out
    }

    static func json(_ report: Figures.Report, _ figures: Figures) -> String {
        func string(_ text: String) -> String { JSONText.quoted(text) }
        func number(_ value: Double) -> String { value.isFinite ? RunCommand.number((value * 1000).rounded() / 1000) : "null" }
        let g = figures.generator
        var parts: [String] = [
            "\"seed\":\(g.seed)", "\"apps\":\(g.apps)", "\"days\":\(g.days)", "\"floor\":\(number(figures.floor))",
            "\"events\":\(report.events)",
        ]
        parts.append("\"policies\":{" + order.map { policy in
            let m = report.metrics[policy]!
            return "\"\(policy.rawValue)\":" + m.json.dropLast() + ",\"rule_violations\":\(m.ruleViolations)}"
        }.joined(separator: ",") + "}")
        let daily = order.map { policy in
            "\"\(policy.rawValue)\":[" + report.dailyStaleness[policy]!.map { $0.map(number) ?? "null" }.joined(separator: ",") + "]"
        }.joined(separator: ",")
        parts.append("\"shift\":{\"app\":\(string(report.shiftedApp)),\"app_index\":\(figures.shift.app),\"from_day\":\(figures.shift.fromDay),"
            + "\"hours\":\(number(figures.shift.hours)),\"pre_shift_level_s\":\(report.preShiftLevel.map(number) ?? "null"),"
            + "\"recovery_day\":\(report.recoveryDay.map(String.init) ?? "null"),\"daily_mean_staleness_s\":{\(daily)}}")
        parts.append("\"checks\":[" + report.checks.map {
            "{\"name\":\(string($0.name)),\"pass\":\($0.passed),\"detail\":\(string($0.detail))}"
        }.joined(separator: ",") + "]")
        parts.append("\"simulation_s\":\(number(report.simulationSeconds))")
        parts.append("\"pass\":\(report.passed)")
        return "{" + parts.joined(separator: ",") + "}"
    }
}
