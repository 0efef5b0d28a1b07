import ArgumentParser
import BgTaskSimulator
import BgTaskProtocol
import Foundation

/// Simulates one trace under one policy.
struct RunCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "run",
        abstract: "Simulate a trace under a policy and print what it cost and what users saw (the default).",
        discussion: traceFormat
    )

    static let traceFormat = """
        The trace is JSON Lines sorted by t (seconds from the trace start, which
        is a Monday 00:00 UTC):
          {"t":0,"kind":"register","app":"org.example.News","interval":0}
              interval in seconds as SetMinimumFetchInterval: 0 is minimum
          {"t":…,"kind":"open","app":…}   {"t":…,"kind":"close","app":…}
              the user; an open brings the app up to date
          {"t":…,"kind":"content","app":…}
              new content appears on the app's server
          {"t":…,"kind":"sleep"}   {"t":…,"kind":"wake"}
              the machine; nothing runs in the background while it sleeps
          {"t":…,"kind":"push","app":…,"silent":true}
              a silent push wakes the app in the background

        Output: fetch_wakes (background fetches), wake_events (distinct moments \
        any background work ran), nodata_fetches, mean_staleness_s and \
        p90_staleness_s (at each open, the age of the oldest content the app \
        lacks; p90 by nearest rank), opens. Policies: adaptive (bgtaskd's \
        planner), naive (every app at its interval), oracle (knows the trace: \
        fetches right before the opens that need it).
        """

    @Option(name: .long, help: ArgumentHelp("The trace (JSON Lines; - for standard input).", valueName: "file"))
    var trace: String

    @Option(name: .long, help: ArgumentHelp("adaptive, naive or oracle.", valueName: "policy"))
    var policy = "adaptive"

    @Option(name: .long, help: ArgumentHelp("Fetch.MinimumIntervalSec: the floor of every fetch interval, seconds.", valueName: "seconds"))
    var floor = 900.0

    @Flag(name: .long, help: "Print one JSON object with the six metrics.")
    var json = false

    @Option(name: .long, help: ArgumentHelp("Draw one day of the simulation into this SVG file.", valueName: "file.svg"))
    var plot: String?

    @Option(name: .customLong("plot-day"), help: ArgumentHelp("The 0-based day to draw (default: the first day with opens).", valueName: "n"))
    var plotDay: Int?

    func validate() throws {
        guard SimulationPolicy(rawValue: policy) != nil else { throw ValidationError("unknown policy '\(policy)' (adaptive, naive or oracle)") }
        try Arguments.checkFloor(floor)
        if let plotDay, plotDay < 0 { throw ValidationError("--plot-day must be ≥ 0") }
    }

    func run() throws {
        let policy = SimulationPolicy(rawValue: policy)!
        let trace = try Self.load(self.trace)
        let result = policy.run(trace, floor: floor)
        if json {
            print(result.metrics.json)
        } else {
            let m = result.metrics
            let days = Int((trace.duration / 86_400).rounded(.up))
            let rows: [(String, String)] = [
                ("policy", policy.rawValue),
                ("trace", "\(self.trace) (\(trace.events.count) events, \(trace.apps.count) apps, \(days) day\(days == 1 ? "" : "s"))"),
                ("floor", "\(Self.number(floor)) s"),
                ("fetch_wakes", "\(m.fetchWakes)"),
                ("wake_events", "\(m.wakeEvents)"),
                ("nodata_fetches", "\(m.nodataFetches)" + (m.fetchWakes > 0 ? " (\(Int((100 * Double(m.nodataFetches) / Double(m.fetchWakes)).rounded())) %)" : "")),
                ("mean_staleness_s", Self.duration(m.meanStalenessS)),
                ("p90_staleness_s", Self.duration(m.p90StalenessS)),
                ("opens", "\(m.opens)"),
                ("push wakes", "\(m.pushWakes)"),
                ("rule violations", "\(m.ruleViolations)"),
            ]
            for (name, value) in rows { print(name.padding(toLength: 18, withPad: " ", startingAt: 0) + value) }
        }
        for violation in result.violations.prefix(5) { try? OutputFile.write("rule violation: \(violation)\n", toDescriptor: STDERR_FILENO) }
        if result.violations.count > 5 { try? OutputFile.write("… and \(result.violations.count - 5) more rule violations\n", toDescriptor: STDERR_FILENO) }
        if let plot {
            let day = plotDay ?? DayPlot.firstDayWithOpens(in: trace)
            let svg = DayPlot(trace: trace, result: result, day: day, caption: "policy \(policy.rawValue), floor \(Self.number(floor)) s").svg()
            do {
                try OutputFile.write(svg, to: plot)
            } catch {
                throw SimError("cannot write \(plot): \(error)")
            }
        }
    }

    /// Reads and checks a trace file; errors name the file and line.
    static func load(_ path: String) throws -> Trace {
        let text: String
        if path == "-" {
            text = String(decoding: FileHandle.standardInput.readDataToEndOfFile(), as: UTF8.self)
        } else {
            guard let data = FileManager.default.contents(atPath: path) else { throw SimError("cannot read \(path)") }
            text = String(decoding: data, as: UTF8.self)
        }
        do {
            return try Trace(parsing: text)
        } catch {
            throw SimError("\(path == "-" ? "<stdin>" : path): \(error)")
        }
    }

    static func number(_ value: Double) -> String {
        value == value.rounded() && abs(value) < 1e15 ? String(Int64(value)) : String(value)
    }

    /// Seconds, and in words when long: "1234.5 s (20 min 34 s)".
    static func duration(_ seconds: Double) -> String {
        let text = String(format: "%.1f s", seconds)
        guard seconds >= 60 else { return text }
        let total = Int(seconds.rounded())
        let h = total / 3600, m = total % 3600 / 60, s = total % 60
        return text + " (" + (h > 0 ? "\(h) h \(m) min" : "\(m) min \(s) s") + ")"
    }
}

/// An error for the user, printed as it is.
struct SimError: Error, CustomStringConvertible {
    var description: String
    /// Escaped: it may quote a trace (an app named with a terminal's control sequences).
    init(_ description: String) { self.description = LogText.escaped(description) }
}
