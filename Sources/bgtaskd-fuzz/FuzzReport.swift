import Foundation

/// What a run did and found: printed as a summary, or as JSON with `--json`.
struct FuzzReport: Codable {
    /// Resident memory of the daemon that served the last stretch of the run.
    struct Memory: Codable {
        var beforeKiB: Int?
        var afterKiB: Int?
        var peakKiB: Int?
        var thresholdKiB: Int
        /// Calls that daemon answered between the two readings.
        var calls: Int
        var growthKiB: Int? { beforeKiB.flatMap { before in afterKiB.map { $0 - before } } }
    }

    /// The daemon started again on the state directory the run left.
    struct Restart: Codable {
        var ok: Bool
        var detail: String
        var readySeconds: Double?
        var calls: Int
    }

    var seed: UInt64
    var quick: Bool
    var callsRequested: Int
    var callsMade = 0
    var seconds = 0.0
    var callsByMethod: [String: Int] = [:]
    var callsByInterface: [String: Int] = [:]
    var callsByOrigin: [String: Int] = [:]
    /// Calls sent on the hand-spoken connection (strings sd-bus will not send).
    var rawCalls = 0
    /// Why calls could not be sent (the fuzzer's side: sd-bus refused a value, a connection was lost).
    var notSent: [String: Int] = [:]
    /// Answers by error name; `(method return)` for successes.
    var answers: [String: Int] = [:]
    var answersByMethod: [String: [String: Int]] = [:]
    var findings: [Finding] = []
    var memory: Memory
    var shutdown: String?
    var restart: Restart?
    var daemonStarts = 0
    /// Calls sent on scratch daemons to find the shortest reproduction of a crash.
    var replayCalls = 0
    /// Extreme keys random calls stopped using after they crashed the daemon.
    var quarantined: [String] = []
    var xml: String

    var passed: Bool { findings.isEmpty }

    mutating func count(_ call: FuzzCall, _ outcome: CallOutcome) {
        callsMade += 1
        callsByMethod[call.methodKey, default: 0] += 1
        callsByInterface[call.declared?.interface ?? call.interface ?? "(no interface)", default: 0] += 1
        if call.needsRawTransport { rawCalls += 1 }
        callsByOrigin[call.origin.rawValue, default: 0] += 1
        answers[outcome.summaryKey, default: 0] += 1
        if case .notSent(let reason) = outcome { notSent[String(reason.prefix(120)), default: 0] += 1 }
        answersByMethod[call.methodKey, default: [:]][outcome.summaryKey, default: 0] += 1
    }

    func json() -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        encoder.nonConformingFloatEncodingStrategy = .convertToString(positiveInfinity: "inf", negativeInfinity: "-inf", nan: "nan")
        return (try? encoder.encode(self)).map { String(decoding: $0, as: UTF8.self) } ?? "{}"
    }

    /// The summary for people.
    func text() -> String {
        var out: [String] = []
        let rate = seconds > 0 ? Double(callsMade) / seconds : 0
        out.append("bgtaskd-fuzz: seed \(seed)\(quick ? " (quick)" : ""), \(callsMade) calls in \(format(seconds)) s "
            + "(\(Int(rate))/s), daemon started \(daemonStarts) times, \(replayCalls) calls replayed to reduce crashes")
        out.append("contract: \(xml)")
        out.append("")
        out.append("Calls by interface and method:")
        for interface in callsByInterface.keys.sorted() {
            out.append("  \(interface)  \(callsByInterface[interface]!)")
            for method in callsByMethod.keys.sorted() where method.hasPrefix(interface + ".") {
                let member = method.dropFirst(interface.count + 1)
                out.append("    \(member.padding(toLength: 30, withPad: " ", startingAt: 0)) \(pad(callsByMethod[method]!))")
            }
        }
        out.append("Calls by origin: " + callsByOrigin.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", ")
            + "; \(rawCalls) sent by hand (noncharacters sd-bus will not send)")
        out.append("")
        out.append("Answers:")
        for (name, count) in answers.sorted(by: { $0.value > $1.value }) {
            out.append("  \(name.padding(toLength: 58, withPad: " ", startingAt: 0)) \(pad(count))")
        }
        for (reason, count) in notSent.sorted(by: { $0.value > $1.value }) {
            out.append("  not sent, \(count)×: \(reason)")
        }
        out.append("")
        let before = memory.beforeKiB.map { mib($0) } ?? "?"
        let after = memory.afterKiB.map { mib($0) } ?? "?"
        let growth = memory.growthKiB.map { ($0 >= 0 ? "+" : "") + mib($0) } ?? "?"
        out.append("RSS: \(before) before, \(after) after \(memory.calls) calls (\(growth); limit +\(mib(memory.thresholdKiB)))"
            + (memory.peakKiB.map { ", peak \(mib($0))" } ?? ""))
        out.append("Shutdown (SIGTERM): \(shutdown ?? "not reached")")
        if let restart {
            out.append("Restart on the run's state: \(restart.ok ? "ok" : "FAILED"): \(restart.detail)")
        } else {
            out.append("Restart on the run's state: not reached")
        }
        if !quarantined.isEmpty { out.append("Quarantined after crashes: \(quarantined.joined(separator: ", "))") }
        out.append("")
        if findings.isEmpty {
            out.append("No findings.")
        } else {
            out.append("Findings (\(findings.count)):")
            for (index, finding) in findings.enumerated() {
                out.append("")
                out.append("\(index + 1). \(finding.kind.rawValue): \(finding.summary)\(finding.count > 1 ? " (seen \(finding.count) times)" : "")")
                if let call = finding.call { out.append("   call: \(call)") }
                for line in finding.details { out.append("   \(line)") }
                if let reproduction = finding.reproduction {
                    out.append("   reproduce on a fresh daemon:")
                    out += reproduction.split(separator: "\n", omittingEmptySubsequences: false).map { "     \($0)" }
                }
                if !finding.lastCalls.isEmpty {
                    out.append("   last calls sent, oldest first:")
                    for call in finding.lastCalls {
                        out += call.split(separator: "\n", omittingEmptySubsequences: false).map { "     \($0)" }
                    }
                }
                if !finding.logTail.isEmpty {
                    out.append("   daemon log, last lines:")
                    out += finding.logTail.map { "     | \(clip($0))" }
                }
            }
        }
        out.append("")
        out.append(findings.isEmpty ? "PASS" : "FAIL: \(findings.count) finding\(findings.count == 1 ? "" : "s")")
        return out.joined(separator: "\n")
    }

    private func format(_ value: Double) -> String { String(format: "%.1f", value) }
    private func mib(_ kib: Int) -> String { String(format: "%.1f MiB", Double(kib) / 1024) }
    private func pad(_ count: Int) -> String { String(repeating: " ", count: max(0, 7 - String(count).count)) + String(count) }
    private func clip(_ line: String) -> String { line.count > 400 ? String(line.prefix(400)) + "…" : line }
}
