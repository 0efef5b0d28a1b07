/// One measured figure against its target, printed as a tab-separated line
///
///     figure <TAB> id <TAB> what <TAB> value <TAB> target <TAB> PASS|FAIL|info <TAB> machine
///
/// that bench/run collects into its summary table. `machine` says how busy
/// the machine was while the figure was measured (see ``CPUTimes``).
struct Figure {
    /// Short key: `pair`, `hold-rss`, `hold-p99`, `expiry-p99`, `idle`, `fetch`,
    /// `push`, `push-rate`, `scheduler-p99`, `startup-rss`, `startup-time` ….
    var id: String
    /// What was measured, for people.
    var what: String
    /// The measured value with its unit.
    var value: String
    /// The target with its unit (`<= 1.2`).
    var target: String
    var passed: Bool
    /// How loaded the machine was meanwhile: `busy 12%, steal 0.0%`.
    var machine = ""
    /// Printed for information only: no target, never a failure.
    var isInfo = false

    /// A figure that passes when `value <= limit`.
    static func atMost(
        _ id: String, _ what: String, value: Double, limit: Double, unit: String, decimals: Int = 2, machine: String = ""
    ) -> Figure {
        let suffix = unit.isEmpty ? "" : " " + unit
        return Figure(
            id: id, what: what, value: format(value, decimals) + suffix,
            target: "<= " + format(limit, decimals) + suffix, passed: value <= limit, machine: machine)
    }

    /// A figure that passes when `value >= limit`.
    static func atLeast(
        _ id: String, _ what: String, value: Double, limit: Double, unit: String, decimals: Int = 2, machine: String = ""
    ) -> Figure {
        let suffix = unit.isEmpty ? "" : " " + unit
        return Figure(
            id: id, what: what, value: format(value, decimals) + suffix,
            target: ">= " + format(limit, decimals) + suffix, passed: value >= limit, machine: machine)
    }

    /// A figure printed for information, with no target (RESULT `info`; it never fails the run).
    static func info(_ id: String, _ what: String, value: String, machine: String = "") -> Figure {
        Figure(id: id, what: what, value: value, target: "-", passed: true, machine: machine, isInfo: true)
    }

    /// Writes the `figure` line to standard output.
    func report() {
        say(["figure", id, what, value, target, isInfo ? "info" : passed ? "PASS" : "FAIL", machine.isEmpty ? "-" : machine].joined(separator: "\t"))
    }
}
