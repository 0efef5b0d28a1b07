/// The machine's CPU time from the first line of /proc/stat, to tell a quiet
/// run from a disturbed one: on a shared VM the hypervisor's steal time is
/// what turns a 1 ms tail into a 100 ms one.
struct CPUTimes {
    /// user, nice, system, idle, iowait, irq, softirq, steal (in ticks).
    private let fields: [Int]

    /// Now, or nil when /proc/stat is unreadable.
    static func now() -> CPUTimes? {
        guard let text = ProcStatus.read("/proc/stat"),
              let line = text.split(separator: "\n").first(where: { $0.hasPrefix("cpu ") }) else { return nil }
        let numbers = line.split(separator: " ").dropFirst().compactMap { Int($0) }
        guard numbers.count >= 8 else { return nil }
        return CPUTimes(fields: Array(numbers.prefix(8)))
    }

    private var total: Int { fields.reduce(0, +) }
    private var idle: Int { fields[3] + fields[4] }
    /// Time stolen by the hypervisor, summed over all CPUs, in USER_HZ ticks (10 ms).
    var steal: Int { fields[7] }

    /// Shares of all CPUs' time since `earlier`: busy (any process, this
    /// benchmark included) and stolen by the hypervisor.
    func shares(since earlier: CPUTimes) -> (busy: Double, stolen: Double) {
        let ticks = Double(max(1, total - earlier.total))
        let stolen = Double(steal - earlier.steal) / ticks
        let busy = Double((total - idle - steal) - (earlier.total - earlier.idle - earlier.steal)) / ticks
        return (busy, stolen)
    }

    /// `machine: 23% of all CPUs busy, 4.0% stolen by the hypervisor` since `earlier`.
    func summary(since earlier: CPUTimes?) -> String {
        guard let earlier else { return "machine: load unknown" }
        let (busy, stolen) = shares(since: earlier)
        return "machine: \(format(busy * 100, 0))% of all CPUs busy, \(format(stolen * 100, 1))% stolen by the hypervisor"
    }

    /// `busy 23%, steal 4.0%` since `earlier` (for the summary table).
    static func brief(since earlier: CPUTimes?) -> String {
        guard let earlier, let later = now() else { return "" }
        let (busy, stolen) = later.shares(since: earlier)
        return "busy \(format(busy * 100, 0))%, steal \(format(stolen * 100, 1))%"
    }
}
