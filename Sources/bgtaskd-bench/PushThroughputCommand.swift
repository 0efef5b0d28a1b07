import ArgumentParser
import BgTaskProtocol
import Glibc
import SDBus

/// Figure: sustained durable `DeliverPush` from 8 concurrent senders, in
/// acknowledged pushes per second, with the reply latency each sender sees.
///
/// Eight trusted sender connections (`--senders`), all driven by this one
/// thread, each keep a window of `--window` `DeliverPush` calls outstanding
/// (pipelined: a new call goes out the moment a reply comes in), until
/// `--pushes` have been acknowledged after `--warmup` untimed ones. The
/// figure is the acknowledged pushes divided by the time from the first
/// timed call to the last timed reply; the reply latency (send → reply, per
/// call, CLOCK_MONOTONIC) and the slowest and fastest whole second are
/// printed too. With 8 × 16 calls always in flight, the reply latency is
/// mostly queueing: about (8 × window) / throughput.
///
/// **What the pushes exercise.** Each push is a silent APNs-style payload to
/// one of `--apps` app ids (round robin), whose desktop entries declare
/// `remote-notification` (and `Exec=true`). None of them runs, and the
/// daemon must run with `RemoteNotifications.SilentPerHour=0`, so that every
/// push is *held*: the plugin validates the call, looks the app up, admits
/// the push to the app's inbox, stores the push and the app's counters in
/// the state database and only then replies — the whole durable path of
/// `DeliverPush` — but launches nothing (a silent push within the budget
/// would launch the app: 8 × thousands of process starts would measure
/// `fork`, not the push path; a running app that completes each push is
/// what `push-latency` measures). An app holds at most 1,000 pushes (then
/// the oldest silent ones are dropped), so the pushes are spread over enough
/// apps that none holds more than `--per-app` (500 by default).
///
/// **Nothing lost.** Every call must succeed, every push id must be new, and
/// afterwards `ListPushes("")` must list every acknowledged push id (warm-up
/// included) as `held`: the daemon dropped none of them. That they are on
/// disk before the reply is the daemon's guarantee (a commit per push or per
/// group of pushes, before the replies), which the integration tests check
/// across a SIGKILL.
struct PushThroughputCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "push-throughput",
        abstract: "Sustained durable DeliverPush from concurrent senders: acknowledged pushes/s and reply latency.",
        discussion: "Run the daemon with --set RemoteNotifications.SilentPerHour=0, so that every push is held (stored, not delivered).")

    @OptionGroup var target: BusOptions

    @Option(help: "Sender connections (each a trusted client of its own).")
    var senders = 8

    @Option(help: "DeliverPush calls each sender keeps in flight.")
    var window = 16

    @Option(help: "Timed pushes, in all senders.")
    var pushes = 40_000

    @Option(help: "Untimed pushes before the timed ones (they are checked like the others).")
    var warmup = 2000

    @Option(help: "The most pushes any one app is sent (the daemon holds 1,000 per app at most).")
    var perApp = 500

    @Option(help: "Payload size in bytes (a silent push padded with a filler field); 0: the bare payload, about 60 bytes.")
    var payloadBytes = 0

    @Option(help: "Prefix of the app ids the pushes go to (<prefix>.A<n>).")
    var appPrefix = "org.bgtaskd.Bench.PushFlood"

    @Option(help: ArgumentHelp("XDG_DATA_HOME the daemon reads desktop entries from (default: $XDG_DATA_HOME); the apps' entries are written there.", valueName: "DIR"))
    var dataHome: String?

    @Option(help: "Target: the fewest acceptable acknowledged pushes per second.")
    var minRate = 2000.0

    func validate() throws {
        guard senders >= 1, window >= 1 else { throw ValidationError("need at least one sender and a window of 1") }
        guard pushes >= 100, warmup >= 0 else { throw ValidationError("need at least 100 timed pushes") }
        guard (1...1000).contains(perApp) else { throw ValidationError("--per-app is 1...1000 (the daemon holds 1,000 pushes per app)") }
    }

    func run() throws {
        let control = try target.connect()
        let daemon = try target.daemon(via: control)
        let total = warmup + pushes
        let appCount = (total + perApp - 1) / perApp
        let apps = (0..<appCount).map { "\(appPrefix).A\($0)" }
        let home = dataHome ?? DesktopEntries.defaultDataHome
        for app in apps { try DesktopEntries.write(id: app, modes: ["remote-notification"], dataHome: home) }
        // The daemon reloads desktop entries a moment after they change: one push per app, once it takes them.
        var acknowledged = try waitUntilKnown(apps, via: control)
        let before = try control.listPushes("")
        guard before.count == acknowledged.count else {
            throw ValidationError("the daemon held \(before.count) pushes before the run, not the \(acknowledged.count) just sent:"
                + " run it on a fresh state directory with RemoteNotifications.SilentPerHour=0")
        }

        let clients = try (0..<senders).map { _ in try target.connect() }
        say("push-throughput: daemon pid \(daemon.pid); \(senders) senders × \(window) calls in flight;"
            + " \(warmup) + \(pushes) silent pushes (\(payloadBytes == 0 ? "bare" : "\(payloadBytes)-byte") payload) to \(appCount) apps")

        let flood = Flood(clients: clients, apps: apps, window: window, payloadBytes: payloadBytes)
        let warm = try flood.run(count: warmup, startIndex: acknowledged.count)
        acknowledged += warm.ids
        let cpuBefore = daemon.cpuSeconds ?? .nan
        let machineStart = CPUTimes.now()
        let timed = try flood.run(count: pushes, startIndex: acknowledged.count)
        let machine = CPUTimes.brief(since: machineStart)
        say("  " + (CPUTimes.now()?.summary(since: machineStart) ?? ""))
        let cpu = (daemon.cpuSeconds ?? .nan) - cpuBefore
        acknowledged += timed.ids

        let seconds = Double(timed.lastReply - timed.firstSend) / 1e9
        let rate = Double(timed.ids.count) / seconds
        let latency = LatencyStats(timed.latencies)
        let perSecond = timed.perSecond
        say("  \(timed.ids.count) pushes acknowledged in \(format(seconds, 2)) s: \(format(rate, 0)) pushes/s"
            + " (whole seconds: slowest \(perSecond.min().map(String.init) ?? "-"), fastest \(perSecond.max().map(String.init) ?? "-"));"
            + " warm-up \(format(Double(warm.ids.count) / (Double(warm.lastReply - warm.firstSend) / 1e9), 0)) pushes/s")
        say("  DeliverPush reply latency \(latency.summaryInMilliseconds)")
        say("  CPU time: bgtaskd \(format(cpu * 1e6 / Double(timed.ids.count), 1)) µs per push;"
            + " daemon VmRSS \(format(daemon.residentMiB ?? .nan, 1)) MiB")

        // Nothing lost: every acknowledged push is held by the daemon, once.
        let errors = warm.errors + timed.errors
        if !errors.isEmpty {
            say("  \(errors.count) calls failed: " + errors.prefix(5).joined(separator: "; "))
        }
        let unique = Set(acknowledged)
        let held = try control.listPushes("")
        let heldIDs = Set(held.map(\.id))
        let missing = unique.subtracting(heldIDs)
        let notHeld = held.filter { $0.state != "held" }.count
        let lost = missing.count + (acknowledged.count - unique.count) + errors.count
        say("  check: \(acknowledged.count) pushes acknowledged, \(unique.count) distinct ids; the daemon holds \(held.count),"
            + " \(missing.count) acknowledged ids missing, \(notHeld) not in state held")
        if !missing.isEmpty { say("  missing: " + missing.sorted().prefix(10).joined(separator: ", ")) }

        Figure.atLeast("push-rate", "durable DeliverPush, \(senders) senders × \(window) in flight (\(timed.ids.count) pushes; reply p50 \(milliseconds(latency.median)) ms, p99 \(milliseconds(latency.p99)) ms)",
                       value: rate, limit: minRate, unit: "/s", decimals: 0, machine: machine).report()
        Figure.atMost("push-lost", "pushes failed, duplicated or missing from ListPushes (of \(acknowledged.count + errors.count) sent)",
                      value: Double(lost + notHeld), limit: 0, unit: "", decimals: 0, machine: machine).report()
    }

    /// One push per app, retried until the daemon knows every app's desktop entry (10 s at most); their ids.
    private func waitUntilKnown(_ apps: [String], via client: ManagerClient) throws -> [String] {
        let start = MonotonicTime.nanoseconds()
        var ids: [String] = []
        for app in apps {
            while true {
                let problem: BusError
                do {
                    ids.append(try client.deliverPush(app, Flood.payload(tag: "known-\(app)", bytes: payloadBytes)))
                    break
                } catch {
                    problem = error
                }
                let unknown = [BgTaskError.Code.unknownApplication.rawValue, BgTaskError.Code.modeNotDeclared.rawValue].contains(problem.name)
                if !unknown || MonotonicTime.microseconds(since: start) > 10e6 {
                    throw ValidationError("the daemon does not take pushes for \(app)"
                        + " (its desktop entry is in \(dataHome ?? DesktopEntries.defaultDataHome)/applications): \(problem)")
                }
                MonotonicTime.sleep(seconds: 0.05)
            }
        }
        return ids
    }
}

/// Pipelined `DeliverPush` calls on several connections from one thread.
private final class Flood {
    let clients: [ManagerClient]
    let apps: [String]
    let window: Int
    let payloadBytes: Int

    /// What one run gave: the acknowledged push ids, the failures, and times (CLOCK_MONOTONIC ns).
    struct Outcome {
        var ids: [String] = []
        var errors: [String] = []
        /// Send → reply of each call, µs.
        var latencies: [Double] = []
        var firstSend: Int64 = 0
        var lastReply: Int64 = 0
        /// Reply instants, to count the replies of each whole second.
        var replies: [Int64] = []

        /// Replies in each whole second after the first send (the last, partial, one left out: none for a run under 1 s).
        var perSecond: [Int] {
            var counts: [Int] = []
            for instant in replies {
                let second = Int((instant - firstSend) / 1_000_000_000)
                while counts.count <= second { counts.append(0) }
                counts[second] += 1
            }
            return Array(counts.dropLast())
        }
    }

    init(clients: [ManagerClient], apps: [String], window: Int, payloadBytes: Int) {
        self.clients = clients
        self.apps = apps
        self.window = window
        self.payloadBytes = payloadBytes
    }

    /// A silent push tagged `tag`, padded to `bytes` when that is larger.
    static func payload(tag: String, bytes: Int) -> String {
        let bare = "{\"aps\":{\"content-available\":1},\"bench\":\"\(tag)\"}"
        let filler = bytes - bare.utf8.count - ",\"pad\":\"\"".utf8.count
        guard filler > 0 else { return bare }
        return "{\"aps\":{\"content-available\":1},\"bench\":\"\(tag)\",\"pad\":\"\(String(repeating: "x", count: filler))\"}"
    }

    /// Sends `count` pushes, numbered from `startIndex` (which picks their
    /// apps, round robin), keeping `window` in flight on each connection;
    /// returns when every one has been answered.
    func run(count: Int, startIndex: Int) throws -> Outcome {
        var outcome = Outcome()
        guard count > 0 else { return outcome }
        outcome.ids.reserveCapacity(count)
        outcome.latencies.reserveCapacity(count)
        outcome.replies.reserveCapacity(count)
        var next = 0
        var answered = 0
        var sendFailure: BusError?

        func send(on client: ManagerClient) {
            guard next < count, sendFailure == nil else { return }
            let index = startIndex + next
            next += 1
            let app = apps[index % apps.count]
            let sent = MonotonicTime.nanoseconds()
            do {
                try client.deliverPushAsync(app, Self.payload(tag: "flood-\(index)", bytes: payloadBytes)) { reply in
                    let now = MonotonicTime.nanoseconds()
                    answered += 1
                    outcome.latencies.append(Double(now - sent) / 1000)
                    outcome.replies.append(now)
                    outcome.lastReply = now
                    switch reply {
                    case .success(let message):
                        if let id = try? message.readString() { outcome.ids.append(id) } else { outcome.errors.append("reply without a push id") }
                    case .failure(let error):
                        outcome.errors.append("\(app): \(error)")
                    }
                    send(on: client)
                }
            } catch {
                sendFailure = error
            }
        }

        outcome.firstSend = MonotonicTime.nanoseconds()
        for client in clients {
            for _ in 0..<window { send(on: client) }
        }
        var descriptors = [pollfd](repeating: pollfd(), count: clients.count)
        while answered < next || (next < count && sendFailure == nil) {
            if let sendFailure { throw ValidationError("cannot send DeliverPush: \(sendFailure)") }
            var any = false
            for client in clients {
                if try client.process() { any = true }
            }
            if any { continue }
            for (index, client) in clients.enumerated() { descriptors[index] = client.pollDescriptor }
            if poll(&descriptors, nfds_t(descriptors.count), 30_000) == 0 {
                throw ValidationError("no DeliverPush reply within 30 s (\(answered) of \(count) answered)")
            }
        }
        if let sendFailure { throw ValidationError("cannot send DeliverPush: \(sendFailure)") }
        return outcome
    }
}
