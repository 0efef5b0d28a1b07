import ArgumentParser
import BgTaskSimulator
import BgTaskFetchCore
import Foundation

/// Judges the adaptive planner against a plain timer at equal cost.
struct CompareCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "compare",
        abstract: "Compare adaptive with a plain timer at equal cost, and with the oracle.",
        discussion: """
            Runs adaptive and the oracle at --floor, and naive at a series of floors \
            (--floor × 1, 4/3, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 96): the cost–staleness \
            curve of a plain timer. Prints adaptive's mean and p90 staleness against \
            naive's interpolated at adaptive's own fetch_wakes and at its wake_events \
            (a ratio below 1 is fresher than a timer that costs the same), the share of \
            the gap between naive and the oracle that adaptive closes at that cost, and \
            with --by-app the same per app (fetches and mean staleness against naive at \
            --floor). "beyond the curve" means no floor of the timer is as cheap.

            \(RunCommand.traceFormat)
            """)

    @Option(name: .long, help: ArgumentHelp("The trace (JSON Lines; - for standard input).", valueName: "file"))
    var trace: String

    @Option(name: .long, help: ArgumentHelp("Fetch.MinimumIntervalSec for adaptive and the oracle, and the timer's first floor.", valueName: "seconds"))
    var floor = 900.0

    @OptionGroup var tuning: TuningOptions

    @Flag(name: .long, help: "Also per app: fetches and mean staleness, adaptive against naive at --floor.")
    var byApp = false

    @Option(name: .long, help: ArgumentHelp("Also list the N opens adaptive left stalest, with what the timer at --floor left and adaptive's last run before each.", valueName: "N"))
    var stalest = 0

    @Flag(name: .long, help: "Print one JSON object.")
    var json = false

    func validate() throws {
        try Arguments.checkFloor(floor)
    }

    func run() throws {
        let trace = try RunCommand.load(self.trace)
        let adaptive = SimulationPolicy.adaptive.run(trace, floor: floor, tuning: tuning.tuning)
        let oracle = SimulationPolicy.oracle.run(trace, floor: floor)
        let curve = NaiveCurve(trace: trace, floors: NaiveCurve.floors(from: floor))
        let a = adaptive.metrics
        let atFetches = curve.staleness(atFetchWakes: a.fetchWakes)
        let atWakes = curve.staleness(atWakeEvents: a.wakeEvents)
        let naive = curve.points.first!
        let gap = atFetches.map { naiveAt in
            naiveAt.mean - oracle.metrics.meanStalenessS > 0
                ? (naiveAt.mean - a.meanStalenessS) / (naiveAt.mean - oracle.metrics.meanStalenessS) : Double.nan
        }
        if json {
            var fields: [String] = [
                "\"adaptive\":\(a.json)", "\"oracle\":\(oracle.metrics.json)",
                "\"naive_curve\":[" + curve.points.map {
                    "{\"floor\":\(RunCommand.number($0.floor)),\"fetch_wakes\":\($0.fetchWakes),\"wake_events\":\($0.wakeEvents),"
                        + "\"mean_staleness_s\":\(Self.json($0.meanStaleness)),\"p90_staleness_s\":\(Self.json($0.p90Staleness))}"
                }.joined(separator: ",") + "]",
            ]
            if let atFetches {
                fields.append("\"naive_at_fetch_wakes\":{\"mean_staleness_s\":\(Self.json(atFetches.mean)),\"p90_staleness_s\":\(Self.json(atFetches.p90))}")
            }
            if let atWakes {
                fields.append("\"naive_at_wake_events\":{\"mean_staleness_s\":\(Self.json(atWakes.mean)),\"p90_staleness_s\":\(Self.json(atWakes.p90))}")
            }
            if let gap { fields.append("\"gap_closed\":\(Self.json(gap))") }
            print("{" + fields.joined(separator: ",") + "}")
            return
        }
        func ratio(_ value: Double, _ against: Double) -> String {
            against > 0 ? String(format: "%.2f×", value / against) : "–"
        }
        print("trace \(self.trace): \(trace.apps.count) apps, \(Int((trace.duration / 86_400).rounded(.up))) days; floor \(RunCommand.number(floor)) s")
        print("adaptive: \(a.fetchWakes) fetch_wakes, \(a.wakeEvents) wake_events, staleness mean \(RunCommand.duration(a.meanStalenessS)), p90 \(RunCommand.duration(a.p90StalenessS))")
        print("oracle:   \(oracle.metrics.fetchWakes) fetch_wakes, staleness mean \(RunCommand.duration(oracle.metrics.meanStalenessS))")
        print("a plain timer (naive) by floor:")
        for point in curve.points {
            print("  \(RunCommand.number(point.floor)) s: \(point.fetchWakes) fetch_wakes, \(point.wakeEvents) wake_events, "
                + "mean \(RunCommand.duration(point.meanStaleness)), p90 \(RunCommand.duration(point.p90Staleness))")
        }
        if let atFetches {
            print("at adaptive's fetch_wakes the timer has mean \(RunCommand.duration(atFetches.mean)), p90 \(RunCommand.duration(atFetches.p90)):"
                + " adaptive is \(ratio(a.meanStalenessS, atFetches.mean)) its mean, \(ratio(a.p90StalenessS, atFetches.p90)) its p90;"
                + " gap to the oracle closed: \(gap.map { String(format: "%.0f %%", 100 * $0) } ?? "–")")
        } else {
            print("at adaptive's fetch_wakes: beyond the curve")
        }
        if let atWakes {
            print("at adaptive's wake_events the timer has mean \(RunCommand.duration(atWakes.mean)), p90 \(RunCommand.duration(atWakes.p90)):"
                + " adaptive is \(ratio(a.meanStalenessS, atWakes.mean)) its mean")
        } else {
            print("at adaptive's wake_events: beyond the curve")
        }
        print("against the timer at the floor: fetch_wakes \(ratio(Double(a.fetchWakes), Double(naive.fetchWakes))),"
            + " wake_events \(ratio(Double(a.wakeEvents), Double(naive.wakeEvents))), mean staleness \(ratio(a.meanStalenessS, naive.meanStaleness))")
        if stalest > 0 {
            let naiveRun = SimulationPolicy.naive.run(trace, floor: floor)
            print("stalest opens under adaptive (naive at the floor; adaptive's last run of the app before):")
            for (index, open) in adaptive.opens.enumerated().sorted(by: { $0.element.staleness > $1.element.staleness }).prefix(stalest) {
                let naiveStale = index < naiveRun.opens.count ? naiveRun.opens[index].staleness : .nan
                let last = adaptive.runs.last { $0.app == open.app && $0.at < open.at }
                let t = Double(open.at) / 1e6 - Double(Trace.realtime(0)) / 1e6
                let day = Int(t / 86_400), clock = FetchPlanReason.clock(Int(t) % 86_400)
                print("  \(open.app) day \(day) \(clock): \(RunCommand.duration(open.staleness)) (naive \(RunCommand.duration(naiveStale)));"
                    + " last run \(last.map { "\($0.kind.rawValue) \(RunCommand.duration(Double(open.at - $0.at) / 1e6)) before" } ?? "none")")
            }
        }
        if byApp {
            let naiveRun = SimulationPolicy.naive.run(trace, floor: floor)
            print("by app (adaptive / naive at the floor): fetches, mean staleness at opens")
            for app in trace.apps.sorted() {
                let fetches = adaptive.runs.filter { $0.app == app && $0.kind == .fetch }.count
                let naiveFetches = naiveRun.runs.filter { $0.app == app && $0.kind == .fetch }.count
                let mine = (adaptive.staleness[app] ?? []).flatMap { $0 }
                let theirs = (naiveRun.staleness[app] ?? []).flatMap { $0 }
                print("  \(app): \(fetches) / \(naiveFetches) (\(ratio(Double(fetches), Double(naiveFetches)))),"
                    + " \(mine.isEmpty ? "no opens" : RunCommand.duration(SimulationMetrics.mean(of: mine)))"
                    + " / \(theirs.isEmpty ? "no opens" : RunCommand.duration(SimulationMetrics.mean(of: theirs)))")
            }
        }
    }

    /// A JSON number; NaN and infinities (no opens) as null.
    static func json(_ value: Double) -> String { value.isFinite ? "\(value)" : "null" }
}
