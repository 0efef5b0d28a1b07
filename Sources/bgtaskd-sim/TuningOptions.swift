import ArgumentParser
import BgTaskSimulator

/// `--tune NAME=VALUE`, shared by the commands that run the adaptive planner.
struct TuningOptions: ParsableArguments {
    @Option(name: .long, help: ArgumentHelp(
        "Set a tunable of the adaptive planner (repeatable): " + PlannerTuning.names.sorted { $0.key < $1.key }.map { "\($0.key) (\($0.value))" }.joined(separator: "; ") + ".",
        valueName: "NAME=VALUE"))
    var tune: [String] = []

    func validate() throws {
        do {
            _ = try PlannerTuning(tune)
        } catch {
            throw ValidationError(error.description)
        }
    }

    /// The settings (validated).
    var tuning: PlannerTuning { (try? PlannerTuning(tune)) ?? PlannerTuning() }
}
