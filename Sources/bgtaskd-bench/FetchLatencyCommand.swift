import ArgumentParser
import BgTaskProtocol
import Glibc
import SDBus

/// Figure: `SimulateFetch` → `PerformFetch` reaching an app that is already
/// running, against one Echo round trip of the C baseline.
///
/// One connection plays the app: it checked in with an app id whose desktop
/// entry declares `fetch`, is in the background and listens for
/// `PerformFetch` with a match rule, as the SDK does. A second connection of
/// the same process plays the trusted tool. Each sample is the time from
/// sending `SimulateFetch(app)` on the tool's connection to the moment the
/// app's connection dispatches the `PerformFetch` signal (CLOCK_MONOTONIC, one
/// process); the app then answers `CompleteFetch(token, "noData")`, so no
/// tokens pile up, and the next sample starts. Both connections are polled
/// together, the app's first, so neither waits for the other.
///
/// Like `pair`, this runs interleaved with the baseline's `callbench echo`
/// for several rounds in alternating order; each round gives
/// fetch_median / echo_median and the figure is the median of the rounds'
/// ratios. The `SimulateFetch` reply, the `CompleteFetch` round trip and the
/// CPU time the daemon spends per wake (against the baseline's per Echo, both
/// from /proc/PID/stat) are printed too: they show what the fetch plugin's
/// calls cost. The untimed warm-up fills the app's fetch history to the 64
/// outcomes the plugin keeps, its steady state.
struct FetchLatencyCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "fetch-latency",
        abstract: "SimulateFetch → PerformFetch at a running app, against one Echo call of the C baseline (median of rounds).")

    @OptionGroup var target: BusOptions

    @Option(help: ArgumentHelp("The baseline's callbench binary.", valueName: "PATH"))
    var callbench: String

    @Option(help: "Interleaved rounds of `callbench echo` and of fetch wakes.")
    var rounds = 5

    @Option(help: "Echo calls per round.")
    var echoCalls = 4000

    @Option(help: "Fetch wakes timed per round.")
    var fetches = 2000

    @Option(help: "Untimed fetch wakes before the first round.")
    var warmup = 200

    @Option(help: "The app id the benchmark checks in as.")
    var appID = "org.bgtaskd.Bench.Fetch"

    @Option(help: ArgumentHelp("XDG_DATA_HOME the daemon reads desktop entries from (default: $XDG_DATA_HOME); the app's entry is written there.", valueName: "DIR"))
    var dataHome: String?

    @Option(help: "The app's state while it is woken: background, inactive or active.")
    var appState = "background"

    @Option(help: "Target: the largest acceptable fetch / echo ratio.")
    var maxRatio = 2.0

    func validate() throws {
        guard rounds >= 1, fetches >= 10 else { throw ValidationError("need at least 1 round and 10 fetches") }
    }

    func run() throws {
        let app = try target.connect()
        let tool = try target.connect()
        let daemon = try target.daemon(via: tool)
        let home = dataHome ?? DesktopEntries.defaultDataHome
        let wrote = try DesktopEntries.write(id: appID, modes: ["fetch"], dataHome: home)

        try app.checkIn(appID)
        // The daemon reloads desktop entries a moment after they change: wait until it knows this one.
        let registration = try waitUntilKnown(app, wrote: wrote)
        try app.setState(appState)
        let probe = try FetchProbe(app: app, tool: tool, appID: appID)
        say("fetch-latency: daemon pid \(daemon.pid); app \(appID) (\(appState), fetch policy \(registration.policy));"
            + " \(rounds) rounds of callbench echo \(echoCalls) / \(fetches) fetch wakes, alternating order")

        for _ in 0..<warmup { _ = try probe.wake() }

        // CPU time of the daemon per wake and of the baseline per Echo: what each service spends on its side.
        let baseline = try? ProcStatus(pid: tool.ownerPID(of: "org.bgtaskd.Baseline"))
        var rounds = WakeLatencyRounds(path: "SimulateFetch→PerformFetch", reply: "SimulateFetch reply", complete: FetchInterface.Method.completeFetch.rawValue)
        let runStart = CPUTimes.now()
        try rounds.run(rounds: self.rounds, echoCalls: echoCalls, wakes: fetches, callbench: callbench, baseline: baseline, daemon: daemon) {
            try probe.wake()
        }
        let machine = CPUTimes.brief(since: runStart)
        rounds.summarize("fetch-latency", noun: "wakes", cpuNote: "wake (SimulateFetch + PerformFetch + CompleteFetch)")
        say("  PerformFetch signals seen \(probe.signals); daemon VmRSS \(format(daemon.residentMiB ?? .nan, 1)) MiB")

        Figure.atMost("fetch", "SimulateFetch→PerformFetch / 1 Echo call (median of \(self.rounds) rounds; fetch p50 \(format(rounds.wakeMedian, 0)) µs)",
                      value: rounds.ratio, limit: maxRatio, unit: "x", decimals: 3, machine: machine).report()
    }

    /// Asks for the app's fetch registration until the daemon knows its desktop entry (10 s at most).
    private func waitUntilKnown(_ app: ManagerClient, wrote: Bool) throws -> (policy: String, seconds: Double, next: UInt64) {
        let start = MonotonicTime.nanoseconds()
        while true {
            let problem: BusError
            do {
                return try app.fetchRegistration()
            } catch {
                problem = error
            }
            let unknown = [BgTaskError.Code.unknownApplication.rawValue, BgTaskError.Code.modeNotDeclared.rawValue].contains(problem.name)
            if !unknown || MonotonicTime.microseconds(since: start) > 10e6 {
                throw ValidationError("the daemon does not know \(appID) as a fetch app"
                    + " (its desktop entry was \(wrote ? "written" : "found") in \(dataHome ?? DesktopEntries.defaultDataHome)/applications): \(problem)")
            }
            MonotonicTime.sleep(seconds: 0.05)
        }
    }
}
