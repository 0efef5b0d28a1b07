import ArgumentParser
import BgTaskProtocol
import Glibc
import SDBus

/// Figures: `DeliverPush` → `NotificationReceived` reaching an app that is
/// already running, against one Echo round trip of the C baseline (median),
/// and its p99.
///
/// One connection plays the app: it checked in with an app id whose desktop
/// entry declares `remote-notification`, is in the background and listens
/// for `NotificationReceived` with a match rule, as an SDK would. A second
/// connection of the same process plays the trusted sender (an unsandboxed
/// process of the same user). Each sample is the time from sending
/// `DeliverPush(app, payload, {})` on the sender's connection to the moment
/// the app's connection dispatches the `NotificationReceived` that carries
/// that payload (CLOCK_MONOTONIC, one process); the app then answers
/// `CompleteNotification(token, "noData")`, so nothing piles up, and the
/// next sample starts. Both connections are polled together, the app's
/// first, so neither waits for the other.
///
/// Pushes are silent (`{"aps":{"content-available":1}}`) unless `--kind
/// alert`: silent pushes are what wakes an app, and the daemon must run with
/// a `RemoteNotifications.SilentPerHour` above the number of pushes sent.
///
/// Like `fetch-latency`, this runs interleaved with the baseline's
/// `callbench echo` for several rounds in alternating order; each round gives
/// push_median / echo_median and the figure is the median of the rounds'
/// ratios. The p99 figure is over every timed push of all rounds. The
/// `DeliverPush` reply, the `CompleteNotification` round trip and the CPU
/// time the daemon spends per push (against the baseline's per Echo, both
/// from /proc/PID/stat) are printed too.
struct PushLatencyCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "push-latency",
        abstract: "DeliverPush → NotificationReceived at a running app, against one Echo call of the C baseline (median of rounds), and its p99.",
        discussion: "Run the daemon with --set RemoteNotifications.SilentPerHour=1000000 (or more than the pushes sent).")

    @OptionGroup var target: BusOptions

    @Option(help: ArgumentHelp("The baseline's callbench binary.", valueName: "PATH"))
    var callbench: String

    @Option(help: "Interleaved rounds of `callbench echo` and of pushes.")
    var rounds = 5

    @Option(help: "Echo calls per round.")
    var echoCalls = 4000

    @Option(help: "Pushes timed per round.")
    var pushes = 2000

    @Option(help: "Untimed pushes before the first round.")
    var warmup = 200

    @Option(help: "silent ({\"aps\":{\"content-available\":1}}) or alert ({\"aps\":{\"alert\":…}}).")
    var kind = "silent"

    @Option(help: "The app id the benchmark checks in as.")
    var appID = "org.bgtaskd.Bench.Push"

    @Option(help: ArgumentHelp("XDG_DATA_HOME the daemon reads desktop entries from (default: $XDG_DATA_HOME); the app's entry is written there.", valueName: "DIR"))
    var dataHome: String?

    @Option(help: "The app's state while pushes reach it: background, inactive or active.")
    var appState = "background"

    @Option(help: "Target: the largest acceptable push / echo ratio (medians).")
    var maxRatio = 3.0

    @Option(help: "Target: the largest acceptable p99 of DeliverPush → NotificationReceived, in ms.")
    var maxP99Ms = 5.0

    func validate() throws {
        guard rounds >= 1, pushes >= 10 else { throw ValidationError("need at least 1 round and 10 pushes") }
        guard BenchPush.kinds.contains(kind) else { throw ValidationError("--kind is silent or alert, not '\(kind)'") }
    }

    func run() throws {
        let app = try target.connect()
        let sender = try target.connect()
        let daemon = try target.daemon(via: sender)
        let home = dataHome ?? DesktopEntries.defaultDataHome
        let wrote = try DesktopEntries.write(id: appID, modes: ["remote-notification"], dataHome: home)

        try app.checkIn(appID)
        try app.setState(appState)
        let probe = try PushProbe(app: app, sender: sender, appID: appID, kind: kind)
        // The daemon reloads desktop entries a moment after they change: the first push that it takes is the first warm-up push.
        try waitUntilKnown(probe, wrote: wrote)
        say("push-latency: daemon pid \(daemon.pid); app \(appID) (\(appState)), \(kind) pushes;"
            + " \(rounds) rounds of callbench echo \(echoCalls) / \(pushes) pushes, alternating order")

        for _ in 0..<warmup { _ = try probe.push() }

        // CPU time of the daemon per push and of the baseline per Echo: what each service spends on its side.
        let baseline = try? ProcStatus(pid: sender.ownerPID(of: "org.bgtaskd.Baseline"))
        var rounds = WakeLatencyRounds(path: "DeliverPush→NotificationReceived", reply: "DeliverPush reply", complete: RemoteNotificationsInterface.Method.completeNotification.rawValue)
        let runStart = CPUTimes.now()
        try rounds.run(rounds: self.rounds, echoCalls: echoCalls, wakes: pushes, callbench: callbench, baseline: baseline, daemon: daemon) {
            try probe.push()
        }
        let machine = CPUTimes.brief(since: runStart)
        rounds.summarize("push-latency", noun: "pushes", cpuNote: "push (DeliverPush + NotificationReceived + CompleteNotification)")
        let ratio = rounds.ratio
        let signal = rounds.signal
        let slow = rounds.all.enumerated().filter { $0.element.signal > maxP99Ms * 1000 }
        if !slow.isEmpty {
            say("  over \(format(maxP99Ms, 1)) ms: \(slow.count) pushes: "
                + slow.prefix(20).map { "#\($0.offset + 1) \(milliseconds($0.element.signal)) ms" }.joined(separator: ", "))
        }
        let left = try sender.listPushes(appID)
        say("  NotificationReceived signals seen \(probe.signals); pushes the daemon still holds for the app: \(left.count);"
            + " daemon VmRSS \(format(daemon.residentMiB ?? .nan, 1)) MiB")

        Figure.atMost("push", "DeliverPush→NotificationReceived / 1 Echo call (median of \(self.rounds) rounds; push p50 \(format(rounds.wakeMedian, 0)) µs)",
                      value: ratio, limit: maxRatio, unit: "x", decimals: 3, machine: machine).report()
        Figure.atMost("push-p99", "DeliverPush→NotificationReceived p99 (n=\(signal.count), p50 \(milliseconds(signal.median)) ms)",
                      value: signal.p99 / 1000, limit: maxP99Ms, unit: "ms", decimals: 3, machine: machine).report()
    }

    /// Pushes until the daemon knows the app's desktop entry (10 s at most).
    private func waitUntilKnown(_ probe: PushProbe, wrote: Bool) throws {
        let start = MonotonicTime.nanoseconds()
        while true {
            let problem: PushProbeError
            do {
                _ = try probe.push()
                return
            } catch let error as PushProbeError {
                problem = error
            }
            let unknown = [BgTaskError.Code.unknownApplication.rawValue, BgTaskError.Code.modeNotDeclared.rawValue].contains(problem.bus?.name)
            if !unknown || MonotonicTime.microseconds(since: start) > 10e6 {
                throw ValidationError("the daemon does not take pushes for \(appID)"
                    + " (its desktop entry was \(wrote ? "written" : "found") in \(dataHome ?? DesktopEntries.defaultDataHome)/applications): \(problem)")
            }
            MonotonicTime.sleep(seconds: 0.05)
        }
    }
}
