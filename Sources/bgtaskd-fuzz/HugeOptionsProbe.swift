import BgTaskProtocol
import Foundation
import SDBus
import Synchronization

/// The figure for one huge call: a `DeliverPush` whose options hold a
/// million unknown keys, sent from one connection while a second connection
/// keeps calling `GetBackgroundTimeRemaining` and times each answer. It
/// shows how long one caller can keep the daemon from serving everybody
/// else, and what that call costs in memory. As a control, the same body is
/// first sent to the bus daemon itself: what the probes lose then is the
/// bus's share (it copies 20-odd MB too), not the daemon's.
struct HugeOptionsProbe {
    /// One huge call and the probes that overlapped it.
    struct Measurement: Codable {
        var target: String
        var seconds: Double
        /// Its answer: an error name and message, or `(method return)`.
        var answer: String
        /// Probes answered while it was in flight (started before it ended, ended after it started).
        var probes: Int
        var p50Milliseconds: Double?
        var maxMilliseconds: Double?
        /// Probes that got no answer at all.
        var unanswered: Int
    }

    /// What was measured.
    struct Result: Codable {
        var keys: Int
        var buildSeconds: Double
        var probesBefore: Int
        var p50BeforeMilliseconds: Double?
        var maxBeforeMilliseconds: Double?
        var control: Measurement
        var daemon: Measurement
        var rssBeforeKiB: Int?
        var rssAfterKiB: Int?
        var rssPeakKiB: Int?
        var daemonAfter: String

        func text() -> String {
            func ms(_ value: Double?) -> String { value.map { String(format: "%.2f ms", $0) } ?? "-" }
            func mib(_ value: Int?) -> String { value.map { String(format: "%.1f MiB", Double($0) / 1024) } ?? "?" }
            func line(_ m: Measurement) -> String {
                "\(m.target): answered after \(String(format: "%.2f", m.seconds)) s with \(m.answer)\n"
                    + "      probes meanwhile: \(m.probes) answered, p50 \(ms(m.p50Milliseconds)), max \(ms(m.maxMilliseconds)), \(m.unanswered) unanswered"
            }
            return """
                bgtaskd-fuzz --huge-options: one DeliverPush(app_id, payload, a{sv} with \(keys) unknown keys), built in \(String(format: "%.2f", buildSeconds)) s
                  GetBackgroundTimeRemaining from a second connection, before: \(probesBefore) calls, p50 \(ms(p50BeforeMilliseconds)), max \(ms(maxBeforeMilliseconds))
                  control, the same body to the bus daemon: \(line(control))
                  to bgtaskd: \(line(daemon))
                  bgtaskd RSS: \(mib(rssBeforeKiB)) before, \(mib(rssAfterKiB)) after, peak \(mib(rssPeakKiB))
                  bgtaskd afterwards: \(daemonAfter)
                """
        }
    }

    /// Probe samples shared with the probing thread.
    private final class Samples: Sendable {
        /// When each probe started (monotonic seconds) and how long it took (nil: unanswered).
        let values = Mutex<[(start: Double, seconds: Double?)]>([])
        let stop = Atomic<Bool>(false)
    }

    let harness: Harness
    let keys: Int
    let timeout: Double

    func run() throws(HarnessError) -> Result {
        let daemon = try harness.startDaemon()
        Monotonic.sleep(0.5)
        let memory = ProcessMemory(pid: daemon.pid)
        let rssBefore = memory.residentKiB
        let samples = Samples()
        let address = harness.address
        let probeTimeout = UInt64(max(timeout, 60) * 1_000_000)
        let prober = Thread {
            guard let bus = try? Bus.open(.address(address), description: "bgtaskd-fuzz-probe") else { return }
            while !samples.stop.load(ordering: .acquiring) {
                let start = Monotonic.seconds()
                var answered = false
                if let call = try? bus.newMethodCall(
                    destination: BgTaskNames.busName, path: BgTaskNames.objectPath,
                    interface: BgTaskNames.manager, member: "GetBackgroundTimeRemaining") {
                    answered = (try? bus.call(call, timeout: probeTimeout)) != nil
                }
                let elapsed = Monotonic.seconds() - start
                samples.values.withLock { $0.append((start, answered ? elapsed : nil)) }
                Monotonic.sleep(0.002)
            }
        }
        prober.start()
        defer {
            samples.stop.store(true, ordering: .releasing)
            while !prober.isFinished { Monotonic.sleep(0.01) }
        }
        Monotonic.sleep(1)
        let before = samples.values.withLock { $0 }.compactMap(\.seconds).map { $0 * 1000 }.sorted()

        let bus: Bus
        do throws(BusError) {
            bus = try Bus.open(.address(address), description: "bgtaskd-fuzz-huge")
        } catch {
            throw HarnessError("cannot connect: \(error)")
        }
        let buildStart = Monotonic.seconds()
        // The bus daemon's own interface, with a body it does not expect: it reads all of it, then refuses.
        let controlCall = try hugeCall(
            bus, destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus", interface: "org.freedesktop.DBus", member: "GetId")
        let buildSeconds = Monotonic.seconds() - buildStart
        let control = try measure(controlCall, target: "org.freedesktop.DBus.GetId", bus: bus, samples: samples)
        let daemonCall = try hugeCall(
            bus, destination: BgTaskNames.busName, path: BgTaskNames.objectPath, interface: BgTaskNames.remoteNotifications,
            member: "DeliverPush")
        Monotonic.sleep(0.5)
        let measured = try measure(daemonCall, target: "RemoteNotifications.DeliverPush", bus: bus, samples: samples)

        Monotonic.sleep(1)
        let rssAfter = memory.residentKiB
        let peak = memory.peakKiB
        let after: String
        if let exit = daemon.poll() {
            after = "exited: \(exit)"
        } else {
            let (exit, killed) = harness.stopDaemon() ?? (.status(-1), false)
            after = "alive; SIGTERM: \(exit)\(killed ? " (needed SIGKILL)" : "")"
        }
        return Result(
            keys: keys, buildSeconds: buildSeconds, probesBefore: before.count, p50BeforeMilliseconds: Self.median(before),
            maxBeforeMilliseconds: before.last, control: control, daemon: measured,
            rssBeforeKiB: rssBefore, rssAfterKiB: rssAfter, rssPeakKiB: peak, daemonAfter: after)
    }

    /// `DeliverPush`'s body (an app id, a silent payload, `keys` unknown options) addressed to a member.
    private func hugeCall(_ bus: Bus, destination: String, path: String, interface: String, member: String) throws(HarnessError) -> Message {
        do throws(BusError) {
            let message = try bus.newMethodCall(destination: destination, path: path, interface: interface, member: member)
            try message.append(Workspace.fullApps[0])
            try message.append(ValueCatalog.silentPayload)
            try message.openContainer("a", "{sv}")
            for index in 0..<keys {
                try message.openContainer("e", "sv")
                try message.append("k\(index)")
                try message.openContainer("v", "b")
                try message.append(true)
                try message.closeContainer()
                try message.closeContainer()
            }
            try message.closeContainer()
            return message
        } catch {
            throw HarnessError("cannot build the huge call: \(error)")
        }
    }

    /// Sends `message` and summarizes the probes that overlapped it.
    private func measure(_ message: Message, target: String, bus: Bus, samples: Samples) throws(HarnessError) -> Measurement {
        let start = Monotonic.seconds()
        let answer: String
        do throws(BusError) {
            _ = try bus.call(message, timeout: UInt64(timeout * 1_000_000))
            answer = "(method return)"
        } catch {
            answer = "\(error.name): \(error.message.prefix(200).trimmingCharacters(in: .whitespacesAndNewlines))"
        }
        let end = Monotonic.seconds()
        Monotonic.sleep(0.3)
        let all = samples.values.withLock { $0 }
        // A probe belongs to the huge call's period when the two overlap at all.
        let during = all.filter { $0.start < end && $0.start + ($0.seconds ?? .infinity) > start }
        let answered = during.compactMap(\.seconds).map { $0 * 1000 }.sorted()
        return Measurement(
            target: target, seconds: end - start, answer: answer, probes: answered.count,
            p50Milliseconds: Self.median(answered), maxMilliseconds: answered.last, unanswered: during.count - answered.count)
    }

    /// The middle value (nearest rank) of sorted samples.
    private static func median(_ sorted: [Double]) -> Double? {
        sorted.isEmpty ? nil : sorted[(sorted.count - 1) / 2]
    }
}
