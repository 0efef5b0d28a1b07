import ArgumentParser
import BgTaskSimulator
import Foundation

/// Judges adaptive on traces of many habit shapes, over many seeds, against
/// a plain timer at equal cost: issue 15's figures.
struct EvaluateCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "evaluate",
        abstract: "Adaptive against a plain timer at equal cost on the trace families, over many seeds.",
        discussion: """
            Each seed makes a 14-day trace of apps of every class of the family \
            generator (habits with Gaussian or heavy-tailed jitter, a habit that moves, \
            habits that appear and vanish, erratic users, rarely used apps, bursty, \
            periodic and pushed content; nights awake and days away), and compares \
            adaptive with a plain timer's cost–staleness curve, as `compare` does. \
            Prints each figure's median and worst over the seeds, and per class what \
            adaptive fetches and how stale it leaves apps against the timer at --floor. \
            Tune on some seeds; report on others.
            """)

    @Option(name: .long, help: ArgumentHelp("Seeds, A-B.", valueName: "A-B"))
    var seeds = "101-120"

    @Option(name: .long, help: ArgumentHelp("Fetch.MinimumIntervalSec.", valueName: "seconds"))
    var floor = 900.0

    @OptionGroup var tuning: TuningOptions

    @Option(name: .long, help: ArgumentHelp("Also split each class's staleness share into the opens before day N and from day N on (cold start against the rest).", valueName: "N"))
    var splitDay: Int?

    @Flag(name: .long, help: "Also run the timer at --floor × 1, 4/3, 2, 3, 4, 6 and print per class its fetches and staleness at each (shares of the timer's at --floor over all apps): what spacing each class alone would cost and bring.")
    var classCurve = false

    func validate() throws {
        guard parsedSeeds != nil else { throw ValidationError("--seeds must be A-B with A ≤ B") }
        try Arguments.checkFloor(floor)
    }

    var parsedSeeds: ClosedRange<UInt64>? {
        let parts = seeds.split(separator: "-").compactMap { UInt64($0) }
        guard parts.count == 2, parts[0] <= parts[1] else { return nil }
        return parts[0]...parts[1]
    }

    struct Figures {
        var meanAtCost: [Double] = []
        var p90Within = 0
        var wakesAtCost: [Double] = []
        var fetchAtFloor: [Double] = []
        var meanAtFloor: [Double] = []
        var gapClosed: [Double] = []
        var beyondCurve = 0
        var seconds: [Double] = []
    }

    func run() throws {
        var figures = Figures()
        var byClass: [FamilyTraceGenerator.AppClass: (adaptive: Int, naive: Int, stale: [Double], naiveStale: [Double])] = [:]
        // Per class: staleness summed over opens before `splitDay` and from it on, adaptive and timer.
        var early: [FamilyTraceGenerator.AppClass: (mine: Double, theirs: Double, mineLater: Double, theirsLater: Double)] = [:]
        let seeds = parsedSeeds!
        let multiples = [1, 4.0 / 3, 2, 3, 4, 6]
        // Per class and multiple: the timer's fetches and staleness summed over opens.
        var classRows: [FamilyTraceGenerator.AppClass: [(fetches: Int, stale: Double)]] = [:]
        var curveTotals = (fetches: 0, stale: 0.0)
        for seed in seeds {
            var generator = FamilyTraceGenerator()
            generator.seed = seed
            let trace = generator.generate()
            let started = Date()
            let adaptive = SimulationPolicy.adaptive.run(trace, floor: floor, tuning: tuning.tuning)
            figures.seconds.append(Date().timeIntervalSince(started))
            let oracle = SimulationPolicy.oracle.run(trace, floor: floor)
            let naive = SimulationPolicy.naive.run(trace, floor: floor)
            let curve = NaiveCurve(trace: trace, floors: NaiveCurve.floors(from: floor))
            let a = adaptive.metrics
            if let at = curve.staleness(atFetchWakes: a.fetchWakes) {
                figures.meanAtCost.append(at.mean > 0 ? a.meanStalenessS / at.mean : (a.meanStalenessS == 0 ? 0 : .infinity))
                if a.p90StalenessS <= at.p90 { figures.p90Within += 1 }
                let gap = at.mean - oracle.metrics.meanStalenessS
                figures.gapClosed.append(gap > 0 ? (at.mean - a.meanStalenessS) / gap : 0)
            } else {
                figures.beyondCurve += 1
            }
            if let wakes = curve.wakeEvents(atFetchWakes: a.fetchWakes), wakes > 0 {
                figures.wakesAtCost.append(Double(a.wakeEvents) / wakes)
            }
            if classCurve {
                for (index, multiple) in multiples.enumerated() {
                    let timer = index == 0 ? naive : SimulationPolicy.naive.run(trace, floor: floor * multiple)
                    for app in trace.apps {
                        guard let appClass = FamilyTraceGenerator.appClass(of: app) else { continue }
                        let fetches = timer.runs.filter { $0.app == app && $0.kind == .fetch }.count
                        let stale = (timer.staleness[app] ?? []).flatMap { $0 }.reduce(0, +)
                        var row = classRows[appClass] ?? Array(repeating: (0, 0), count: multiples.count)
                        row[index].fetches += fetches
                        row[index].stale += stale
                        classRows[appClass] = row
                        if index == 0 {
                            curveTotals.fetches += fetches
                            curveTotals.stale += stale
                        }
                    }
                }
            }
            figures.fetchAtFloor.append(Double(a.fetchWakes) / Double(max(naive.metrics.fetchWakes, 1)))
            figures.meanAtFloor.append(naive.metrics.meanStalenessS > 0 ? a.meanStalenessS / naive.metrics.meanStalenessS : .nan)
            for app in trace.apps {
                guard let appClass = FamilyTraceGenerator.appClass(of: app) else { continue }
                var entry = byClass[appClass] ?? (0, 0, [], [])
                entry.adaptive += adaptive.runs.filter { $0.app == app && $0.kind == .fetch }.count
                entry.naive += naive.runs.filter { $0.app == app && $0.kind == .fetch }.count
                entry.stale += (adaptive.staleness[app] ?? []).flatMap { $0 }
                entry.naiveStale += (naive.staleness[app] ?? []).flatMap { $0 }
                byClass[appClass] = entry
                if let splitDay {
                    var split = early[appClass] ?? (0, 0, 0, 0)
                    for (day, values) in (adaptive.staleness[app] ?? []).enumerated() {
                        if day < splitDay { split.mine += values.reduce(0, +) } else { split.mineLater += values.reduce(0, +) }
                    }
                    for (day, values) in (naive.staleness[app] ?? []).enumerated() {
                        if day < splitDay { split.theirs += values.reduce(0, +) } else { split.theirsLater += values.reduce(0, +) }
                    }
                    early[appClass] = split
                }
            }
        }
        func summary(_ values: [Double]) -> String {
            let finite = values.filter { !$0.isNaN }.sorted()
            guard !finite.isEmpty else { return "–" }
            return String(format: "median %.2f, worst %.2f", finite[finite.count / 2], finite.last!)
        }
        func best(_ values: [Double]) -> String {
            let sorted = values.sorted()
            guard !sorted.isEmpty else { return "–" }
            return String(format: "median %.2f, worst %.2f", sorted[sorted.count / 2], sorted.first!)
        }
        let n = seeds.count
        print("family traces, seeds \(seeds.lowerBound)-\(seeds.upperBound) (\(n)), floor \(RunCommand.number(floor)) s")
        print("figure                                                        measured                      target")
        print("mean staleness ÷ timer's at equal fetch_wakes                 \(summary(figures.meanAtCost).padding(toLength: 30, withPad: " ", startingAt: 0)) ≤ 0.70")
        print("p90 staleness ≤ timer's at equal fetch_wakes                  \("\(figures.p90Within) of \(n - figures.beyondCurve) seeds".padding(toLength: 30, withPad: " ", startingAt: 0)) all")
        print("wake_events ÷ timer's at equal fetch_wakes                    \(summary(figures.wakesAtCost).padding(toLength: 30, withPad: " ", startingAt: 0)) ≤ 0.50")
        print("fetch_wakes ÷ timer's at the floor                            \(summary(figures.fetchAtFloor).padding(toLength: 30, withPad: " ", startingAt: 0)) ≤ 0.50")
        print("mean staleness ÷ timer's at the floor                         \(summary(figures.meanAtFloor).padding(toLength: 30, withPad: " ", startingAt: 0)) ≤ 1.20")
        print("gap to the oracle closed at equal fetch_wakes                 \(best(figures.gapClosed).padding(toLength: 30, withPad: " ", startingAt: 0)) ≥ 0.33")
        if let rare = byClass[.rare], rare.naive > 0 {
            let ratio = String(format: "%.3f (all seeds together)", Double(rare.adaptive) / Double(rare.naive))
            print("rarely used apps' fetches ÷ timer's at the floor              \(ratio.padding(toLength: 30, withPad: " ", startingAt: 0)) ≤ 0.25")
        }
        if figures.beyondCurve > 0 { print("  (\(figures.beyondCurve) seeds cost less than the rarest timer: left out above)") }
        print(String(format: "one simulation (adaptive)                                     median %.2f s, slowest %.2f s     < 5 s",
                     figures.seconds.sorted()[figures.seconds.count / 2], figures.seconds.max() ?? 0))
        print("by class, adaptive against the timer at the floor: fetches, mean staleness at opens, and the class's")
        print("staleness summed over its opens as a share of the timer's over all opens (where the mean's ratio comes from)")
        if classCurve, curveTotals.fetches > 0, curveTotals.stale > 0 {
            print("the timer per class at --floor × " + multiples.map { String(format: "%.2f", $0) }.joined(separator: ", ")
                  + ": fetches / staleness, as shares of the timer's at --floor over all apps")
            for appClass in FamilyTraceGenerator.AppClass.allCases {
                guard let row = classRows[appClass] else { continue }
                let cells = row.map { String(format: "%.3f/%.3f", Double($0.fetches) / Double(curveTotals.fetches), $0.stale / curveTotals.stale) }
                print("  \(appClass.rawValue.padding(toLength: 9, withPad: " ", startingAt: 0)) " + cells.joined(separator: "  "))
            }
            if let best = Self.bestSplit(classRows, total: curveTotals) {
                print(String(format: "  the best of these spacings per class with ≤ 0.50 of the timer's fetches (rarely used ≤ 0.25 of theirs):"
                             + " staleness %.2f× the timer's at --floor, fetches %.2f", best.stale, best.fetches))
            }
        }
        let timerTotal = byClass.values.reduce(0.0) { $0 + $1.naiveStale.reduce(0, +) }
        for appClass in FamilyTraceGenerator.AppClass.allCases {
            guard let entry = byClass[appClass] else { continue }
            let ratio = entry.naive > 0 ? Double(entry.adaptive) / Double(entry.naive) : .nan
            let mine = entry.stale.isEmpty ? "no opens" : RunCommand.duration(SimulationMetrics.mean(of: entry.stale))
            let theirs = entry.naiveStale.isEmpty ? "no opens" : RunCommand.duration(SimulationMetrics.mean(of: entry.naiveStale))
            let shares = timerTotal > 0
                ? String(format: "; %.2f against %.2f", entry.stale.reduce(0, +) / timerTotal, entry.naiveStale.reduce(0, +) / timerTotal) : ""
            print("  \(appClass.rawValue.padding(toLength: 9, withPad: " ", startingAt: 0)) \(String(format: "%.2f×", ratio)) of its fetches; \(mine) against \(theirs)\(shares)")
            if let splitDay, let split = early[appClass], timerTotal > 0 {
                print(String(format: "            before day %d: %.2f against %.2f; from it on: %.2f against %.2f", splitDay,
                             split.mine / timerTotal, split.theirs / timerTotal, split.mineLater / timerTotal, split.theirsLater / timerTotal))
            }
        }
        if let splitDay, timerTotal > 0 {
            let all = early.values.reduce((0.0, 0.0, 0.0, 0.0)) { ($0.0 + $1.mine, $0.1 + $1.theirs, $0.2 + $1.mineLater, $0.3 + $1.theirsLater) }
            print(String(format: "  all classes before day %d: %.2f against %.2f; from it on: %.2f against %.2f", splitDay,
                         all.0 / timerTotal, all.1 / timerTotal, all.2 / timerTotal, all.3 / timerTotal))
        }
    }

    /// The least staleness any choice of one timer spacing per class reaches
    /// within the figures' costs: at most half the timer's fetches at the
    /// floor, and the rarely used apps at most a quarter of theirs. Shares of
    /// the timer's at the floor; nil when no choice fits. Exhaustive (six
    /// spacings, nine classes), pruned on the fetches spent.
    static func bestSplit(_ rows: [FamilyTraceGenerator.AppClass: [(fetches: Int, stale: Double)]],
                          total: (fetches: Int, stale: Double)) -> (stale: Double, fetches: Double)? {
        let classes = FamilyTraceGenerator.AppClass.allCases.compactMap { appClass in
            rows[appClass].map { row in
                row.map { (fetches: Double($0.fetches) / Double(total.fetches), stale: $0.stale / total.stale) }
                    .filter { appClass != .rare || $0.fetches <= 0.25 * Double(row[0].fetches) / Double(total.fetches) + 1e-12 }
            }
        }
        var best: (stale: Double, fetches: Double)?
        func choose(_ index: Int, fetches: Double, stale: Double) {
            guard fetches <= 0.5 + 1e-12, stale < best?.stale ?? .infinity else { return }
            guard index < classes.count else { return best = (stale, fetches) }
            for cell in classes[index] { choose(index + 1, fetches: fetches + cell.fetches, stale: stale + cell.stale) }
        }
        choose(0, fetches: 0, stale: 0)
        return best
    }
}
