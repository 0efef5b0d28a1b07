import BgTaskCore
import BgTaskPluginKit
import BgTaskProtocol
import Foundation

// Implementation notes
//
// The fetch mode (DESIGN §5) keeps one FetchRecord per app that ever set an
// interval, in the daemon's database ("apps" collection, FetchRecord+Storage), and a
// FetchSchedule built from them. It asks the host for a wake opportunity at
// the schedule's next wake; then it wakes every due app that is eligible —
// known, declaring `fetch`, Background App Refresh available, not in the
// foreground — and holds the others out of the schedule until what kept
// them out changes (refresh settings, desktop entries, the app's state).
//
// A wake's token is delivered as PerformFetch once the host says the app can
// take it; CompleteFetch records the result; a token that expires records an
// offence (the host terminates the app). Every outcome is written before the
// reply, so a restart forgets nothing.

/// The `fetch` mode: background fetch at the apps' intervals.
final class FetchMode: ModePlugin {
    static let name = "fetch"
    static let version = "1.0.0"

    private let host: PluginHost
    private var schedule: FetchSchedule
    private let wakeBudget: Double
    /// Tokens handed out and not yet finished: whose and when.
    private var tokens: [String: (app: String, at: UInt64)] = [:]
    /// Apps whose record changed only in bookkeeping (the time of a fetch wake)
    /// and still has to be written.
    private var unsaved: Set<String> = []

    init(host: PluginHost) throws {
        self.host = host
        schedule = FetchSchedule(floor: host.configNumber("Fetch.MinimumIntervalSec") ?? 900)
        wakeBudget = host.configNumber("Fetch.WakeBudgetSec") ?? 30
    }

    func start() throws {
        try host.export(PluginInterface(name: BgTaskNames.fetch, members: [
            .method("SetMinimumFetchInterval", in: [("seconds", "d")]),
            .method("GetFetchRegistration", out: [("policy", "s"), ("seconds", "d"), ("next_earliest_usec", "t")]),
            .method("CompleteFetch", in: [("token", "s"), ("result", "s")]),
            .method("SimulateFetch", in: [("app_id", "s")]),
            .signal("PerformFetch", [("token", "s")]),
        ]))
        for (app, data) in try host.records(collection: "apps") {
            do {
                schedule.set(app, try FetchRecord(storageBytes: data))
            } catch {
                host.log(.warning, "ignoring the unreadable fetch record of \(app): \(error)")
            }
        }
        reviewHolds()
        host.log(.info, "\(schedule.records.count) apps registered for background fetch")
        armNextWake()
    }

    func stop() {
        saveUnsaved()
    }

    // MARK: Calls

    func handle(_ call: PluginCall) throws {
        switch call.member {
        case "SetMinimumFetchInterval": try setMinimumFetchInterval(call)
        case "GetFetchRegistration": try getFetchRegistration(call)
        case "CompleteFetch": try completeFetch(call)
        case "SimulateFetch": try simulateFetch(call)
        default: throw ModeError.failed("unknown method \(call.member)")
        }
    }

    private func setMinimumFetchInterval(_ call: PluginCall) throws {
        let seconds = try call.arguments.readDouble()
        let interval: FetchInterval
        do { interval = try FetchInterval(seconds: seconds) } catch { throw ModeError.invalidArgs(error.message) }
        let app = try declaringApp(call.caller.appID)
        var record = schedule.records[app] ?? FetchRecord(interval: interval, registeredAt: host.realtimeMicroseconds)
        if record.interval != interval {
            record.interval = interval
            record.registeredAt = host.realtimeMicroseconds
        }
        try save(app, record)
        try call.reply()
        host.log(.info, "\(app) asked for fetch interval \(interval.policyName) (\(seconds) s)")
        armNextWake()
    }

    private func getFetchRegistration(_ call: PluginCall) throws {
        let app = try declaringApp(call.caller.appID)
        let record = schedule.records[app]
        let interval = record.map { schedule.effectiveInterval(of: $0) ?? .infinity } ?? .infinity
        let next = schedule.isHeld(app) ? 0 : (schedule.nextFetch(of: app) ?? 0)
        try call.reply { (reply) throws(ModeError) in
            try reply.append(record?.interval.policyName ?? "never")
            try reply.append(interval)
            try reply.append(next)
        }
    }

    private func completeFetch(_ call: PluginCall) throws {
        let arguments = call.arguments
        let token = try arguments.readString()
        let resultText = try arguments.readString()
        let result: FetchResult
        do { result = try FetchResult(parsing: resultText) } catch { throw ModeError.invalidArgs(error.message) }
        try host.complete(token: token, connection: call.caller.connection)
        if let (app, at) = tokens.removeValue(forKey: token) {
            try record(FetchRecord.Outcome(at: at, result: result), for: app)
            host.log(.info, "\(app) completed its fetch: \(result.rawValue)")
        }
        try call.reply()
    }

    private func simulateFetch(_ call: PluginCall) throws {
        let appText = try call.arguments.readString()
        guard call.caller.isTrusted else {
            throw ModeError.bgtaskd("NotPermitted", "only trusted callers may simulate a background fetch")
        }
        let app = try declaringApp(appText)
        let info = host.appInfo(app)
        guard info?.refreshStatus == "available" else {
            throw ModeError.bgtaskd("RefreshDisabled", "Background App Refresh is \(info?.refreshStatus ?? "off") for \(app)")
        }
        try wake(app)
        try call.reply()
    }

    /// The app a call is about, if it has a desktop entry that declares `fetch`.
    private func declaringApp(_ app: String?) throws(ModeError) -> String {
        guard let app else {
            throw ModeError.bgtaskd("UnknownApplication", "this connection has no app id: call CheckIn first")
        }
        if let problem = AppID.problem(with: app) {
            throw ModeError.invalidArgs("'\(app.prefix(300))' is not a valid desktop-file id: \(problem)")
        }
        guard let info = host.appInfo(app) else {
            throw ModeError.bgtaskd("UnknownApplication", "\(app) has no desktop entry")
        }
        guard info.modes.contains("fetch") else {
            throw ModeError.bgtaskd("ModeNotDeclared", "\(app) does not declare the fetch mode (X-BgTaskd-Modes)")
        }
        return app
    }

    // MARK: Events

    func handle(_ event: PluginEvent) {
        switch event {
        case .tokenReady(_, let token, let connection):
            do {
                try host.emit("PerformFetch", interface: BgTaskNames.fetch, to: connection) { (signal) throws(ModeError) in
                    try signal.append(token)
                }
            } catch {
                host.log(.warning, "cannot send PerformFetch: \(error)")
            }
            saveUnsaved()
        case .tokenExpired(let app, let token):
            guard let (_, at) = tokens.removeValue(forKey: token) else { return }
            host.log(.notice, "\(app) did not complete its fetch within \(wakeBudget) s: offence counted")
            try? record(FetchRecord.Outcome(at: at, result: nil), for: app)
        case .launchFailed(let app, let token, let reason):
            if let token { tokens[token] = nil }
            host.log(.warning, "cannot wake \(app) to fetch: \(reason)")
        case .wakeOpportunity:
            wakeDueApps()
        case .appStateChanged(let app, _), .appGone(let app):
            if schedule.isHeld(app) { reviewHold(app) }
        case .appsChanged, .refreshChanged:
            reviewHolds()
        case .appCheckedIn, .tokenCompleted, .appWoken:
            break
        }
        saveUnsaved()
        armNextWake()
    }

    // MARK: Scheduling

    /// Wakes every app that is due, with those due within the coalescing window.
    private func wakeDueApps() {
        let due = schedule.takeDue(at: host.realtimeMicroseconds)
        for app in due {
            if let reason = ineligibility(of: app) {
                host.log(.debug, "not fetching \(app) now: \(reason)")
                schedule.hold(app)
                continue
            }
            do {
                try wake(app)
            } catch {
                host.log(.warning, "cannot wake \(app) to fetch: \(error)")
                // Back in line at its next interval: the host holds broken launches back.
                if var record = schedule.records[app] {
                    record.lastFetchAt = host.realtimeMicroseconds
                    try? save(app, record)
                }
            }
        }
        if !due.isEmpty { host.log(.info, "fetch wake for \(due.count) app(s): \(due.joined(separator: ", "))") }
    }

    /// Asks the host to wake the app with a fetch token, and notes the fetch.
    /// The note is bookkeeping, not an outcome: it is written once PerformFetch
    /// is out, so the wake does not wait for the disk.
    private func wake(_ app: String) throws {
        let now = host.realtimeMicroseconds
        let token = try host.wake(app, reason: "fetch", budget: wakeBudget)
        tokens[token] = (app, now)
        var record = schedule.records[app] ?? FetchRecord(interval: .never, registeredAt: now)
        record.lastFetchAt = now
        reschedule(app, record)
        unsaved.insert(app)
    }

    /// Writes records whose bookkeeping changed.
    private func saveUnsaved() {
        for app in unsaved {
            guard let record = schedule.records[app] else { continue }
            do {
                try host.put(record.storageBytes(), collection: "apps", key: app)
            } catch {
                host.log(.warning, "cannot store the fetch record of \(app): \(error)")
            }
        }
        unsaved.removeAll()
    }

    /// Why an app should not be fetched now, or nil if it may be.
    private func ineligibility(of app: String) -> String? {
        guard let info = host.appInfo(app) else { return "it has no desktop entry" }
        guard info.modes.contains("fetch") else { return "it does not declare the fetch mode" }
        guard info.refreshStatus == "available" else { return "Background App Refresh is \(info.refreshStatus)" }
        if info.running, info.state == "active" || info.state == "inactive" { return "it is in the foreground" }
        return nil
    }

    private func reviewHold(_ app: String) {
        if ineligibility(of: app) == nil { schedule.release(app) }
    }

    private func reviewHolds() {
        for app in schedule.records.keys {
            if ineligibility(of: app) == nil { schedule.release(app) } else { schedule.hold(app) }
        }
    }

    private func armNextWake() {
        host.scheduleOpportunity(at: schedule.nextWake() ?? 0)
    }

    // MARK: Records

    private func record(_ outcome: FetchRecord.Outcome, for app: String) throws {
        var record = schedule.records[app] ?? FetchRecord(interval: .never, registeredAt: outcome.at)
        record.record(outcome)
        try save(app, record)
    }

    /// Writes the record (on disk when this returns) and reschedules the app.
    private func save(_ app: String, _ record: FetchRecord) throws {
        reschedule(app, record)
        try host.put(record.storageBytes(), collection: "apps", key: app)
    }

    /// Puts the record in the schedule, keeping a hold.
    private func reschedule(_ app: String, _ record: FetchRecord) {
        let held = schedule.isHeld(app)
        schedule.set(app, record)
        if held { schedule.hold(app) }
    }

    // MARK: bgtaskctl apps

    func describe(app: String, into description: inout [String: PluginValue]) {
        guard let record = schedule.records[app] else { return }
        description["fetch_policy"] = .string(record.interval.policyName)
        if let interval = schedule.effectiveInterval(of: record) { description["fetch_interval"] = .double(interval) }
        if let next = schedule.nextFetch(of: app), !schedule.isHeld(app) { description["fetch_next_usec"] = .uint(next) }
        if let held = ineligibility(of: app), schedule.isHeld(app) { description["fetch_held"] = .string(held) }
        if let last = record.history.last {
            // A wake the app did not answer in time shows as such, not as its earlier answer.
            description["fetch_last_result"] = .string(last.result?.rawValue ?? "missed")
        }
        if let lastFetch = record.lastFetchAt { description["fetch_last_usec"] = .uint(lastFetch) }
        description["fetch_offences"] = .uint(UInt64(record.offences))
    }
}
