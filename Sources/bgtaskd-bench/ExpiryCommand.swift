import ArgumentParser
import Glibc

/// Figure 3: how late SIGTERM reaches a process that overstays its
/// background time, measured over many expiries.
///
/// Each victim (this tool re-run as `bgtaskd-bench victim`) opens a task and
/// switches to the background between CLOCK_MONOTONIC instants t0 and t1; the
/// daemon's deadline D is then in [t0 + budget, t1 + budget]. Under load that
/// interval can be milliseconds wide, so each victim also locates D by the
/// daemon's own `GetBackgroundTimeRemaining` answers (see ``VictimCommand``),
/// which narrows it to about one round trip. Lateness is `sigterm − D`; the
/// figure is its upper bound, sigterm minus the earliest possible D. The
/// cruder `sigterm − (t1 + budget)` (a lower bound) and
/// `sigterm − (t0 + budget)` (an upper bound) are printed too. Lateness
/// includes the victim's own wake-up: it is when the signal reached the
/// process, not when it was sent.
struct ExpiryCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "expiry",
        abstract: "Lateness of SIGTERM after an overstaying process's deadline (run bgtaskd with small budgets).")

    @OptionGroup var target: BusOptions

    @Option(help: "Expiries to measure (victim processes in all).")
    var count = 200

    @Option(help: "Victims running at once.")
    var parallel = 20

    @Flag(inversion: .prefixedNo, help: "Start victims in waves of --parallel (else replace each as it exits, so start-ups overlap expiries).")
    var waves = true

    @Option(help: "The daemon's Tasks.BudgetSec (it must match: the victims check it).")
    var budget = 1.0

    @Option(help: "Target: the largest acceptable p99 lateness, in ms.")
    var maxP99Ms = 10.0

    @Flag(help: "Print one line per victim: pid and CLOCK_MONOTONIC ns of the deadline (earliest, latest) and of SIGTERM.")
    var details = false

    func validate() throws {
        guard count >= 1, parallel >= 1 else { throw ValidationError("--count and --parallel must be positive") }
        guard budget > 0 else { throw ValidationError("--budget must be positive") }
    }

    /// What one victim reported.
    struct Expiry {
        var pid: Int32 = 0
        var t0: Int64
        var t1: Int64
        /// The daemon's deadline lies in dlo…dhi, by its own account.
        var dlo: Int64
        var dhi: Int64
        var sigterm: Int64
        /// Steal ticks from shortly before the deadline to SIGTERM, -1 if unknown.
        var steal: Int
        var remaining: Double
    }

    func run() throws {
        let executable = ChildProcess.ownExecutable
        var arguments = ["victim", "--bus", target.bus, "--timeout", format(budget + 15, 1)]
        if let pid = target.daemonPID { arguments += ["--daemon-pid", String(pid)] }
        say("expiry: \(count) victims, \(parallel) at once \(waves ? "in waves" : "(each replaced as it exits)"), budget \(format(budget, 3)) s")

        var running: [ChildProcess] = []
        var started = 0
        var expiries: [Expiry] = []
        var failures: [String] = []
        let start = MonotonicTime.nanoseconds()
        let load = CPUTimes.now()
        while started < count || !running.isEmpty {
            // Victims start in waves: the next wave only once the last one
            // expired, so that no process start-up competes for the CPU with
            // the expiries being measured.
            if running.isEmpty || !waves {
                while started < count && running.count < parallel {
                    running.append(try ChildProcess(path: executable, arguments: arguments))
                    started += 1
                }
            }
            var pollers = running.map { pollfd(fd: $0.outputFD, events: Int16(POLLIN), revents: 0) }
            _ = poll(&pollers, nfds_t(pollers.count), 1000)
            running.removeAll { child in
                if child.readAvailable() { return false }
                let status = child.wait()
                let text = child.outputText.split(separator: "\n").last.map(String.init) ?? ""
                if var expiry = Self.parse(text) {
                    expiry.pid = child.pid
                    expiries.append(expiry)
                } else {
                    failures.append("pid \(child.pid) (status \(status)): \(text.isEmpty ? "no output" : text)")
                }
                return true
            }
        }
        let seconds = MonotonicTime.microseconds(since: start) / 1e6
        var machine = CPUTimes.brief(since: load)
        for failure in failures.prefix(5) { note("  victim failed: \(failure)") }

        let budgetNs = Int64((budget * 1e9).rounded())
        // The deadline by both accounts: [t0, t1] + budget and the daemon's answers.
        let earliest = expiries.map { max($0.t0 + budgetNs, $0.dlo) }
        let latest = expiries.map { min($0.t1 + budgetNs, $0.dhi) }
        func stats(_ instants: [Int64]) -> LatencyStats {
            LatencyStats(zip(expiries, instants).map { Double($0.sigterm - $1) / 1000 })
        }
        let late = stats(earliest)
        let lateLow = stats(latest)
        let lateT1 = stats(expiries.map { $0.t1 + budgetNs })
        let lateT0 = stats(expiries.map { $0.t0 + budgetNs })
        let width = LatencyStats(zip(earliest, latest).map { Double($1 - $0) / 1000 })
        let switchCall = LatencyStats(expiries.map { Double($0.t1 - $0.t0) / 1000 })
        // The daemon's own idea of the budget, seen right after t1: it must agree with --budget.
        let budgetSeen = LatencyStats(expiries.map { $0.remaining })
        let inconsistent = zip(earliest, latest).filter { $0 > $1 }.count
        // Expiries during which the hypervisor stole CPU time, and the figure without them.
        let disturbed = expiries.filter { $0.steal != 0 }.count
        let undisturbed = LatencyStats(zip(expiries, earliest).filter { $0.0.steal == 0 }.map { Double($0.0.sigterm - $0.1) / 1000 })
        if details {
            for (index, expiry) in expiries.enumerated() {
                say("  victim pid=\(expiry.pid) deadline=\(earliest[index])..\(latest[index]) sigterm=\(expiry.sigterm)"
                    + " late_us=\(format(Double(expiry.sigterm - earliest[index]) / 1000, 1)) steal=\(expiry.steal)")
            }
        }
        say("  \(expiries.count) expiries in \(format(seconds, 1)) s, \(failures.count) victims failed; \(CPUTimes.now()?.summary(since: load) ?? "")")
        say("  SetApplicationState round trip (t1 − t0): \(switchCall.summaryInMilliseconds)")
        say("  daemon's remaining time right after t1: median \(format(budgetSeen.median, 4)) s (budget \(format(budget, 3)) s)")
        say("  deadline located to within: \(width.summaryInMilliseconds)\(inconsistent > 0 ? " (\(inconsistent) inconsistent)" : "")")
        say("  lateness, upper bound sigterm − earliest deadline: \(late.summaryInMilliseconds)")
        say("  lateness, lower bound sigterm − latest deadline:   \(lateLow.summaryInMilliseconds)")
        say("  \(disturbed) expiries saw steal time (or did not measure it); without them: \(undisturbed.summaryInMilliseconds)")
        say("  cruder:   sigterm − (t1 + budget): \(lateT1.summaryInMilliseconds), min \(milliseconds(lateT1.min)) ms")
        say("            sigterm − (t0 + budget): \(lateT0.summaryInMilliseconds), min \(milliseconds(lateT0.min)) ms")

        guard failures.isEmpty, !expiries.isEmpty else {
            throw ValidationError("\(failures.count) of \(count) victims got no SIGTERM or failed")
        }
        guard abs(budgetSeen.median - budget) < 0.1 else {
            throw ValidationError("the daemon's budget is about \(format(budgetSeen.median, 3)) s, not --budget \(budget)")
        }
        guard inconsistent == 0 else {
            throw ValidationError("\(inconsistent) victims saw a deadline outside [t0, t1] + budget: is --budget right?")
        }
        if disturbed > 0 {
            machine += "; \(disturbed) expiries saw steal, p99 of the other \(undisturbed.count): \(milliseconds(undisturbed.p99)) ms"
        }
        Figure.atMost("expiry-p99", "SIGTERM after deadline, p99 of \(late.count) (p50 \(milliseconds(late.median)), max \(milliseconds(late.max)) ms)",
                      value: late.p99 / 1000, limit: maxP99Ms, unit: "ms", decimals: 3, machine: machine).report()
    }

    /// `term t0=… t1=… sigterm=… steal=… dlo=… dhi=… remaining=…`.
    static func parse(_ line: String) -> Expiry? {
        let fields = line.split(separator: " ")
        guard fields.first == "term" else { return nil }
        func value(_ key: String) -> Substring? {
            fields.first { $0.hasPrefix(key + "=") }?.dropFirst(key.count + 1)
        }
        guard let t0 = value("t0").flatMap({ Int64($0) }), let t1 = value("t1").flatMap({ Int64($0) }),
              let sigterm = value("sigterm").flatMap({ Int64($0) }),
              let dlo = value("dlo").flatMap({ Int64($0) }), let dhi = value("dhi").flatMap({ Int64($0) }),
              let steal = value("steal").flatMap({ Int($0) }),
              let remaining = value("remaining").flatMap({ Double($0) }) else { return nil }
        return Expiry(t0: t0, t1: t1, dlo: dlo, dhi: dhi, sigterm: sigterm, steal: steal, remaining: remaining)
    }
}
