import BgTaskPluginKit
import BgTaskProtocol
import BgTaskTransferCore
import Foundation
import Synchronization

// The `transfer` mode: downloads and uploads that outlive the app that asked
// for them (iOS's background URL sessions).
//
// A transfer is stored before StartDownload/StartUpload replies and lives in
// the daemon, not the app: the bytes move on the HTTP client's threads
// (HTTPTransferRunner), which post what happened back to the loop. At most
// Transfers.MaxConcurrent run at once; the rest wait for their turn, for the
// network and power their options ask (SystemConditions), or for a retry
// after a failure (TransferBackoff). A download lands atomically: into a
// partial file beside the destination, flushed, then renamed. A daemon
// restart, a kill or the machine sleeping cancels attempts, never transfers:
// the next attempt continues the partial file with Range + If-Range when the
// server still has the same file (its ETag or Last-Modified), or starts again
// from zero and says so (`restarted`).
//
// A finished transfer wakes its app (launch reason `transfer`) with one
// token for all of its transfers finished by then: TransferFinished for each,
// then CompleteEvents(token) forgets them. A wake that expires or fails
// leaves them waiting for the app's next check-in.

/// The `transfer` mode.
final class TransfersMode: ModePlugin {
    static let name = "transfer"
    static let version = "1.0.0"

    static let wakeBudgetKey = ConfigKey.wakeBudget("Transfers.WakeBudgetSec", default: 30, "time to call CompleteEvents")
    static let maxConcurrentKey = ConfigKey.integer(
        "Transfers.MaxConcurrent", default: 4, minimum: 1, maximum: 64, "transfers that move bytes at once")
    static let maxPerAppKey = ConfigKey.integer(
        "Transfers.MaxPerApp", default: 5000, minimum: 1, maximum: 100_000, "transfers one app may have at once")
    static let turnKey = ConfigKey.seconds(
        "Transfers.TurnSec", default: 300, positive: true,
        "time a download that can resume holds its slot before it yields it to an app that has none")
    static let configKeys = [wakeBudgetKey, maxConcurrentKey, maxPerAppKey, turnKey]
    static let errorNames: [ModeError.Code] = [.notPermitted, .unknownApplication, .modeNotDeclared, .limitExceeded, .noSuchToken]

    static let collection = "transfers"
    /// Longest session id taken (the URL's: ``TransferURL/maximumBytes``).
    static let maximumSessionBytes = 256
    /// Seconds a transfer whose end could not be stored waits before it tries again.
    static let retryAfterStorageFailure = 5.0

    private let host: PluginHost
    private let wakeBudget: Double
    private let maxConcurrent: Int
    private let maxPerApp: Int
    /// Made at the first attempt: a daemon with no transfers starts no HTTP client threads.
    private var runner: HTTPTransferRunner?
    private var isStarted = false
    private var conditions: SystemConditions?
    /// Reports from the runner's threads go through here; closed by stop().
    private let gate = ReportGate()

    /// Every transfer not yet completed by its app, by id.
    private var transfers: [String: TransferRecord] = [:]
    /// The attempt in flight of each transfer that has one, by number. What
    /// runs outside is a fact, not a batch's change: never undone.
    private var running: [String: UInt64] = [:]
    /// Attempts stopped (Cancel, a timeout, sleep, a rolled-back batch) whose
    /// `.ended` has not come yet: their transfer starts no new attempt until
    /// then, so two attempts never write one partial file.
    private var draining: [String: UInt64] = [:]
    private var lastAttempt: UInt64 = 0
    /// Per app, the attempt that last started one of its transfers: who was served longest ago (``fairTurns(_:slots:)``).
    private var lastServed: [String: UInt64] = [:]
    /// Transfers paused to make room for another app's (``makeRoom(for:)``):
    /// such a one runs a while undisturbed once it has its slot back.
    private var respite = RoomRespite()
    /// How long each running transfer has held its slot (``makeRoom(for:)``).
    private var turns: TransferTurns
    /// When a running transfer may next yield its slot to an app that waits
    /// with none running (its turn over, its respite too); nil when none waits.
    private var nextTurnEnd: UInt64?
    /// Downloads cancelled while their attempt ran: their partial files go once it has stopped writing.
    private var discarded: [String: TransferRecord] = [:]
    /// Whether the host runs work posted from other threads (ABI 1.7): without it no report would come back.
    private var canPost = true
    /// Tokens of wakes on their way, with the finished transfers each carries.
    private var tokens: [String: [String]] = [:]
    /// Finished transfers whose wake is on its way.
    private var inFlight: Set<String> = []
    /// Each checked-in app's connection, for TransferProgress.
    private var connections: [String: String] = [:]
    private var sleeping = false
    /// A schedule() is posted and not yet run.
    private var schedulePosted = false
    private var lastSequence: UInt64 = 0
    /// The most bytes an attempt of each transfer started from (what a
    /// download could keep), and how many attempts failed since one started
    /// further than any before: what the backoff grows with (kept in memory
    /// only: after a restart the backoff starts again).
    private var furthestStart: [String: UInt64] = [:]
    private var fruitlessAttempts: [String: Int] = [:]
    private var armedAt: UInt64?
    private var undo = UndoLog()
    private var appInfos = AppInfoCache()

    init(host: PluginHost) throws {
        self.host = host
        wakeBudget = host.value(of: Self.wakeBudgetKey)
        maxConcurrent = host.integer(of: Self.maxConcurrentKey)
        maxPerApp = host.integer(of: Self.maxPerAppKey)
        // At most 1e9 s (ConfigKey.seconds): in µs well inside UInt64.
        turns = TransferTurns(turn: UInt64((host.value(of: Self.turnKey) * 1_000_000).rounded()))
    }

    func start() throws {
        typealias M = TransfersInterface.Method
        typealias S = TransfersInterface.Signal
        try host.export(PluginInterface(name: BgTaskNames.transfers, members: [
            .method(M.startDownload.rawValue, in: [("session_id", "s"), ("url", "s"), ("destination_path", "s"), ("options", "a{sv}")],
                    out: [("transfer_id", "s")]),
            .method(M.startUpload.rawValue, in: [("session_id", "s"), ("url", "s"), ("source_path", "s"), ("options", "a{sv}")],
                    out: [("transfer_id", "s")]),
            .method(M.cancel.rawValue, in: [("transfer_id", "s")]),
            .method(M.listTransfers.rawValue, in: [("session_id", "s")], out: [("transfers", "aa{sv}")]),
            .method(M.completeEvents.rawValue, in: [("token", "s")]),
            .signal(S.transferProgress.rawValue, [("transfer_id", "s"), ("done", "t"), ("total", "t")]),
            .signal(S.transferFinished.rawValue, [("token", "s"), ("transfer_id", "s"), ("result", "s"), ("info", "a{sv}")]),
        ]))
        let decoder = JSONDecoder()
        var unreadable = 0
        for (key, data) in try host.records(collection: Self.collection) {
            guard var record = try? decoder.decode(TransferRecord.self, from: Data(data)) else {
                unreadable += 1
                continue
            }
            // An attempt that ran when the daemon stopped is continued by the next one.
            if record.state == .running { record.state = .waiting }
            transfers[key] = record
            lastSequence = StoredSequence.last(lastSequence, Self.sequence(of: key))
        }
        if unreadable > 0 { host.log(.warning, "\(unreadable) stored transfers cannot be read and are ignored") }
        if !transfers.isEmpty { host.log(.info, "\(transfers.count) transfers from before the restart go on") }
        isStarted = true
        // A no-op post says whether reports can come back at all (ABI 1.7).
        canPost = host.poster.post {}
        if !canPost { host.log(.error, "this bgtaskd cannot run work posted from other threads (plugin ABI 1.7): transfers cannot run") }
        let conditions = SystemConditions(host: host)
        conditions.changed = { [unowned self] before in self.conditionsChanged(from: before) }
        // What waited for the network's state to be read may start now.
        conditions.settled = { [unowned self] in self.requestSchedule() }
        conditions.start()
        self.conditions = conditions
        requestSchedule()
        for app in Set(transfers.values.filter { $0.state == .finished }.map(\.app)).sorted() { deliver(app) }
    }

    func stop() {
        // No report reaches the loop after this: the runner's threads may run on a moment.
        gate.close()
        isStarted = false
        runner?.shutdown()
        runner = nil
    }

    // MARK: Batches

    func checkpoint() {
        undo.clear()
    }

    /// The notes for a rollback go once the batch has landed and its messages are out.
    func committed() {
        undo.clear()
    }

    func rollBack() {
        undo.undoAll()
        // An attempt started by the batch that failed stops again; a transfer
        // whose attempt ended in it waits for a new one.
        for (id, _) in running where transfers[id]?.state != .running { stopAttempt(id) }
        let retryAt = host.realtimeMicroseconds &+ TransferOptions.microseconds(Self.retryAfterStorageFailure)
        var ended = false
        for (id, record) in transfers where record.state == .running && running[id] == nil {
            var waiting = record
            waiting.state = .waiting
            // Its end could not be stored (a full disk): not again at once.
            waiting.notBefore = max(waiting.notBefore, retryAt)
            transfers[id] = waiting
            ended = true
        }
        if ended { requestSchedule() }
    }

    /// Stops the attempt in flight of `id`, if any; it drains until its `.ended`.
    @discardableResult
    private func stopAttempt(_ id: String) -> Bool {
        guard let attempt = running.removeValue(forKey: id) else { return false }
        turns.stopped(id)
        draining[id] = attempt
        runner?.cancel(id)
        return true
    }

    private func setToken(_ token: String, _ ids: [String]?) {
        undo.set(token, to: ids, in: &tokens) { [unowned self] in $0(&self.tokens) }
    }

    private func setInFlight(_ id: String, _ delivering: Bool) {
        undo.set(id, contained: delivering, in: &inFlight) { [unowned self] in $0(&self.inFlight) }
    }

    private func setRecord(_ id: String, _ record: TransferRecord?) {
        undo.set(id, to: record, in: &transfers) { [unowned self] in $0(&self.transfers) }
        if record == nil {
            furthestStart[id] = nil
            fruitlessAttempts[id] = nil
        }
    }

    /// Stores `record` (in memory and in the batch's commit).
    private func save(_ record: TransferRecord) throws(ModeError) {
        setRecord(record.id, record)
        let data: Data
        do { data = try JSONEncoder().encode(record) } catch { throw ModeError.failed("cannot encode transfer \(record.id): \(error)") }
        try host.put(Array(data), collection: Self.collection, key: record.id)
    }

    /// Like ``save(_:)`` outside a call: a failure is logged, and the batch rolls back.
    private func trySave(_ record: TransferRecord) {
        do { try save(record) } catch { host.log(.warning, "cannot store transfer \(record.id): \(error.message)") }
    }

    private func forget(_ id: String) throws(ModeError) {
        // Paused for another app and then cancelled, it would be kept for the daemon's life.
        respite.forget(id)
        setRecord(id, nil)
        try host.delete(collection: Self.collection, key: id)
    }

    // MARK: Calls

    func handle(_ call: PluginCall) throws {
        switch TransfersInterface.Method(rawValue: call.member) {
        case .startDownload: try start(call, kind: .download)
        case .startUpload: try start(call, kind: .upload)
        case .cancel: try cancel(call)
        case .listTransfers: try list(call)
        case .completeEvents: try completeEvents(call)
        case nil: throw ModeError.failed("unknown method \(call.member)")
        }
    }

    /// The calling app, which must have checked in and declare the transfer mode.
    private func declaringApp(_ call: PluginCall) throws(ModeError) -> String {
        guard let app = call.caller.appID else {
            throw ModeError(.unknownApplication, "this connection has no app id: call CheckIn first")
        }
        guard let info = appInfos.info(of: app, from: host) else {
            throw ModeError(.unknownApplication, "\(app) has no desktop entry")
        }
        guard info.modes.contains(Self.name) else {
            throw ModeError(.modeNotDeclared, "\(app) does not declare the transfer mode (X-BgTaskd-Modes)")
        }
        return app
    }

    private func start(_ call: PluginCall, kind: TransferRecord.Kind) throws {
        let arguments = call.arguments
        let session = try arguments.readString()
        let url = try arguments.readString()
        let path = try arguments.readString()
        let options = try Self.options(try arguments.readTypedOptions(), kind: kind)
        let app = try declaringApp(call)
        guard canPost else { throw ModeError.failed("this bgtaskd cannot run transfers (its plugin host lacks ABI 1.7's post)") }
        guard session.utf8.count <= Self.maximumSessionBytes else {
            throw ModeError.invalidArgs("the session id is longer than \(Self.maximumSessionBytes) bytes")
        }
        if let problem = TransferURL.problem(with: url) { throw ModeError.invalidArgs(problem) }
        // The partial file's name is the destination's and the id's: it must fit NAME_MAX too.
        let name = path.split(separator: "/").last.map(String.init) ?? ""
        guard name.utf8.count <= TransferPath.maximumNameBytes else {
            throw ModeError.invalidArgs("the file name '\(name.prefix(60))…' is longer than \(TransferPath.maximumNameBytes) bytes")
        }
        var resolved = path
        if let problem = TransferDirectories.problem(with: path, app: app, mustExist: kind == .upload, resolved: &resolved) {
            throw ModeError.invalidArgs(problem)
        }
        let count = transfers.values.lazy.filter { $0.app == app }.count
        guard count < maxPerApp else {
            throw ModeError(.limitExceeded, "\(app) has \(count) transfers already, the most Transfers.MaxPerApp (\(maxPerApp)) allows")
        }
        let now = host.realtimeMicroseconds
        let id = nextID()
        let record = TransferRecord(id: id, app: app, session: session, kind: kind, url: url, path: resolved, options: options, createdAt: now)
        try save(record)
        try call.reply { (reply) throws(ModeError) in try reply.append(id) }
        host.logWhenCommitted(.info, "\(app) \(kind == .download ? "downloads" : "uploads") \(id): \(TransferURL.redacted(url).prefix(200)) \(kind == .download ? "to" : "from") \(resolved)")
        requestSchedule()
    }

    /// StartDownload's and StartUpload's options, each of its own type.
    static func options(_ given: [String: (signature: String, value: PluginValue)], kind: TransferRecord.Kind) throws(ModeError) -> TransferOptions {
        typealias Key = TransfersInterface.OptionKey
        var options = TransferOptions()
        for (name, option) in given {
            func wrongType(_ expected: String) -> ModeError {
                ModeError.invalidArgs("option '\(name)' must be of type '\(expected)', not '\(option.signature)'")
            }
            switch Key(rawValue: name) {
            case .discretionary:
                guard option.signature == "b", case .bool(let value) = option.value else { throw wrongType("b") }
                options.discretionary = value
            case .allowMetered:
                guard option.signature == "b", case .bool(let value) = option.value else { throw wrongType("b") }
                options.allowMetered = value
            case .resourceTimeout:
                guard option.signature == "d", case .double(let value) = option.value else { throw wrongType("d") }
                guard value.isFinite, value > 0 else { throw ModeError.invalidArgs("resource_timeout_s must be a positive number of seconds") }
                options.resourceTimeout = min(value, TransferOptions.maximumResourceTimeout)
            case .headers:
                guard option.signature == "a{ss}", case .dictionary(let entries) = option.value else { throw wrongType("a{ss}") }
                var headers: [String: String] = [:]
                for (key, value) in entries { if case .string(let text) = value { headers[key] = text } }
                if let problem = TransferOptions.problem(withHeaders: headers) { throw ModeError.invalidArgs(problem) }
                options.headers = headers
            case .method:
                guard kind == .upload else { throw ModeError.invalidArgs("option 'method' is for uploads only") }
                guard option.signature == "s", case .string(let value) = option.value else { throw wrongType("s") }
                guard value == "PUT" || value == "POST" else { throw ModeError.invalidArgs("method must be PUT or POST, not '\(value.prefix(40))'") }
                options.method = value
            case nil:
                throw ModeError.invalidArgs("unknown option '\(name.prefix(60))' (known: \(Key.allCases.map(\.rawValue).joined(separator: ", ")))")
            }
        }
        return options
    }

    private func nextID() -> String {
        let previous = lastSequence
        undo.record { [unowned self] in self.lastSequence = previous }
        lastSequence += 1
        // The sequence keeps ids unique and ordered; the random part keeps them unguessable.
        return "t\(lastSequence)-\(String(UInt64.random(in: 0...UInt64.max), radix: 16))"
    }

    /// `records` in the order they were started: by the sequence in their
    /// ids, read once per record (not once per comparison).
    private static func oldestFirst<S: Sequence<TransferRecord>>(_ records: S) -> [TransferRecord] {
        records.map { (sequence(of: $0.id), $0) }.sorted { $0.0 < $1.0 }.map(\.1)
    }

    private static func sequence(of id: String) -> UInt64 {
        guard id.hasPrefix("t"), let dash = id.firstIndex(of: "-") else { return 0 }
        return UInt64(id[id.index(after: id.startIndex)..<dash]) ?? 0
    }

    /// The transfer `id` as `call`'s caller may touch it: its own app's, or any for a trusted caller.
    private func owned(_ id: String, by call: PluginCall) throws(ModeError) -> TransferRecord {
        guard let record = transfers[id], record.app == call.caller.appID || (call.caller.appID == nil && call.caller.isTrusted) else {
            throw ModeError.invalidArgs("no transfer '\(id.prefix(80))' of this app")
        }
        return record
    }

    private func cancel(_ call: PluginCall) throws {
        let id = try call.arguments.readString()
        let record = try owned(id, by: call)
        try forget(id)
        try call.reply()
        if stopAttempt(id) {
            discarded[id] = record
        } else {
            removePartial(record)
        }
        host.logWhenCommitted(.info, "\(record.app) cancelled transfer \(id)")
        requestSchedule()
    }

    private func list(_ call: PluginCall) throws {
        let session = try call.arguments.readString()
        let app = call.caller.appID
        guard app != nil || call.caller.isTrusted else {
            throw ModeError(.notPermitted, "only a checked-in app, or a trusted caller, may list transfers")
        }
        let chosen = Self.oldestFirst(transfers.values.lazy
            .filter { (app == nil || $0.app == app) && (session.isEmpty || $0.session == session) })
        try call.reply { (reply) throws(ModeError) in
            try reply.container("a", "a{sv}") { () throws(ModeError) in
                for record in chosen { try reply.append(dictionary: describe(record)) }
            }
        }
    }

    private func completeEvents(_ call: PluginCall) throws {
        let token = try call.arguments.readString()
        try host.complete(token: token, connection: call.caller.connection)
        let ids = tokens[token] ?? []
        setToken(token, nil)
        for id in ids {
            setInFlight(id, false)
            if transfers[id] != nil { try forget(id) }
        }
        try call.reply()
        host.logWhenCommitted(.debug, "transfers \(ids.joined(separator: ", ")) completed")
    }

    /// What ListTransfers and TransferFinished tell of a transfer.
    private func describe(_ record: TransferRecord) -> [String: PluginValue] {
        typealias Key = TransfersInterface.Key
        var entry: [String: PluginValue] = [
            Key.transferID.rawValue: .string(record.id),
            Key.sessionID.rawValue: .string(record.session),
            Key.appID.rawValue: .string(record.app),
            Key.kind.rawValue: .string(record.kind.rawValue),
            // Trusted callers list every app's transfers: no password goes with them.
            Key.url.rawValue: .string(TransferURL.redacted(record.url)),
            Key.path.rawValue: .string(record.path),
            Key.state.rawValue: .string(record.state.rawValue),
            Key.bytesDone.rawValue: .uint(record.bytesDone),
            Key.bytesTotal.rawValue: .uint(record.bytesTotal),
            Key.attempts.rawValue: .uint(UInt64(record.attempts)),
            Key.resumed.rawValue: .bool(record.resumed),
            Key.restarted.rawValue: .bool(record.restarted),
            Key.discretionary.rawValue: .bool(record.options.discretionary),
        ]
        if let result = record.result { entry[Key.result.rawValue] = .string(result) }
        if let error = record.error { entry[Key.error.rawValue] = .string(error) }
        if let status = record.status { entry[Key.status.rawValue] = .uint(UInt64(max(status, 0))) }
        if record.state == .waiting, let reason = waitingReason(record, now: host.realtimeMicroseconds) {
            entry[Key.waitingFor.rawValue] = .string(reason)
        }
        return entry
    }

    /// Why a waiting transfer waits now.
    private func waitingReason(_ record: TransferRecord, now: UInt64) -> String? {
        if sleeping { return "the machine to wake" }
        if !isInstalled(record.app) { return "its app to be installed again" }
        if let blocker = conditions?.current.blocker(for: record.options) { return blocker }
        if record.notBefore > now { return "a retry" }
        return "its turn"
    }

    // MARK: Running

    /// The network came back: what waits for a retry after failing without
    /// it tries again now, not when its backoff (up to 5 minutes) ends. A
    /// running transfer the new conditions hold back (a network turned
    /// metered under one that must avoid it, AC power gone under a
    /// discretionary one) pauses, as for a sleep: a download continues from
    /// where it stopped once they allow it again. Not for connectivity: a
    /// network really gone breaks the attempt by itself, and NetworkManager's
    /// "portal" or "limited" (one failed probe) must not stop what runs.
    private func conditionsChanged(from before: TransferConditions) {
        let current = conditions?.current ?? TransferConditions()
        var paused: [String: Int] = [:]
        if !current.isOffline {
            for id in running.keys.sorted() {
                guard let record = transfers[id], let blocker = current.blocker(for: record.options) else { continue }
                stopAttempt(id)
                paused[blocker, default: 0] += 1
            }
        }
        for (blocker, count) in paused.sorted(by: { $0.key < $1.key }) {
            host.log(.info, "\(count) transfer(s) pause: waiting for \(blocker)")
        }
        if before.isOffline, !current.isOffline {
            let now = host.realtimeMicroseconds
            for (id, record) in transfers where record.state == .waiting && record.notBefore > now {
                var retried = record
                retried.notBefore = 0
                transfers[id] = retried
            }
            host.log(.info, "the network is back: transfers waiting to retry try again now")
        }
        requestSchedule()
    }

    /// Whether the app still has a desktop entry. An uninstalled app's
    /// transfers wait for it to come back rather than run for nobody: the
    /// entry may be back in a moment (a package upgrade), so nothing is
    /// cancelled, and a download continues from where it stopped.
    private func isInstalled(_ app: String) -> Bool {
        appInfos.info(of: app, from: host) != nil
    }

    /// Desktop entries changed: running transfers of apps now uninstalled
    /// pause, and those of apps back again may start.
    private func pauseUninstalledApps() {
        var paused: [String: Int] = [:]
        for id in running.keys.sorted() {
            guard let record = transfers[id], !isInstalled(record.app) else { continue }
            stopAttempt(id)
            paused[record.app, default: 0] += 1
        }
        for (app, count) in paused.sorted(by: { $0.key < $1.key }) {
            host.log(.notice, "\(app) is uninstalled: its \(count) running transfer(s) pause until it is installed again")
        }
        requestSchedule()
    }

    /// Schedules soon, in a batch of its own: an attempt is an effect outside
    /// (a request to a server), so it must not start inside a call whose
    /// writes may yet be rolled back (a full disk), which would send a request
    /// for a transfer that was never accepted.
    private func requestSchedule() {
        guard !schedulePosted else { return }
        let mode = WeakMode(self)
        if host.poster.post({ mode.value?.runPostedSchedule() }) {
            schedulePosted = true
        } else {
            schedule()
        }
    }

    private func runPostedSchedule() {
        schedulePosted = false
        schedule()
    }

    /// Starts what may run, finishes what timed out, and arms the next opportunity.
    private func schedule() {
        guard isStarted, !sleeping else { return armTimer() }
        let now = host.realtimeMicroseconds
        var expiredApps: Set<String> = []
        for record in transfers.values where record.state != .finished && now >= record.expiresAt {
            // A running attempt stops, and its bytes go: the transfer is over.
            if stopAttempt(record.id) {
                discarded[record.id] = record
            } else if draining[record.id] == nil {
                removePartial(record)
            }
            finish(record, result: .timedOut, error: "not done within \(record.options.resourceTimeout) s (resource_timeout_s)", deliver: false)
            expiredApps.insert(record.app)
        }
        // One wake per app for all that timed out together.
        for app in expiredApps.sorted() { deliver(app) }
        // Nothing starts while the network's state is being read (at start-up,
        // after the system bus came back): it may hold a transfer back.
        if canPost, conditions?.isSettled ?? true {
            let current = conditions?.current ?? TransferConditions()
            let ready = Self.oldestFirst(transfers.values.lazy
                .filter {
                    $0.state == .waiting && $0.notBefore <= now && self.draining[$0.id] == nil
                        && current.blocker(for: $0.options) == nil && self.isInstalled($0.app)
                })
            // The slots made room for go to the apps they were made for, first.
            let favoured = running.count >= maxConcurrent ? makeRoom(for: ready) : []
            let first = favoured.compactMap { app in ready.first { $0.app == app } }.prefix(max(0, maxConcurrent - running.count))
            let rest = first.isEmpty ? ready : ready.filter { record in !first.contains { $0.id == record.id } }
            for record in Array(first) + fairTurns(rest, slots: maxConcurrent - running.count - first.count) {
                // A transfer stored by a build that let a bad URL or header through fails instead of reaching the HTTP client.
                if let problem = TransferURL.problem(with: record.url) ?? TransferOptions.problem(withHeaders: record.options.headers) {
                    finish(record, result: .failed, error: problem)
                    continue
                }
                begin(record)
            }
            nextTurnEnd = nextYield(of: ready, at: now)
        }
        armTimer()
    }

    /// When a transfer that runs may next yield its slot (``makeRoom(for:)``),
    /// if an app in `ready` still has none running; nil otherwise.
    private func nextYield(of ready: [TransferRecord], at now: UInt64) -> UInt64? {
        guard running.count >= maxConcurrent else { return nil }
        let holders = Set(running.keys.compactMap { transfers[$0]?.app })
        guard ready.contains(where: { !holders.contains($0.app) }) else { return nil }
        // A download on its first attempt learns its validator after this
        // schedule: counted too (``makeRoom(for:)`` checks it when the time comes).
        return running.keys.filter(mayBecomeResumable).compactMap { id in
            turns.turnEnds(id).map { max($0, respite.respiteEnds(id) ?? 0) }
        }.filter { $0 > now }.min()
    }

    /// A download not known to start over: it has a validator, or its first
    /// answer, which names one, has not come yet.
    private func mayBecomeResumable(_ id: String) -> Bool {
        transfers[id].map { $0.kind == .download && !$0.restarted && ($0.validator != nil || $0.status == nil) } ?? false
    }

    /// A download whose server named a validator and has not had to start
    /// again from zero: paused, it should continue where it stopped. (One
    /// that did start again, its server taking no ranges, never yields its
    /// slot for a turn: two such would take turns starting over for ever.)
    private func isResumable(_ id: String) -> Bool {
        transfers[id].map { $0.kind == .download && $0.validator != nil && !$0.restarted } ?? false
    }

    /// With every slot taken, an app whose transfers are ready while it has
    /// none running gets one: the app running the most (two at least)
    /// pauses one, which waits for a free slot again. A download that may
    /// continue where it stopped (``isResumable(_:)``) goes first, then any
    /// download, then an upload (which starts again from its first byte);
    /// between those, the one started last. When no app running two has one
    /// it may pause (every slot held by a different app, say), the resumable
    /// download that has held its slot longest yields it, once it has held
    /// it for `Transfers.TurnSec` (``TransferTurns``); nothing else does.
    /// The slots freed go to the apps they were freed for (``schedule()``). One paused either way is not
    /// paused again until it has run a minute after getting its slot back
    /// (``RoomRespite``). So one app's slow transfers do not hold every slot
    /// until they finish or time out.
    /// Returns the apps it made room for, in order.
    private func makeRoom(for ready: [TransferRecord]) -> [String] {
        let now = host.realtimeMicroseconds
        respite.prune(at: now)
        var runningOf: [String: [String]] = [:]
        for id in running.keys.sorted() { if let app = transfers[id]?.app { runningOf[app, default: []].append(id) } }
        var starved: [String] = []
        for record in ready where runningOf[record.app] == nil && !starved.contains(record.app) { starved.append(record.app) }
        func rank(_ id: String) -> (Int, UInt64) {
            let record = transfers[id]
            let kind = record?.kind == .download ? (isResumable(id) ? 2 : 1) : 0
            return (kind, running[id] ?? 0)
        }
        var favoured: [String] = []
        for app in starved {
            // The app running the most (two at least) that runs one it may pause.
            let busiest = runningOf.filter { $0.value.count >= 2 && $0.value.contains { respite.mayPause($0, at: now) } }
                .max { a, b in a.value.count != b.value.count ? a.value.count < b.value.count : a.key > b.key }
            let holder: String, victim: String, why: String
            if let (busy, ids) = busiest, let id = ids.filter({ respite.mayPause($0, at: now) }).max(by: { rank($0) < rank($1) }) {
                (holder, victim, why) = (busy, id, "\(busy) had \(ids.count)")
            } else if let (busy, id) = runningOf.filter({ $0.key != app && $0.value.count == 1 }).map({ ($0.key, $0.value[0]) })
                .filter({ isResumable($0.1) && respite.mayPause($0.1, at: now) && turns.hasHadTurn($0.1, at: now) })
                .min(by: { (turns.startedAt($0.1) ?? 0, $0.1) < (turns.startedAt($1.1) ?? 0, $1.1) }) {
                let held = (now - (turns.startedAt(id) ?? now)) / 1_000_000
                (holder, victim, why) = (busy, id, "\(busy) has had its turn (\(held) s)")
            } else {
                break
            }
            guard stopAttempt(victim) else { break }
            respite.paused(victim)
            runningOf[holder] = runningOf[holder]?.filter { $0 != victim }
            // The slot is the starved app's now: it takes no second one this way.
            runningOf[app] = [victim]
            favoured.append(app)
            host.log(.info, "transfer \(victim) of \(holder) pauses: \(app) has transfers waiting and none running, \(why)")
        }
        return favoured
    }

    /// Which of `ready` (oldest first) take the `slots` free: a free slot goes
    /// to the app with the fewest transfers running, between equals to the
    /// one served longest ago, and within an app to its oldest. So one app's
    /// long queue does not hold back another app's one download: that one
    /// starts at the next free slot.
    private func fairTurns(_ ready: [TransferRecord], slots: Int) -> [TransferRecord] {
        guard slots > 0, !ready.isEmpty else { return [] }
        var queues: [String: ArraySlice<TransferRecord>] = [:]
        for record in ready { queues[record.app, default: []].append(record) }
        var runningPerApp: [String: Int] = [:]
        for id in running.keys { if let app = transfers[id]?.app { runningPerApp[app, default: 0] += 1 } }
        var served = lastServed
        var turns: [TransferRecord] = []
        while turns.count < slots {
            let next = queues.filter { !$0.value.isEmpty }.min { a, b in
                let (ra, rb) = (runningPerApp[a.key] ?? 0, runningPerApp[b.key] ?? 0)
                if ra != rb { return ra < rb }
                let (sa, sb) = (served[a.key] ?? 0, served[b.key] ?? 0)
                return sa != sb ? sa < sb : a.key < b.key
            }
            guard let (app, queue) = next, let record = queue.first else { break }
            turns.append(record)
            queues[app] = queue.dropFirst()
            runningPerApp[app, default: 0] += 1
            served[app] = lastAttempt + UInt64(turns.count)
        }
        return turns
    }

    /// The next moment something waits for: a retry, or a timeout.
    private func armTimer() {
        var next = UInt64.max
        let now = host.realtimeMicroseconds
        for record in transfers.values where record.state != .finished {
            next = min(next, record.expiresAt)
            // Only a retry still ahead: one whose time has come waits for a slot or
            // a condition, which an attempt's end or a change brings, not a timer.
            if record.state == .waiting, record.notBefore > now { next = min(next, record.notBefore) }
        }
        if let turnEnd = nextTurnEnd, turnEnd > now { next = min(next, turnEnd) }
        if let retry = conditions?.retryAt { next = min(next, retry) }
        let wanted: UInt64? = next == .max ? nil : next
        guard wanted != armedAt else { return }
        armedAt = wanted
        host.scheduleOpportunity(at: wanted ?? 0)
    }

    private func begin(_ record: TransferRecord) {
        let runner = self.runner ?? HTTPTransferRunner()
        self.runner = runner
        var record = record
        record.state = .running
        record.notBefore = 0
        setRecord(record.id, record)
        lastAttempt += 1
        let attempt = lastAttempt
        lastServed[record.app] = attempt
        running[record.id] = attempt
        respite.started(record.id, at: host.realtimeMicroseconds)
        turns.started(record.id, at: host.realtimeMicroseconds)
        let gate = self.gate
        let poster = host.poster
        let mode = WeakMode(self)
        runner.run(TransferJob(record)) { report in
            gate.pass { _ = poster.post { mode.value?.received(report, attempt: attempt) } }
        }
        host.log(.debug, "transfer \(record.id) attempt \(record.attempts + 1) starts")
    }

    /// A report of attempt `attempt` of the runner, on the loop. Reports of
    /// an attempt that was stopped are not about the transfer any more.
    private func received(_ report: TransferReport, attempt: UInt64) {
        switch report {
        case .started(let id, let status, let validator, let done, let total, let resumed, let restarted):
            guard var record = transfers[id], running[id] == attempt else { return }
            record.status = status == 0 ? record.status : status
            record.validator = validator
            record.bytesDone = done
            record.bytesTotal = total
            // Progress is what the next attempt keeps: bytes an attempt moved
            // and a later one started over from (an upload, a download that
            // could not resume) or never reached (a server gone) are none.
            if done > furthestStart[id, default: 0] { fruitlessAttempts[id] = nil }
            furthestStart[id] = max(done, furthestStart[id, default: 0])
            if resumed { record.resumed = true }
            if restarted {
                record.restarted = true
                host.log(.notice, "transfer \(id): the server cannot continue it (no Range support, or the file changed): it starts again from zero")
            }
            // The validator must be on disk before bytes under it are: a restart resumes against it.
            trySave(record)
            progressed(record)
        case .progress(let id, let done, let total):
            guard var record = transfers[id], running[id] == attempt else { return }
            record.bytesDone = done
            record.bytesTotal = total
            transfers[id] = record
            progressed(record)
        case .ended(let id, let outcome):
            if draining[id] == attempt {
                // A stopped attempt has stopped writing: its partial file may go, and its transfer go on.
                draining[id] = nil
                if let record = discarded.removeValue(forKey: id) { removePartial(record) }
                if var record = transfers[id], record.state == .running {
                    record.state = .waiting
                    transfers[id] = record
                }
                return requestSchedule()
            }
            guard running[id] == attempt else { return }
            running[id] = nil
            turns.stopped(id)
            guard let record = transfers[id], record.state != .finished else { return requestSchedule() }
            ended(record, outcome)
            requestSchedule()
        }
    }

    /// Tells the app, when it is connected, how far the transfer got.
    private func progressed(_ record: TransferRecord) {
        guard let connection = connections[record.app] else { return }
        do {
            try host.emit(TransfersInterface.Signal.transferProgress.rawValue, interface: BgTaskNames.transfers, to: connection) {
                (signal) throws(ModeError) in
                try signal.append(record.id)
                try signal.append(record.bytesDone)
                try signal.append(record.bytesTotal)
            }
        } catch {
            host.log(.debug, "cannot send TransferProgress to \(record.app): \(error.message)")
        }
    }

    private func ended(_ record: TransferRecord, _ outcome: TransferOutcome) {
        var record = record
        switch outcome {
        case .success(let status, let bytes):
            // 0: no request was needed (the file was whole); the last status stands.
            if status != 0 { record.status = status }
            record.bytesDone = bytes
            if record.bytesTotal == 0 { record.bytesTotal = bytes }
            if record.kind == .download, let problem = land(record) {
                return finish(record, result: .failed, error: problem)
            }
            finish(record, result: .success, error: nil)
        case .status(let status, let retryAfter):
            record.status = status
            if TransferBackoff.isTransient(status: status) {
                retry(record, why: "the server answered \(status)", retryAfter: retryAfter)
            } else {
                if record.kind == .download { removePartial(record) }
                finish(record, result: .failed, error: "the server answered \(status)")
            }
        case .network(let why):
            retry(record, why: why, retryAfter: nil)
        case .fatal(let why):
            if record.kind == .download { removePartial(record) }
            finish(record, result: .failed, error: why)
        case .cancelled:
            // Sleep or a stop took the attempt, not the transfer.
            record.state = .waiting
            setRecord(record.id, record)
        }
    }

    private func retry(_ record: TransferRecord, why: String, retryAfter: Double?) {
        var record = record
        record.attempts += 1
        // The wait grows with the attempts since one resumed further than
        // any before (see `received`): a server that sends a part per
        // request is not a server that is down, but one that fails every
        // upload, or drops every download it cannot resume, is.
        let fruitless = fruitlessAttempts[record.id, default: 0] + 1
        fruitlessAttempts[record.id] = fruitless
        let delay = TransferBackoff.delay(afterAttempt: fruitless, retryAfter: retryAfter)
        record.state = .waiting
        record.error = why
        record.notBefore = host.realtimeMicroseconds &+ TransferOptions.microseconds(delay)
        trySave(record)
        host.log(.info, "transfer \(record.id) failed (\(why.prefix(300))); attempt \(record.attempts + 1) in \(delay) s")
    }

    /// Moves a finished download's partial file to its destination; why it could not, or nil.
    private func land(_ record: TransferRecord) -> String? {
        // The directory is opened and checked again, on disk, and the rename made relative to it.
        let parent: TransferDirectories.Parent
        switch TransferDirectories.openParent(of: record.path, app: record.app) {
        case .success(let opened): parent = opened
        case .failure(let problem): return "the file cannot be used any more: \(problem)"
        }
        defer { close(parent.fd) }
        let partialName = TransferPath.partialName(for: parent.name, id: record.id)
        var info = stat()
        if fstatat(parent.fd, parent.name, &info, AT_SYMLINK_NOFOLLOW) == 0, (info.st_mode & S_IFMT) == S_IFDIR {
            unlinkat(parent.fd, partialName, 0)
            return "\(record.path) is a directory now"
        }
        guard renameat(parent.fd, partialName, parent.fd, parent.name) == 0 else {
            let why = String(cString: strerror(errno))
            unlinkat(parent.fd, partialName, 0)
            return "cannot move the download to \(record.path): \(why)"
        }
        // If the transfer's end cannot be stored, the file goes back to being
        // partial: whole, so that the next attempt finishes without downloading it again.
        undo.record { [path = record.path, id = record.id, app = record.app] in
            guard case .success(let parent) = TransferDirectories.openParent(of: path, app: app) else { return }
            defer { close(parent.fd) }
            renameat(parent.fd, parent.name, parent.fd, TransferPath.partialName(for: parent.name, id: id))
        }
        return nil
    }

    private func removePartial(_ record: TransferRecord) {
        guard record.kind == .download else { return }
        TransferDirectories.removePartial(of: record.path, id: record.id, app: record.app)
    }

    private func finish(_ record: TransferRecord, result: TransfersInterface.Result, error: String?, deliver wake: Bool = true) {
        respite.forget(record.id)
        fruitlessAttempts[record.id] = nil
        furthestStart[record.id] = nil
        var record = record
        record.state = .finished
        record.result = result.rawValue
        record.error = error
        trySave(record)
        host.logWhenCommitted(result == .success ? .info : .notice,
                              "transfer \(record.id) of \(record.app): \(result.rawValue)\(error.map { " (\($0.prefix(300)))" } ?? "")")
        if wake { deliver(record.app) }
    }

    // MARK: Waking the app

    /// Wakes `app` for its finished transfers that no wake carries yet.
    private func deliver(_ app: String) {
        let ids = Self.oldestFirst(transfers.values.lazy.filter { $0.app == app && $0.state == .finished && !self.inFlight.contains($0.id) })
            .map(\.id)
        guard !ids.isEmpty else { return }
        do {
            let token = try host.wake(app, reason: Self.name, budget: wakeBudget)
            setToken(token, ids)
            for id in ids { setInFlight(id, true) }
        } catch {
            host.log(.warning, "cannot wake \(app) for \(ids.count) finished transfers: \(error.message); they wait for its next check-in")
        }
    }

    private func release(_ token: String) {
        for id in tokens[token] ?? [] { setInFlight(id, false) }
        setToken(token, nil)
    }

    func handle(_ event: PluginEvent) {
        switch event {
        case .tokenReady(_, let token, let connection):
            let carried = (tokens[token] ?? []).filter { transfers[$0] != nil }
            for id in carried {
                guard let record = transfers[id] else { continue }
                var info = describe(record)
                // The app completes the wake once it has handled this many results.
                info[TransfersInterface.Key.tokenTransfers.rawValue] = .uint(UInt64(carried.count))
                do {
                    try host.emit(TransfersInterface.Signal.transferFinished.rawValue, interface: BgTaskNames.transfers, to: connection) {
                        (signal) throws(ModeError) in
                        try signal.append(token)
                        try signal.append(record.id)
                        try signal.append(record.result ?? TransfersInterface.Result.failed.rawValue)
                        try signal.append(dictionary: info)
                    }
                } catch {
                    host.log(.warning, "cannot send TransferFinished for \(id): \(error.message)")
                }
            }
        case .tokenExpired(let app, let token):
            guard tokens[token] != nil else { return }
            release(token)
            host.logWhenCommitted(.notice, "\(app) did not call CompleteEvents within \(self.wakeBudget) s: its finished transfers wait for its next check-in")
        case .launchFailed(let app, let token, let reason):
            if let token, tokens[token] != nil { release(token) }
            // Another instance still runs (the one the results were handed
            // to went): it takes them now; a running instance never checks in again.
            if token != nil, host.appInfo(app)?.hasRunningInstance == true {
                host.log(.notice, "a wake of \(app) for finished transfers failed: \(reason); they go to its running instance")
                deliver(app)
            } else {
                host.log(.warning, "a wake of \(app) for finished transfers failed: \(reason)")
            }
        case .appCheckedIn(let app, let connection, _):
            connections[app] = connection
            deliver(app)
        case .appWoken(let app, let connection, _):
            connections[app] = connection
            deliver(app)
        case .appGone(let app):
            connections[app] = nil
        case .sleepChanged(let asleep, _):
            sleeping = asleep
            if asleep {
                // The network goes with the machine: attempts stop, transfers wait for the wake.
                let paused = running.count
                for id in Array(running.keys) { stopAttempt(id) }
                host.log(.info, "the machine sleeps: \(paused) transfers pause")
            }
            requestSchedule()
        case .wakeOpportunity:
            armedAt = nil
            conditions?.retryIfDue(at: host.realtimeMicroseconds)
            requestSchedule()
        case .systemBusBack:
            conditions?.systemBusBack()
        case .appWakeEnded:
            break
        case .refreshChanged:
            appInfos.clear()
            // Or the power state changed.
            conditions?.powerChanged()
        case .appsChanged:
            appInfos.clear()
            pauseUninstalledApps()
        case .tokenCompleted, .appStateChanged:
            break
        }
    }

    // MARK: Descriptions

    func describe(app: String, into description: inout [String: PluginValue]) {
        let mine = transfers.values.filter { $0.app == app }
        guard !mine.isEmpty else { return }
        description["transfers_waiting"] = .uint(UInt64(mine.filter { $0.state == .waiting }.count))
        description["transfers_running"] = .uint(UInt64(mine.filter { $0.state == .running }.count))
        description["transfers_finished"] = .uint(UInt64(mine.filter { $0.state == .finished }.count))
    }

    func waitingEvents(for app: String) -> Int {
        transfers.values.filter { $0.app == app && $0.state == .finished && !inFlight.contains($0.id) }.count
    }
}
