import BgTaskFetchCore
import BgTaskPluginKit
import BgTaskProtocol
import Foundation

// Implementation notes
//
// The fetch mode (docs/DESIGN.md §5) keeps one FetchRecord per app that ever set an
// interval, in the daemon's database ("apps" collection, FetchRecord+Storage),
// and what the planner learned about it ("learning": its usage habit and
// content rate), and plans with the core's AdaptivePlanner — the same code
// bgtaskd-sim runs. It asks the host for a wake opportunity at the planner's
// next wake; then it wakes the apps the planner picks. The planner hears when
// an app comes to the foreground and leaves it (opens it learns from), and
// holds apps that are not eligible — unknown, not declaring `fetch`,
// Background App Refresh not available — until that changes.
//
// A wake's token is delivered as PerformFetch once the host says the app can
// take it; CompleteFetch records the result; a token that expires records an
// offence (the host terminates the app). Every outcome is written before the
// reply, so a restart forgets nothing.

/// The `fetch` mode: background fetch planned from the apps' intervals and habits.
final class FetchMode: ModePlugin {
    static let name = "fetch"
    static let wakesNeedRefresh = true
    /// A push counts as bringing its app up to date only once it is completed.
    static let wantsWakeEnds = true
    static let version = "1.0.0"

    static let wakeBudgetKey = ConfigKey.wakeBudget(
        "Fetch.WakeBudgetSec", default: 30, "time to call CompleteFetch after a fetch wake")
    static let minimumIntervalKey = ConfigKey.seconds(
        "Fetch.MinimumIntervalSec", default: 900, positive: false, "floor for every fetch interval")
    static let maximumSpacingKey = ConfigKey.seconds(
        "Fetch.MaximumSpacingSec", default: 21_600, positive: true,
        "longest an app waits for a fetch while the machine is awake (sooner where it is usually opened)")
    static let configKeys = [wakeBudgetKey, minimumIntervalKey, maximumSpacingKey]
    static let errorNames: [ModeError.Code] = [
        .notPermitted, .refreshDisabled, .unknownApplication, .modeNotDeclared, .noSuchToken,
    ]

    private let host: PluginHost
    private var planner: AdaptivePlanner
    private let wakeBudget: Double
    /// Tokens handed out and not yet finished: whose and when.
    private var tokens: [String: (app: String, at: UInt64)] = [:]
    /// Apps whose record changed only in bookkeeping (the time of a fetch wake)
    /// and still has to be written.
    private var unsaved: Set<String> = []
    /// What the host said of apps (modes, refresh status): asking is on the
    /// path of every SimulateFetch.
    private var declared = AppInfoCache()

    /// SimulateFetch calls that launched their app, by wake token: answered
    /// once the app has its PerformFetch, or with why it could not get it, or
    /// (success: it is still starting) at `answerBy`, realtime µs.
    private var simulations: [String: (call: PluginCall, answerBy: UInt64)] = [:]
    /// Whether the machine sleeps (the host says so with sleepChanged).
    private var sleeping = false
    /// When the UTC offset was last read (monotonic µs): once a minute at
    /// most, so that a wake's path does not stat /etc/localtime each time.
    private var offsetReadAt: UInt64?
    /// How long a SimulateFetch waits for a launched app before it answers that it was launched.
    static let simulationWait: UInt64 = 5_000_000

    /// How to undo what the current batch changed (see ``rollBack()``).
    private var undo = UndoLog()
    /// Apps whose planner state the current batch saved for undo already.
    private var touched: Set<String> = []
    /// Pushes handed to apps and not yet ended, oldest first: when each made
    /// its app up to date, and since when it was up to date before. In
    /// memory only: after a restart a push under way counts as taken in.
    private var pushesUnderWay: [String: [(at: UInt64, before: UInt64?)]] = [:]
    /// The mode whose wakes bring an app's news (``PluginEvent/appWoken(app:connection:reason:)``).
    static let pushMode = "remote-notification"

    init(host: PluginHost) throws {
        self.host = host
        planner = AdaptivePlanner(floor: host.value(of: Self.minimumIntervalKey), utcOffset: Self.localUTCOffset())
        planner.ceiling = .milliseconds(Int64(host.value(of: Self.maximumSpacingKey) * 1000))
        wakeBudget = host.value(of: Self.wakeBudgetKey)
    }

    func start() throws {
        try host.export(PluginInterface(name: BgTaskNames.fetch, members: [
            .method(FetchInterface.Method.setMinimumFetchInterval.rawValue, in: [("seconds", "d")]),
            .method(FetchInterface.Method.getFetchRegistration.rawValue, out: [("policy", "s"), ("seconds", "d"), ("next_earliest_usec", "t")]),
            .method(FetchInterface.Method.completeFetch.rawValue, in: [("token", "s"), ("result", "s")]),
            .method(FetchInterface.Method.simulateFetch.rawValue, in: [("app_id", "s")]),
            .signal(FetchInterface.Signal.performFetch.rawValue, [("token", "s")]),
        ]))
        var learned: [String: AppLearning] = [:]
        for (app, data) in try host.records(collection: "learning") {
            do {
                learned[app] = try AppLearning(storageBytes: data)
            } catch {
                host.log(.warning, "ignoring what was learned about \(app) (unreadable): \(error)")
            }
        }
        let now = host.realtimeMicroseconds
        for (app, data) in try host.records(collection: "apps") {
            do {
                planner.restore(app, record: try FetchRecord(storageBytes: data), learned: learned[app], at: now)
            } catch {
                host.log(.warning, "ignoring the unreadable fetch record of \(app): \(error)")
            }
        }
        reviewApps()
        host.log(.info, "\(planner.apps.count) apps registered for background fetch (\(learned.count) with usage learned)")
        armNextWake()
    }

    func stop() {
        saveUnsaved()
    }

    // MARK: Batches

    func checkpoint() {
        undo.clear()
        touched.removeAll(keepingCapacity: true)
    }

    /// The notes for a rollback go once the batch has landed and its messages are out.
    func committed() {
        undo.clear()
    }

    /// A batch's writes were rolled back (a full disk): an interval it set, a
    /// result it recorded, a wake it planned are forgotten; bookkeeping it
    /// failed to write is written by a later batch.
    func rollBack() {
        undo.undoAll()
        touched.removeAll(keepingCapacity: true)
        armNextWake()
    }

    // MARK: Changes, undoable

    /// The app's planner state is about to change: save it once per batch.
    private func touch(_ app: String) {
        guard touched.insert(app).inserted else { return }
        let saved = planner.apps[app]
        undo.record { [unowned self] in self.planner.reinstate(app, saved, at: self.host.realtimeMicroseconds) }
    }

    private func setPushesUnderWay(_ app: String, _ value: [(at: UInt64, before: UInt64?)]?) {
        let old = pushesUnderWay[app]
        undo.record { [unowned self] in self.pushesUnderWay[app] = old }
        pushesUnderWay[app] = value
    }

    private func setToken(_ token: String, _ value: (app: String, at: UInt64)?) {
        let old = tokens[token]
        undo.record { [unowned self] in self.tokens[token] = old }
        tokens[token] = value
    }

    private func setSimulation(_ token: String, _ value: (call: PluginCall, answerBy: UInt64)?) {
        let old = simulations[token]
        undo.record { [unowned self] in
            // A SimulateFetch whose wake is undone is answered as undone.
            if old == nil, let added = self.simulations[token] {
                added.call.fail(ModeError(.storageFailed, "nothing was done: the fetch plugin's state could not be saved"))
            }
            self.simulations[token] = old
        }
        simulations[token] = value
    }

    private func markUnsaved(_ app: String) {
        guard unsaved.insert(app).inserted else { return }
        undo.record { [unowned self] in self.unsaved.remove(app) }
    }

    // MARK: Calls

    func handle(_ call: PluginCall) throws {
        followLocalTime()
        switch FetchInterface.Method(rawValue: call.member) {
        case .setMinimumFetchInterval: try setMinimumFetchInterval(call)
        case .getFetchRegistration: try getFetchRegistration(call)
        case .completeFetch: try completeFetch(call)
        case .simulateFetch: try simulateFetch(call)
        case nil: throw ModeError.failed("unknown method \(call.member)")
        }
    }

    private func setMinimumFetchInterval(_ call: PluginCall) throws {
        let seconds = try call.arguments.readDouble()
        let interval: FetchInterval
        do { interval = try FetchInterval(seconds: seconds) } catch { throw ModeError.invalidArgs(error.message) }
        let app = try declaringApp(call.caller.appID)
        let now = host.realtimeMicroseconds
        if planner.apps[app]?.record.interval != interval {
            touch(app)
            planner.register(app, interval: interval, at: now)
            review(app)
        }
        try save(app)
        try call.reply()
        // What is in force, not the number asked for: `minimum` is 0 on the bus and the floor here.
        let effective = planner.effectiveInterval(of: app).map { "\($0) s" } ?? "no fetches"
        host.logWhenCommitted(.info, "\(app) asked for fetch interval \(interval.policy.rawValue) (\(seconds) s asked, \(effective) in force)")
        armNextWake()
    }

    private func getFetchRegistration(_ call: PluginCall) throws {
        let app = try declaringApp(call.caller.appID)
        let record = planner.apps[app]?.record
        let interval = planner.effectiveInterval(of: app) ?? .infinity
        // The earliest moment allowed; `bgtaskctl apps` shows the plan, which may
        // be later. None while the app is held out of the schedule (refresh off).
        let next = planner.apps[app]?.isEligible == true ? planner.earliestFetch(of: app) ?? 0 : 0
        try call.reply { (reply) throws(ModeError) in
            try reply.append((record?.interval.policy ?? .never).rawValue)
            try reply.append(interval)
            try reply.append(next)
        }
    }

    private func completeFetch(_ call: PluginCall) throws {
        let arguments = call.arguments
        let token = try arguments.readString()
        let resultText = try arguments.readString()
        let result: FetchResult
        do { result = try FetchResult(parsing: resultText, of: "fetch") } catch { throw ModeError.invalidArgs(error.message) }
        try host.complete(token: token, connection: call.caller.connection)
        if let (app, at) = tokens[token] {
            setToken(token, nil)
            try record(result, for: app, at: at)
            host.logWhenCommitted(.info, "\(app) completed its fetch: \(result.rawValue)")
        }
        try call.reply()
    }

    private func simulateFetch(_ call: PluginCall) throws {
        let appText = try call.arguments.readString()
        guard call.caller.isTrusted else {
            throw ModeError(.notPermitted, "only trusted callers may simulate a background fetch")
        }
        let (app, info) = try declaringAppInfo(appText)
        guard info.refreshStatus == "available" else {
            throw ModeError(.refreshDisabled, "Background App Refresh is \(info.refreshStatus) for \(app)")
        }
        let token = try wake(app)
        // While the machine sleeps the wake waits for the machine's wake: say so now.
        if sleeping {
            host.log(.info, "SimulateFetch for \(app) while the machine sleeps: its fetch waits for the wake")
            try call.reply()
            return
        }
        // Answered once the app has its PerformFetch (a running app: right
        // after this call), or with why it could not (a command that does not
        // start), or after a while if it is still starting.
        setSimulation(token, (call, host.realtimeMicroseconds + Self.simulationWait))
        armNextWake()
    }

    /// Answers the SimulateFetch waiting for this token's app, if one does.
    private func answerSimulation(_ token: String, failure: String? = nil) {
        guard let call = simulations[token]?.call else { return }
        setSimulation(token, nil)
        if let failure {
            call.fail(.failed(failure))
        } else {
            do { try call.reply() } catch { host.log(.warning, "cannot answer SimulateFetch: \(error)") }
        }
    }

    /// The app a call is about, if it has a desktop entry that declares `fetch`.
    private func declaringApp(_ app: String?) throws(ModeError) -> String {
        try declaringAppInfo(app).app
    }

    /// The app a call is about and what the host knows of it (asked once: it is on the path of every wake).
    private func declaringAppInfo(_ app: String?) throws(ModeError) -> (app: String, info: AppInfo) {
        guard let app else {
            throw ModeError(.unknownApplication, "this connection has no app id: call CheckIn first")
        }
        if let problem = DesktopFileID.problem(with: app) {
            throw ModeError.invalidArgs("'\(app.prefix(300))' is not a valid desktop-file id: \(problem)")
        }
        guard let info = declared.info(of: app, from: host) else {
            throw ModeError(.unknownApplication, "\(app) has no desktop entry")
        }
        guard info.modes.contains("fetch") else {
            throw ModeError(.modeNotDeclared, "\(app) does not declare the fetch mode (X-BgTaskd-Modes)")
        }
        return (app, info)
    }

    // MARK: Events

    func handle(_ event: PluginEvent) {
        followLocalTime()
        switch event {
        case .tokenReady(_, let token, let connection):
            // The event first: a reply to the same connection sent before it would hold it back.
            do {
                try host.emit(FetchInterface.Signal.performFetch.rawValue, interface: BgTaskNames.fetch, to: connection) { (signal) throws(ModeError) in
                    try signal.append(token)
                }
            } catch {
                host.log(.warning, "cannot send PerformFetch: \(error)")
            }
            answerSimulation(token)
            // It begins now: a wake that waited (for the machine to wake, for
            // the app to start) is timed from here, not from when it was asked for.
            if let (app, at) = tokens[token], host.realtimeMicroseconds > at &+ 1_000_000 {
                let now = host.realtimeMicroseconds
                setToken(token, (app, now))
                touch(app)
                planner.skipped(app, at: now)
                markUnsaved(app)
            }
        case .tokenExpired(let app, let token):
            answerSimulation(token, failure: "\(app) was launched but never checked in to take its fetch (it exited, or did not call CheckIn within \(wakeBudget) s); see the daemon's log")
            guard let (_, at) = tokens[token] else { return }
            setToken(token, nil)
            host.logWhenCommitted(.notice, "\(app) did not complete its fetch within \(self.wakeBudget) s: offence counted")
            do {
                try record(nil, for: app, at: at)
            } catch {
                host.log(.warning, "cannot store the missed fetch of \(app): \(error); this event is undone")
            }
        case .launchFailed(let app, let token, let reason):
            if let token {
                setToken(token, nil)
                // The host's reason names the app and the command already ("cannot launch …").
                answerSimulation(token, failure: reason.hasPrefix("cannot launch") ? reason : "cannot launch \(app): \(reason)")
            }
            host.log(.warning, "cannot wake \(app) to fetch: \(reason)")
        case .wakeOpportunity(let now):
            // Launched apps still starting: their SimulateFetch says they were launched.
            for (token, simulation) in simulations where simulation.answerBy <= now { answerSimulation(token) }
            wakeDueApps()
        case .appStateChanged(let app, _), .appGone(let app):
            review(app)
        case .appCheckedIn(let app, _, _):
            // An app the user starts checks in in the foreground with no
            // change of state: that is an open the planner learns from.
            review(app)
        case .appsChanged, .refreshChanged:
            declared.clear()
            reviewApps()
        case .sleepChanged(let sleeping, let now):
            // Nothing is fetched while asleep; on waking, apps whose need grew in the night go with the wake.
            // (A fact, not a write: nothing of it is undone if the event's batch fails.)
            planner.setSleeping(sleeping, at: now)
            self.sleeping = sleeping
            // A SimulateFetch waiting for its app to start is answered now (it
            // was launched), not held for the whole sleep past any caller's timeout.
            if sleeping { for token in simulations.keys.sorted() { answerSimulation(token) } }
        case .appWoken(let app, _, let reason):
            // Another mode woke an app: the machine is awake anyway, and apps
            // far enough into their spacing are fetched with it. A push also
            // brings its app up to date (its news needs no fetch), from now:
            // not fetched along with its own push. If it is not taken in, see below.
            let now = host.realtimeMicroseconds
            if reason == Self.pushMode, let before = planner.apps[app].map(\.upToDateAt) {
                touch(app)
                // Bounded: an end that never comes (a batch undone) leaves an entry behind.
                setPushesUnderWay(app, Array((pushesUnderWay[app] ?? []).suffix(31)) + [(at: now, before: before)])
                planner.pushed(app, result: .newData, at: now)
                saveLearning(app)
            } else {
                planner.wokeAnyway(at: now)
            }
            if planner.nextWake().map({ $0 <= now }) == true { wakeDueApps() }
        case .appWakeEnded(let app, let reason, let completed):
            // A push whose app went or overstayed before completing it
            // brought nothing in: the app is as up to date as before it.
            guard reason == Self.pushMode, var underWay = pushesUnderWay[app], !underWay.isEmpty else { return }
            let push = underWay.removeFirst()
            if !completed {
                // A later push under way would restore what this one set.
                for index in underWay.indices where underWay[index].before == push.at { underWay[index].before = push.before }
                if planner.apps[app]?.upToDateAt == push.at {
                    touch(app)
                    planner.pushNotTaken(app, pushedAt: push.at, upToDateBefore: push.before, at: host.realtimeMicroseconds)
                    saveLearning(app)
                }
            }
            setPushesUnderWay(app, underWay.isEmpty ? nil : underWay)
        case .tokenCompleted, .systemBusBack:
            break
        }
        // A wake's delivery writes nothing: its answer to SimulateFetch and
        // its PerformFetch depend on no commit. The wake's bookkeeping is
        // written by the next batch (the outcome's, at the latest).
        if case .tokenReady = event {} else { saveUnsaved() }
        armNextWake()
    }

    // MARK: Scheduling

    /// Wakes the apps the planner picks now (it coalesces those due soon).
    private func wakeDueApps() {
        let due = planner.appsToFetch(at: host.realtimeMicroseconds)
        for app in due {
            if let reason = ineligibility(of: app) {
                host.log(.debug, "not fetching \(app) now: \(reason)")
                review(app)
                continue
            }
            do {
                try wake(app)
            } catch {
                host.log(.warning, "cannot wake \(app) to fetch: \(error)")
                // Back in line at its next interval: the host holds broken launches back.
                touch(app)
                planner.skipped(app, at: host.realtimeMicroseconds)
                do { try save(app) } catch { host.log(.warning, "cannot store the fetch record of \(app): \(error)") }
            }
        }
        if !due.isEmpty { host.log(.info, "fetch wake for \(due.count) app(s): \(due.joined(separator: ", "))") }
    }

    /// Asks the host to wake the app with a fetch token, and notes the fetch.
    /// The note is bookkeeping, not an outcome: it is written once PerformFetch
    /// is out, so the wake does not wait for the disk.
    @discardableResult
    private func wake(_ app: String) throws -> String {
        let now = host.realtimeMicroseconds
        let token = try host.wake(app, reason: "fetch", budget: wakeBudget)
        setToken(token, (app, now))
        // Counts for the interval from now; the outcome comes with CompleteFetch.
        known(app, at: now)
        touch(app)
        planner.skipped(app, at: now)
        markUnsaved(app)
        return token
    }

    /// Writes records whose bookkeeping changed.
    private func saveUnsaved() {
        guard !unsaved.isEmpty else { return }
        let written = unsaved
        // If the batch is undone, these still need writing.
        undo.record { [unowned self] in self.unsaved.formUnion(written) }
        for app in unsaved {
            guard let record = planner.apps[app]?.record else { continue }
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
        if isForeground(app) { return "it is in the foreground" }
        return nil
    }

    private func isForeground(_ app: String) -> Bool { host.appInfo(app)?.isInForeground ?? false }

    /// Tells the planner whether the app may be fetched, and when the user
    /// opened or left it (what it learns habits from).
    private func review(_ app: String) {
        guard planner.apps[app] != nil else { return }
        let now = host.realtimeMicroseconds
        let foreground = isForeground(app)
        if foreground != planner.isOpen(app) {
            touch(app)
            if foreground { planner.opened(app, at: now) } else { planner.closed(app, at: now) }
            saveLearning(app)
        }
        let info = host.appInfo(app)
        let eligible = info.map { $0.modes.contains("fetch") && $0.refreshStatus == "available" } ?? false
        if eligible != planner.apps[app]?.isEligible {
            touch(app)
            planner.setEligible(app, eligible, at: now)
        }
    }

    private func reviewApps() {
        for app in planner.apps.keys { review(app) }
    }

    private func armNextWake() {
        let next = [planner.nextWake(), simulations.values.map(\.answerBy).min()].compactMap { $0 }.min()
        host.scheduleOpportunity(at: next ?? 0)
    }

    /// Tells the planner the UTC offset now, before anything else it is told
    /// (read again a minute after it was last read): it changes when daylight
    /// saving time begins or ends, or the zone changes. (A fact, not a write:
    /// a failed batch leaves it.)
    private func followLocalTime() {
        let now = host.monotonicMicroseconds
        if let offsetReadAt, now &- offsetReadAt < 60_000_000 { return }
        offsetReadAt = now
        planner.setUTCOffset(Self.localUTCOffset(), at: host.realtimeMicroseconds)
    }

    /// Seconds east of UTC of the local time zone now (what habits are learned in).
    private static func localUTCOffset() -> Int {
        // glibc reads the zone once; tzset reads it again if /etc/localtime
        // changed (with TZ unset, as on desktops), so a new zone is seen too.
        tzset()
        var now = time(nil)
        var parts = tm()
        guard localtime_r(&now, &parts) != nil else { return 0 }
        return parts.tm_gmtoff
    }

    // MARK: Records

    /// A fetch wake's outcome (nil: unanswered), at the time of the wake.
    private func record(_ result: FetchResult?, for app: String, at: UInt64) throws {
        known(app, at: at)
        touch(app)
        planner.fetched(app, result: result, at: at)
        try save(app)
        saveLearning(app)
    }

    /// An app woken without an interval (SimulateFetch) gets a record
    /// (interval never), so that its outcomes and offences are kept.
    private func known(_ app: String, at now: UInt64) {
        if planner.apps[app] == nil {
            touch(app)
            planner.register(app, interval: .never, at: now)
            review(app)
        }
    }

    /// Writes the app's record (on disk when this returns).
    private func save(_ app: String) throws {
        guard let record = planner.apps[app]?.record else { return }
        try host.put(record.storageBytes(), collection: "apps", key: app)
    }

    /// Writes what the planner learned about the app; a failure only costs learning.
    private func saveLearning(_ app: String) {
        guard let learned = planner.learning(of: app) else { return }
        do {
            try host.put(learned.storageBytes(), collection: "learning", key: app)
        } catch {
            host.log(.warning, "cannot store what was learned about \(app): \(error)")
        }
    }

    // MARK: bgtaskctl apps

    func describe(app: String, into description: inout [String: PluginValue]) {
        guard let record = planner.apps[app]?.record else { return }
        typealias Key = FetchInterface.ApplicationKey
        description[Key.policy.rawValue] = .string(record.interval.policy.rawValue)
        if let interval = planner.effectiveInterval(of: app) { description[Key.interval.rawValue] = .double(interval) }
        let plan = planner.plan(for: app, at: host.realtimeMicroseconds)
        if let next = plan?.next { description[Key.nextUsec.rawValue] = .uint(next) }
        if let plan, !plan.reasons.isEmpty { description[Key.plan.rawValue] = .string(plan.explanation) }
        if let held = ineligibility(of: app), plan?.next == nil { description[Key.held.rawValue] = .string(held) }
        if let last = record.history.last {
            // A wake the app did not answer in time shows as such, not as its earlier answer.
            description[Key.lastResult.rawValue] = .string(last.result?.rawValue ?? FetchInterface.missedResult)
            // When that fetch's wake began: not a wake still under way, whose result is not in yet.
            description[Key.lastUsec.rawValue] = .uint(last.at)
        }
        description[Key.offences.rawValue] = .uint(UInt64(record.offences))
    }
}
