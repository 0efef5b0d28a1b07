import BgTaskTestKit
import Foundation
import Testing

/// `bgtaskd-sim` as separate processes: the planner must not depend on
/// anything but its inputs. Swift seeds Set and Dictionary hashing per
/// process, so an iteration over a Set that reaches a decision shows up only
/// here, as different figures for the same trace from one run to the next.
@Suite struct SimulatorDeterminismTests {
    @Test func theSameTraceGivesTheSameFiguresInEveryProcess() throws {
        let sim = BinaryLocator.path(of: "bgtaskd-sim")
        let trace = NSTemporaryDirectory() + "bgtaskd-sim-\(UUID()).jsonl"
        defer { try? FileManager.default.removeItem(atPath: trace) }
        let generated = try CommandResult.run(sim, ["generate", "--apps", "30", "--days", "14", "--seed", "1"])
        #expect(generated.succeeded, "\(generated)")
        try generated.standardOutput.write(toFile: trace, atomically: true, encoding: .utf8)
        var outputs: Set<String> = []
        for _ in 0..<4 {
            let run = try CommandResult.run(sim, ["run", "--trace", trace, "--policy", "adaptive", "--json"], timeout: .seconds(60))
            #expect(run.succeeded, "\(run)")
            outputs.insert(run.standardOutput)
        }
        #expect(outputs.count == 1, "different figures for one trace: \(outputs.sorted())")
    }

    @Test func figuresCompareAdaptiveAndNaiveOverSeveralSeeds() throws {
        let sim = BinaryLocator.path(of: "bgtaskd-sim")
        let result = try CommandResult.run(sim, ["figures", "--apps", "6", "--days", "4", "--compare-seeds", "3"], timeout: .seconds(120))
        // The figures themselves may fail on so small a trace; the comparison is printed either way.
        let lines = result.standardOutput.split(separator: "\n")
        #expect(lines.filter { $0.hasPrefix("   1 ") || $0.hasPrefix("   2 ") || $0.hasPrefix("   3 ") }.count == 3, "\(result)")
        #expect(lines.last?.hasPrefix("mean staleness over 3 seeds: adaptive ") == true, "\(result)")
    }

    /// Options that made a run go without bound or trap: a floor near 0
    /// (6 GB and growing at 1 µs), and sizes whose product overflowed
    /// (`--days 9223372036854775807` trapped with SIGILL) or asked for
    /// terabytes. Each is refused with the reason and exit 64.
    @Test func optionsThatWouldRunWithoutBoundAreRefused() throws {
        let sim = BinaryLocator.path(of: "bgtaskd-sim")
        for (arguments, reason) in [
            (["figures", "--floor", "0.000001"], "--floor must be a number of seconds from 60"),
            (["figures", "--floor", "0"], "--floor must be"),
            (["evaluate", "--seeds", "1-1", "--floor", "0.001"], "--floor must be"),
            (["figures", "--days", "9223372036854775807"], "--days must be from 2 to 366"),
            (["generate", "--days", "106751991167", "--apps", "1"], "--days must be from 1 to 366"),
            (["generate", "--apps", "100000000"], "--apps must be from 1 to 10000"),
            (["generate", "--apps", "1", "--pushes-per-day", "1e300"], "--pushes-per-day must be from 0 to 1440"),
            (["generate", "--apps", "1", "--content-per-day", "1-1e300"], "--content-per-day must be A-B, at most 1440"),
            (["generate", "--apps", "1", "--app-content", "0:1e300"], "PER_DAY at most 1440"),
        ] {
            let result = try CommandResult.run(sim, arguments)
            #expect(result.exit == .status(64), "\(arguments): \(result)")
            #expect(result.standardError.contains(reason), "\(arguments): \(result)")
        }
    }

    /// An error quoting a trace wrote an app's name as it is: a terminal
    /// took its control sequences (an OSC retitled the window).
    @Test func anErrorQuotingATraceIsEscaped() throws {
        let directory = NSTemporaryDirectory() + "bgtaskd-sim-escape-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: false)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let trace = directory + "/esc.jsonl"
        try #"{"t":0,"kind":"close","app":"x\u001b]0;pwned\u0007"}"#.write(toFile: trace, atomically: false, encoding: .utf8)
        let result = try CommandResult.run(BinaryLocator.path(of: "bgtaskd-sim"), ["--trace", trace])
        #expect(!result.succeeded, "\(result)")
        #expect(!result.standardError.contains("\u{1B}") && result.standardError.contains("\\u{1B}]0;pwned"), "\(result)")
    }
}
