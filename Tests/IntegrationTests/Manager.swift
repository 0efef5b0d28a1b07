import BgTaskTestKit

/// Shorthands for calling the Manager interface with gdbus, which prints
/// error names (busctl does not).
extension DaemonUnderTest {
    func gdbusCall(_ member: String, _ arguments: [String] = []) throws -> CommandResult {
        try gdbus(["call", "--session", "--dest", "org.bgtaskd.BackgroundTasks1",
                   "--object-path", "/org/bgtaskd/BackgroundTasks1",
                   "--method", "org.bgtaskd.BackgroundTasks1.Manager.\(member)"] + arguments)
    }

    /// A property's value as busctl prints it (`u 1`, `b false` …).
    func property(_ name: String) throws -> String {
        try busctl(["get-property", "org.bgtaskd.BackgroundTasks1", "/org/bgtaskd/BackgroundTasks1",
                    "org.bgtaskd.BackgroundTasks1.Manager", name]).standardOutput
    }
}
