import BgTaskProtocol
import Foundation
import SDBus

/// One fuzzing run against a daemon the ``Harness`` started: the typed and
/// signature phases over every method, then seeded random calls; the oracles
/// after each call; a crash's reduction to the fewest calls that reproduce
/// it; and at the end the memory reading, a clean SIGTERM and a restart on
/// the state the run left.
final class FuzzRun {
    struct Settings {
        var calls: Int
        var seed: UInt64
        var quick: Bool
        /// Seconds a call may take before it counts as a hang.
        var timeout: Double
        var leakThresholdKiB: Int
        /// A Ping and a property read after this many calls.
        var checkEvery = 20
        /// Seconds between the end of the calls and the second memory reading.
        var settleSeconds = 1.0
        /// Calls before the first memory reading: the daemon's caches (SQLite's
        /// pages, prepared statements, what plugins keep of each app) fill in
        /// them, by about 16 MiB in a debug build, and then stay; a leak goes
        /// on growing after them.
        var warmupCalls = 2000
        /// Seconds the restarted daemon is called for.
        var restartSeconds = 3.0
        /// Reduce crashes to the fewest calls that reproduce them.
        var reduce = true
        /// Random calls between two reconnections of every client.
        var reconnectEvery = 300
        var heavyChance = 0.1
        var verbose = false
    }

    private let settings: Settings
    private let harness: Harness
    private let contract: InterfaceModel
    private var model = InterfaceModel()
    private var generator: CallGenerator
    private var pool: ClientPool
    private var report: FuzzReport
    /// The calls sent to the daemon now running, newest last, for reproducing
    /// a crash; bounded in count and in bytes (some values are a mebibyte).
    private var history: [FuzzCall] = []
    private var historyBytes = 0
    private static let historyLimit = 256
    private static let historyByteLimit = 32 << 20
    /// The calls with an extreme value sent to the daemon now running, further
    /// back than ``history``: a value stored long ago can crash a later call.
    private var extremeHistory: [FuzzCall] = []
    private static let extremeHistoryLimit = 2048
    /// A connection of its own for liveness probes.
    private var monitor: Bus?
    /// Calls answered by the daemon now running (for the memory figure).
    private var callsThisDaemon = 0
    private var memoryBefore: Int?
    /// The documented error names of the daemon itself.
    private let documentedErrors: Set<String> = [
        BgTaskError.Code.noSuchTask.rawValue, BgTaskError.Code.notPermitted.rawValue, BgTaskError.Code.unknownApplication.rawValue, BgTaskError.Code.modeNotDeclared.rawValue,
        BgTaskError.Code.refreshDisabled.rawValue, BgTaskError.Code.limitExceeded.rawValue, BgTaskError.Code.payloadTooLarge.rawValue, BgTaskError.Code.noSuchToken.rawValue,
    ]

    init(settings: Settings, harness: Harness, contract: InterfaceModel, xmlPath: String) {
        self.settings = settings
        self.harness = harness
        self.contract = contract
        generator = CallGenerator(
            model: contract, seed: settings.seed, heavyChance: settings.heavyChance,
            appDirectory: harness.workspace.appDirectory, uploadSource: harness.workspace.uploadSource)
        pool = ClientPool(address: harness.address, timeout: settings.timeout)
        report = FuzzReport(
            seed: settings.seed, quick: settings.quick, callsRequested: settings.calls,
            memory: .init(thresholdKiB: settings.leakThresholdKiB, calls: 0), xml: xmlPath)
    }

    // MARK: The run

    func run() throws(HarnessError) -> FuzzReport {
        let start = Monotonic.seconds()
        try startFreshDaemon()
        let live = try liveModel()
        compare(live: live)
        // The live object adds the standard interfaces (Peer, Introspectable, Properties): fuzzed too.
        model = contract.merged(with: live)
        generator = CallGenerator(
            model: model, seed: settings.seed, heavyChance: settings.heavyChance,
            appDirectory: harness.workspace.appDirectory, uploadSource: harness.workspace.uploadSource)
        progress("fuzzing \(model.methods.count) methods of \(model.interfaces.count) interfaces")

        for method in model.methods {
            for call in generator.typedCalls(for: method, pool: pool) { try step(call) }
        }
        progress("typed phase done: \(report.callsMade) calls")
        for method in model.methods {
            for call in generator.signatureCalls(for: method, pool: pool) { try step(call) }
        }
        progress("signature phase done: \(report.callsMade) calls")
        var untilReconnect = settings.reconnectEvery
        while report.callsMade < settings.calls {
            try step(generator.nextRandom(pool: pool))
            untilReconnect -= 1
            if untilReconnect <= 0 {
                pool.reset()
                untilReconnect = settings.reconnectEvery
            }
            if report.callsMade % 2000 == 0 { progress("\(report.callsMade) calls") }
        }
        try finalChecks()
        report.seconds = Monotonic.seconds() - start
        report.daemonStarts = harness.starts
        report.quarantined = generator.quarantined.sorted()
        return report
    }

    /// Memory, SIGTERM, restart on the state the run left.
    private func finalChecks() throws(HarnessError) {
        pool.reset()
        monitor = nil
        Monotonic.sleep(settings.settleSeconds)
        if let daemon = harness.daemon, daemon.isRunning {
            let memory = ProcessMemory(pid: daemon.pid)
            report.memory.beforeKiB = memoryBefore
            report.memory.afterKiB = memory.residentKiB
            report.memory.peakKiB = memory.peakKiB
            report.memory.calls = max(0, callsThisDaemon - settings.warmupCalls)
            if let growth = report.memory.growthKiB, growth > settings.leakThresholdKiB {
                add(Finding(kind: .leak, summary: "resident memory grew by \(growth / 1024) MiB over \(callsThisDaemon) calls "
                    + "(\((memoryBefore ?? 0) / 1024) → \((report.memory.afterKiB ?? 0) / 1024) MiB; limit \(settings.leakThresholdKiB / 1024) MiB)"))
            }
        }
        let state = harness.stateDirectory
        if let (exit, killed) = harness.stopDaemon() {
            report.shutdown = killed ? "\(exit) (SIGKILL after no exit within 10 s of SIGTERM)" : "\(exit)"
            if !exit.isClean || killed {
                add(Finding(kind: .shutdown, summary: "SIGTERM: \(report.shutdown!), expected exit status 0", logTail: harness.logTail(30)))
            }
        }
        report.restart = restartCheck(stateDirectory: state, seconds: settings.restartSeconds)
        if let restart = report.restart, !restart.ok {
            add(Finding(kind: .restart, summary: "the daemon restarted on the state the run left: \(restart.detail)",
                        logTail: harness.logTail(30)))
        }
    }

    // MARK: One call

    /// Sends a call (after the check-in its role needs) and applies the oracles.
    private func step(_ call: FuzzCall) throws(HarnessError) {
        if !pool.isOpen(call.role), let checkIn = generator.checkIn(call.role) {
            try exchange(checkIn)
        }
        try exchange(call)
    }

    private func exchange(_ call: FuzzCall) throws(HarnessError) {
        let outcome = pool.send(call)
        history.append(call)
        historyBytes += Self.size(of: call)
        while history.count > Self.historyLimit || historyBytes > Self.historyByteLimit {
            historyBytes -= Self.size(of: history.removeFirst())
        }
        // Values over 64 KiB are refused before anything is stored; they would only crowd the list.
        if call.arguments.contains(where: \.isExtreme), Self.size(of: call) <= 65536 {
            extremeHistory.append(call)
            if extremeHistory.count > Self.extremeHistoryLimit { extremeHistory.removeFirst() }
        }
        report.count(call, outcome)
        callsThisDaemon += 1
        if callsThisDaemon == settings.warmupCalls {
            memoryBefore = harness.daemon.flatMap { ProcessMemory(pid: $0.pid).residentKiB }
        }
        judge(call, outcome)
        if let exit = harness.daemonExit {
            try daemonDied(exit, after: call)
        } else if outcome == .timeout || isGone(outcome) {
            try noAnswer(to: call, outcome)
        } else if report.callsMade % settings.checkEvery == 0, let problem = probe() {
            try unresponsive(problem, after: call)
        }
    }

    private static func size(of call: FuzzCall) -> Int {
        call.arguments.reduce(0) { $0 + CallGenerator.size(of: $1.value) }
    }

    private func isGone(_ outcome: CallOutcome) -> Bool {
        if case .noReply = outcome { return true }
        return false
    }

    /// The oracles on one answer.
    private func judge(_ call: FuzzCall, _ outcome: CallOutcome) {
        switch outcome {
        case .returned(let signature):
            if call.isWellFormed, let declared = call.declared, signature != declared.outputSignature {
                add(Finding(kind: .wrongReply, summary: "\(call.methodKey) returned '\(signature)', declared '\(declared.outputSignature)'",
                            call: call.label, reproduction: ReproLine.reproduction([call])), key: "wrong-reply \(call.methodKey)")
            } else if call.isForDaemonInterface && !call.isWellFormed && !isWellFormedWithoutInterface(call) {
                // Only the daemon's own interfaces: sd-bus serves Peer, Introspectable and
                // Properties itself and ignores extra arguments there.
                add(Finding(kind: .acceptedWrongCall, summary: "\(call.methodKey) with signature '\(call.signature)' "
                            + "(declared '\(call.declared?.inputSignature ?? "?")') at \(call.path) was answered with success",
                            call: call.label, reproduction: ReproLine.reproduction([call])),
                    key: "accepted \(call.methodKey) \(call.signature) \(call.path)")
            }
        case .error(let name, let message):
            let inContract = name.hasPrefix("org.freedesktop.DBus.Error.") || documentedErrors.contains(name)
            if !inContract {
                add(Finding(kind: .unexpectedError, summary: "\(call.methodKey) answered \(name): \(message.prefix(300))",
                            call: call.label, reproduction: ReproLine.reproduction([call])), key: "error \(call.methodKey) \(name)")
            }
        default:
            break
        }
    }

    /// A call without an interface field may be dispatched by its member alone.
    private func isWellFormedWithoutInterface(_ call: FuzzCall) -> Bool {
        guard call.interface == nil, let declared = call.declared else { return false }
        return call.member == declared.name && call.path == BgTaskNames.objectPath && call.signature == declared.inputSignature
    }

    // MARK: Liveness

    /// nil when the daemon answers Ping and a property read in time; else what failed.
    private func probe() -> String? {
        if monitor == nil { monitor = try? Bus.open(.address(harness.address), description: "bgtaskd-fuzz-monitor") }
        guard let monitor else { return "cannot connect to the bus" }
        let timeout = UInt64(settings.timeout * 1_000_000)
        do throws(BusError) {
            let ping = try monitor.newMethodCall(
                destination: BgTaskNames.busName, path: BgTaskNames.objectPath, interface: "org.freedesktop.DBus.Peer", member: "Ping")
            _ = try monitor.call(ping, timeout: timeout)
            let get = try monitor.newMethodCall(
                destination: BgTaskNames.busName, path: BgTaskNames.objectPath, interface: "org.freedesktop.DBus.Properties", member: "Get")
            try get.append(BgTaskNames.manager)
            try get.append("Version")
            let reply = try monitor.call(get, timeout: timeout)
            guard case .variant(.uint32(BgTaskNames.apiVersion))? = try reply.readValue() else {
                return "the Version property is not u \(BgTaskNames.apiVersion)"
            }
            return nil
        } catch {
            self.monitor = nil
            return "\(error)"
        }
    }

    /// A call got no answer in time, or the bus said the daemon left without answering.
    private func noAnswer(to call: FuzzCall, _ outcome: CallOutcome) throws(HarnessError) {
        // The daemon may have exited a moment after the bus noticed.
        if let exit = harness.daemon?.waitForExit(timeout: 0.5) { return try daemonDied(exit, after: call) }
        let probeResult = probe()
        let kind: Finding.Kind = outcome == .timeout ? .hang : .unresponsive
        let what = outcome == .timeout ? "no answer within \(settings.timeout) s" : "the bus said: \(outcome.summaryKey)"
        var finding = Finding(
            kind: kind, summary: "\(call.methodKey): \(what); afterwards the daemon \(probeResult.map { "does not answer either (\($0))" } ?? "answers Ping")",
            call: call.label, lastCalls: history.suffix(10).map(ReproLine.render), logTail: harness.logTail(30))
        let key = "\(kind.rawValue) \(call.methodKey) \(call.extremeKeys.sorted().joined(separator: "+"))"
        guard !findingKeys.contains(key), outcome == .timeout, settings.reduce else {
            add(finding, key: key)
            if probeResult != nil {
                harness.daemon?.killNow()
                try startFreshDaemon()
            }
            return
        }
        let calls = history
        harness.daemon?.killNow()
        if let reduced = reduce(calls, extremes: extremeHistory, budget: settings.quick ? 6 : 24, reproduces: replayHangs) {
            finding.reproduction = ReproLine.reproduction(reduced)
            finding.details.append("a fresh daemon leaves the last of these \(reduced.count) call\(reduced.count == 1 ? "" : "s") unanswered: "
                + reduced.map(\.label).joined(separator: " → "))
        } else {
            finding.details.append("the last \(calls.count) calls did not make a fresh daemon hang again (it depends on timing, or on older calls)")
        }
        add(finding, key: key)
        try startFreshDaemon()
    }

    private func unresponsive(_ problem: String, after call: FuzzCall) throws(HarnessError) {
        if let exit = harness.daemon?.waitForExit(timeout: 0.5) { return try daemonDied(exit, after: call) }
        add(Finding(kind: .unresponsive, summary: "the daemon is alive but its liveness probe failed: \(problem)",
                    call: call.label, lastCalls: history.suffix(8).map(ReproLine.render), logTail: harness.logTail(30)))
        harness.daemon?.killNow()
        try startFreshDaemon()
    }

    // MARK: Crashes

    /// The daemon exited: report it with the calls before it and its log,
    /// reduce the calls to the fewest that crash a fresh daemon, check that it
    /// restarts on the state the crash left, and go on with a fresh one.
    private func daemonDied(_ exit: ServiceProcess.Exit, after call: FuzzCall) throws(HarnessError) {
        let crashedState = harness.stateDirectory
        let calls = history
        var finding = Finding(
            kind: .crash, summary: "bgtaskd \(exit) after \(call.methodKey)", call: call.label,
            lastCalls: calls.suffix(10).map(ReproLine.render), logTail: harness.crashExcerpt())
        if !call.arguments.isEmpty { finding.details.append("values: \(call.arguments.map(\.label).joined(separator: "; "))") }
        progress("crash: bgtaskd \(exit) after \(call.label)")
        let key = "crash \(exit) \(call.methodKey) \(call.extremeKeys.sorted().joined(separator: "+"))"
        if !findingKeys.contains(key) {
            let reduced = settings.reduce ? reduce(calls, extremes: extremeHistory, budget: settings.quick ? 14 : 60, reproduces: replayCrashes) : nil
            if let reduced {
                finding.reproduction = ReproLine.reproduction(reduced)
                finding.details.append("\(reduced.count) call\(reduced.count == 1 ? "" : "s") crash a fresh daemon: "
                    + reduced.map(\.label).joined(separator: " → "))
            } else if settings.reduce {
                finding.details.append("the last \(calls.count) calls did not crash a fresh daemon again (it depends on timing, or on older calls)")
            }
            // A short reproduction names its culprits; a long one is mostly bystanders.
            quarantine(reduced.map { $0.count <= 4 ? $0 : [call] } ?? [call])
            let restart = restartCheck(stateDirectory: crashedState, seconds: 2)
            finding.details.append("restart on the state the crash left: \(restart.ok ? "ok" : "FAILED"): \(restart.detail)")
            add(finding, key: key)
            if !restart.ok {
                add(Finding(kind: .restart, summary: "the daemon does not survive a restart on the state a crash left: \(restart.detail)",
                            call: call.label, logTail: harness.crashExcerpt()), key: "restart after \(key)")
            }
        } else {
            quarantine([call])
            add(finding, key: key)
        }
        try startFreshDaemon()
    }

    /// Random calls stop using the extreme values of calls that crashed the daemon.
    private func quarantine(_ calls: [FuzzCall]) {
        for call in calls {
            for (name, value) in zip(call.argumentNames, call.arguments) where value.isExtreme {
                generator.quarantined.insert(CallGenerator.quarantineKey(member: call.member, argument: name, value: value))
            }
        }
    }

    /// The fewest calls that still reproduce a failure (a crash, a hang) on a
    /// fresh daemon, within a budget of daemon starts (a hang's cost a timeout each). First the failing call
    /// alone; then it after every call since the daemon started that carried an
    /// extreme value (usually the culprit, when stored state makes a later call fail); then
    /// longer and longer runs of the last calls. What reproduces is cut down
    /// by dropping calls before the last in chunks while it still does (delta
    /// debugging).
    private func reduce(_ calls: [FuzzCall], extremes: [FuzzCall], budget: Int, reproduces: ([FuzzCall]) -> Bool) -> [FuzzCall]? {
        guard let last = calls.last else { return nil }
        var budget = budget
        var candidates: [[FuzzCall]] = [[last]]
        // Every extreme call since the daemon started, the last one excepted (it is the failing call itself).
        let earlier = last.arguments.contains(where: \.isExtreme) ? Array(extremes.dropLast()) : extremes
        if !earlier.isEmpty { candidates.append(earlier + [last]) }
        var length = 4
        while length < calls.count {
            candidates.append(Array(calls.suffix(length)))
            length *= 4
        }
        if calls.count > 1 { candidates.append(calls) }
        var failing: [FuzzCall]?
        for candidate in candidates where budget > 0 {
            budget -= 1
            if reproduces(candidate) {
                failing = candidate
                break
            }
        }
        guard let failing else { return nil }
        var prefix = Array(failing.dropLast())
        var chunks = 2
        while !prefix.isEmpty && budget > 0 {
            let size = (prefix.count + chunks - 1) / chunks
            var removed = false
            for start in stride(from: 0, to: prefix.count, by: size) where budget > 0 {
                var candidate = prefix
                candidate.removeSubrange(start..<min(start + size, prefix.count))
                budget -= 1
                if reproduces(candidate + [last]) {
                    prefix = candidate
                    chunks = max(chunks - 1, 2)
                    removed = true
                    break
                }
            }
            if !removed {
                if size == 1 { break }
                chunks = min(chunks * 2, prefix.count)
            }
        }
        return prefix + [last]
    }

    /// Whether the last of `calls` gets no answer from a daemon started on fresh state.
    private func replayHangs(_ calls: [FuzzCall]) -> Bool {
        do {
            try harness.startDaemon()
        } catch {
            return false
        }
        let replay = ClientPool(address: harness.address, timeout: settings.timeout)
        var outcome = CallOutcome.notSent("")
        for call in calls {
            if !replay.isOpen(call.role), let checkIn = generator.checkIn(call.role) { _ = replay.send(checkIn) }
            outcome = replay.send(call)
            report.replayCalls += 1
            if harness.daemonExit != nil { return false }
        }
        harness.daemon?.killNow()
        return outcome == .timeout
    }

    /// Whether `calls` crash a daemon started on fresh state.
    private func replayCrashes(_ calls: [FuzzCall]) -> Bool {
        do {
            try harness.startDaemon()
        } catch {
            return false
        }
        let replay = ClientPool(address: harness.address, timeout: settings.timeout)
        for call in calls {
            if !replay.isOpen(call.role), let checkIn = generator.checkIn(call.role) { _ = replay.send(checkIn) }
            _ = replay.send(call)
            report.replayCalls += 1
            if harness.daemonExit != nil { return true }
        }
        let died = harness.daemon?.waitForExit(timeout: 0.3) != nil
        if !died { harness.stopDaemon() }
        return died
    }

    // MARK: Restarts

    /// Starts the daemon on `stateDirectory`, waits until it is ready, calls it
    /// for `seconds` from a checked-in app and a plain connection, and stops it.
    private func restartCheck(stateDirectory: String, seconds: Double) -> FuzzReport.Restart {
        let start = Monotonic.seconds()
        do {
            try harness.startDaemon(stateDirectory: stateDirectory)
        } catch {
            return .init(ok: false, detail: "\(error)".split(separator: "\n").first.map(String.init) ?? "", readySeconds: nil, calls: 0)
        }
        let ready = Monotonic.seconds() - start
        let client = ClientPool(address: harness.address, timeout: settings.timeout)
        let app = FuzzCall.Role.app(Workspace.fullApps[0])
        let probes: [(String, String, FuzzCall.Role, [FuzzValue])] = [
            ("org.freedesktop.DBus.Peer", "Ping", .anonymous, []),
            (BgTaskNames.manager, "GetApplications", .anonymous, []),
            (BgTaskNames.remoteNotifications, "ListPushes", .anonymous, [.ordinary(.string(""), "s \"\"")]),
            (BgTaskNames.fetch, "GetFetchRegistration", app, []),
            (BgTaskNames.manager, "GetBackgroundTimeRemaining", app, []),
            (BgTaskNames.manager, "GetBackgroundRefreshStatus", app, []),
        ]
        var calls = 0
        let deadline = Monotonic.seconds() + seconds
        while Monotonic.seconds() < deadline {
            for (interface, member, role, values) in probes {
                let call = FuzzCall(role: role, interface: interface, member: member, arguments: values,
                                    argumentNames: values.map { _ in "arg" }, declared: model.method(interface, member), origin: .state)
                if !client.isOpen(role), let checkIn = generator.checkIn(role) { _ = client.send(checkIn) }
                let outcome = client.send(call)
                calls += 1
                // The bus may tell of a crash a moment before the exit can be reaped.
                let gone = if case .noReply = outcome { true } else { false }
                if let exit = harness.daemon?.waitForExit(timeout: gone ? 1 : 0) {
                    return .init(ok: false, detail: "bgtaskd \(exit) after \(calls) calls (the last \(member))", readySeconds: ready, calls: calls)
                }
                switch outcome {
                case .timeout, .noReply, .notSent:
                    harness.daemon?.killNow()
                    return .init(ok: false, detail: "\(member): \(outcome.summaryKey)", readySeconds: ready, calls: calls)
                default:
                    break
                }
            }
        }
        guard let (exit, killed) = harness.stopDaemon() else {
            return .init(ok: false, detail: "no daemon", readySeconds: ready, calls: calls)
        }
        let ok = exit.isClean && !killed
        return .init(ok: ok, detail: "ready in \(String(format: "%.2f", ready)) s, \(calls) calls answered in \(seconds) s, "
                     + "then SIGTERM: \(exit)\(killed ? " after SIGKILL" : "")", readySeconds: ready, calls: calls)
    }

    private func startFreshDaemon() throws(HarnessError) {
        pool.reset()
        monitor = nil
        history.removeAll()
        historyBytes = 0
        extremeHistory.removeAll()
        try harness.startDaemon()
        callsThisDaemon = 0
        // Read once the warm-up is done (see Settings.warmupCalls).
        memoryBefore = nil
    }

    // MARK: Introspection

    /// What the running daemon says it serves.
    private func liveModel() throws(HarnessError) -> InterfaceModel {
        do {
            let bus = try Bus.open(.address(harness.address), description: "bgtaskd-fuzz-introspect")
            let call = try bus.newMethodCall(
                destination: BgTaskNames.busName, path: BgTaskNames.objectPath,
                interface: "org.freedesktop.DBus.Introspectable", member: "Introspect")
            let xml = try bus.call(call, timeout: 10_000_000).readString()
            return try InterfaceModel(xml: xml)
        } catch {
            throw HarnessError("cannot introspect the running daemon: \(error)")
        }
    }

    /// The daemon's own interfaces must match the XML member for member.
    private func compare(live: InterfaceModel) {
        let running = live.restricted(to: "org.bgtaskd.").summary
        let checkedIn = contract.restricted(to: "org.bgtaskd.").summary
        let missing = checkedIn.subtracting(running).sorted()
        let extra = running.subtracting(checkedIn).sorted()
        guard !missing.isEmpty || !extra.isEmpty else { return }
        add(Finding(kind: .drift, summary: "the running daemon differs from the introspection XML",
                    details: missing.map { "- only in the XML: \($0)" } + extra.map { "+ only in the daemon: \($0)" }))
    }

    // MARK: Findings

    private var findingKeys: [String] = []

    /// Adds a finding, or counts it again when one with the same key was made.
    private func add(_ finding: Finding, key: String? = nil) {
        let key = key ?? "\(finding.kind.rawValue) \(finding.summary)"
        if let index = findingKeys.firstIndex(of: key) {
            report.findings[index].count += 1
            return
        }
        findingKeys.append(key)
        report.findings.append(finding)
        progress("finding: \(finding.kind.rawValue): \(finding.summary)")
    }

    private func progress(_ text: String) {
        guard settings.verbose else { return }
        Console.error("\(text)")
    }
}
