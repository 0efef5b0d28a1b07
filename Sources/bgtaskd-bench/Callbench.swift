import ArgumentParser

/// The C baseline's `callbench` (from `$BGTASKD_BASELINE/callbench.c`), run
/// as a child process on the same bus: the figures compare with its medians.
enum Callbench {
    /// One `callbench` line: `echo n=5000 median_us=55.1 p90_us=… p99_us=… max_us=… per_s=…`.
    struct Run {
        var median: Double
        var p99: Double
        var line: String
    }

    /// Runs `callbench kind count` (`echo` or `tasks`) and reads its line.
    static func run(_ path: String, _ kind: String, _ count: Int) throws -> Run {
        let (status, output) = try ChildProcess.run(path, [kind, String(count)])
        guard status == 0, let line = output.split(separator: "\n").first(where: { $0.hasPrefix(kind + " ") }) else {
            throw ValidationError("callbench \(kind) \(count) failed (status \(status)): \(output)")
        }
        func value(_ key: String) -> Double? {
            line.split(separator: " ").first { $0.hasPrefix(key + "=") }.flatMap { Double($0.dropFirst(key.count + 1)) }
        }
        guard let median = value("median_us"), let p99 = value("p99_us") else {
            throw ValidationError("cannot read callbench's line: \(line)")
        }
        return Run(median: median, p99: p99, line: String(line))
    }
}
