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
}
