import BgTaskPushCore
import BgTaskPluginKit
import BgTaskProtocol
import Foundation

// Implementation notes
//
// DeliverPush validates, decides with the app's PushInbox (BgTaskCore), and
// writes the push to the daemon's database before it replies: an
// acknowledged push survives a crash. The host commits all the writes of one
// call (the push, held pushes made due) at once and only then sends the
// reply and any NotificationReceived the call set off. Each push record
// carries its app's bucket and counters, versioned, so DeliverPush writes one
// record; the `apps` record is written when no push is (a completion, a
// drop), and at start-up the highest version of an app's state wins. A push to deliver gets a wake of its
// own (one token per push, so each is completed on its own); the host
// launches the app if it is not running, once however many pushes wait, and
// hands each token back when the app can take it, and the plugin sends
// NotificationReceived. Held pushes ride along with any wake of the app: one
// of its own, another mode's (APP_WOKEN), or a check-in (the user opened it).
//
// A push is removed when its app completes it and never before; a push whose
// wake expired, failed, or died with the daemon goes back to wait. So a push
// is delivered until it is completed, and completed exactly once. After a
// restart, pushes that were on their way wait a few seconds for running apps
// to check in again, then wake their apps.
//
// Alerts are shown with org.freedesktop.Notifications.Notify, with the app's
// name and icon from its desktop entry, when that service exists; otherwise
// they are logged.
//
// UnifiedPushBridge makes bgtaskd a UnifiedPush connector for the apps; its
// messages come in through admit(), as DeliverPush's do.

/// The `remote-notification` mode: pushes that wake apps, durable, rate-limited, piggybacked.
final class RemoteNotificationsMode: ModePlugin {
    static let name = "remote-notification"
    static let wakesNeedRefresh = true
    static let version = "1.0.0"

    static let wakeBudgetKey = ConfigKey.wakeBudget(
        "RemoteNotifications.WakeBudgetSec", default: 30, "time to call CompleteNotification")
    static let silentPerHourKey = ConfigKey.integer(
        "RemoteNotifications.SilentPerHour", default: 3, minimum: 0, maximum: 1_000_000, "silent pushes woken per app per hour")
    // A D-Bus message carries at most 128 MiB; a push is far smaller.
    static let maxPayloadBytesKey = ConfigKey.integer(
        "RemoteNotifications.MaxPayloadBytes", default: 4096, minimum: 1, maximum: 16 << 20, "push payload limit in bytes")
    static let configKeys = [wakeBudgetKey, silentPerHourKey, maxPayloadBytesKey]
    static let errorNames: [ModeError.Code] = [
        .notPermitted, .unknownApplication, .modeNotDeclared, .payloadTooLarge, .noSuchToken,
    ]

    private let host: PluginHost
    private let wakeBudget: Double
    private let silentPerHour: Double
    private let maxPayloadBytes: Int
    private var inboxes: [String: PushInbox] = [:]
    /// Whether the machine sleeps: a push with expiration 0 cannot reach its app now.
    private var sleeping = false
    /// Tokens of pushes on their way: token → (app, push id).
    private var tokens: [String: (app: String, push: String)] = [:]
    /// Push ids on their way, to tell which due pushes have no wake yet.
    private var inFlight: Set<String> = []
    /// Apps with an alert held because their refresh status was not
    /// `available`: woken when it is again. Not stored: at start, an app
    /// whose refresh is off and that holds an alert is one.
    private var heldForRefresh: Set<String> = []
    /// Apps with an alert held because launching them failed: tried again
    /// when the desktop entries change (the app may be launchable now), not
    /// left for some later wake. Not stored: a restart tries every app anew.
    private var heldForLaunch: Set<String> = []
    /// Pushes ``deliverWithHeld(_:)`` made due and has not stored so yet:
    /// if no wake can be had they go back to held as they are stored, with
    /// no write (an app that cannot be launched had every held push written
    /// twice for each new alert).
    private var takenUnstored: Set<String> = []
    /// Apps holding an alert from before the start whose refresh read
    /// `available` then: at the first change of refresh (the daemon's first
    /// read of the power state), those it restricts join ``heldForRefresh``.
    private var heldBeforeStart: Set<String> = []
    /// Apps whose last wake was refused, and logged so: the same refusal of
    /// every push after it is logged at debug, until a wake works again (a
    /// sender of thousands of pushes to an app held back from launching
    /// wrote a warning for each).
    private var wakeRefused: Set<String> = []
    /// Which missed wakes count: one offence per wake budget, not one per push.
    private var offences: OffenceWindow
    private var lastSequence: UInt64 = 0
    /// The version of the last app state written (see ``PushAppState/version``).
    private var stateVersion: UInt64 = 0
    /// Until when pushes left due by the previous run wait for their apps to check in again.
    private var redeliverAfter: UInt64 = 0
    /// No later than the earliest expiration (Unix seconds) of any held push; 0: none.
    /// Lowered as pushes are held, computed exactly only when the timer fires (see ``armTimer()``).
    private var expirationBound: UInt64 = 0
    /// What the opportunity timer was last armed for (realtime µs; 0: disarmed; nil: unknown, arm it again).
    private var armedAt: UInt64?
    /// What the host said of each app's desktop entry and refresh status
    /// (asking costs a fifth of a DeliverPush).
    private var appInfos = AppInfoCache()
    /// bgtaskd as a UnifiedPush connector for the apps (set in start()).
    private var bridge: UnifiedPushBridge?
    /// Each checked-in app's connections, latest last, for EndpointChanged:
    /// all of them, as the host tells only when the last one goes (an app
    /// with two instances lost EndpointChanged when the later one quit).
    private var connections: [String: [String]] = [:]

    /// Connections kept per app; older ones are most likely gone.
    static let maximumConnectionsPerApp = 8

    /// How long pushes due before a restart wait for their apps to check in again.
    static let restartGrace: UInt64 = 5_000_000

    /// Pushes of one app woken for at once; the rest wait due, and go as
    /// those are completed. Each push is a wake with its own budget: an app
    /// that checked in with ten thousand held was handed ten thousand wakes
    /// in one batch, which stalled the daemon for seconds, and their budgets
    /// ran out meanwhile, each counted as an offence.
    static let maximumInFlightPerApp = 16

    /// The counters a batch may change, as they were when it began (see ``rollBack()``).
    private struct Counters {
        var lastSequence: UInt64
        var stateVersion: UInt64
        var redeliverAfter: UInt64
        var expirationBound: UInt64
    }
    private var counters: Counters?
    /// How to undo what the current batch changed in inboxes, tokens and
    /// pushes on their way: one app's inbox at a time, never all of them.
    private var undo = UndoLog()
    /// Apps whose inbox the current batch saved for undo already.
    private var touched: Set<String> = []

    init(host: PluginHost) throws {
        self.host = host
        wakeBudget = host.value(of: Self.wakeBudgetKey)
        offences = OffenceWindow(wakeBudget: wakeBudget)
        silentPerHour = Double(host.integer(of: Self.silentPerHourKey))
        maxPayloadBytes = host.integer(of: Self.maxPayloadBytesKey)
    }

    func start() throws {
        try host.export(PluginInterface(name: BgTaskNames.remoteNotifications, members: [
            .method(RemoteNotificationsInterface.Method.deliverPush.rawValue, in: [("app_id", "s"), ("payload_json", "s"), ("options", "a{sv}")], out: [("push_id", "s")]),
            .method(RemoteNotificationsInterface.Method.completeNotification.rawValue, in: [("token", "s"), ("result", "s")]),
            .method(RemoteNotificationsInterface.Method.listPushes.rawValue, in: [("app_id", "s")], out: [("pushes", "aa{sv}")]),
            .method(RemoteNotificationsInterface.Method.getEndpoint.rawValue, in: [("app_id", "s")], out: [("endpoint", "s")]),
            .signal(RemoteNotificationsInterface.Signal.notificationReceived.rawValue, [("token", "s"), ("payload_json", "s")]),
            .signal(RemoteNotificationsInterface.Signal.endpointChanged.rawValue, [("endpoint", "s")]),
        ]))
        let decoder = JSONDecoder()
        // Each app's state is in its `apps` record and beside each of its pushes: the highest version wins.
        var states: [String: PushAppState] = [:]
        func consider(_ state: PushAppState, of app: String) {
            stateVersion = max(stateVersion, state.version ?? 0)
            if let known = states[app], (known.version ?? 0) >= (state.version ?? 0) { return }
            states[app] = state
        }
        for (app, data) in try host.records(collection: "apps") {
            do {
                consider(try decoder.decode(PushAppState.self, from: Data(data)), of: app)
            } catch {
                host.log(.warning, "ignoring the unreadable push state of \(app): \(error)")
            }
        }
        var pushes: [PushRecord] = []
        for (key, data) in try host.records(collection: "pushes") {
            let stored: StoredPush
            do {
                stored = try decoder.decode(StoredPush.self, from: Data(data))
            } catch {
                host.log(.warning, "ignoring the unreadable push record \(key): \(error)")
                continue
            }
            if let state = stored.appState { consider(state, of: stored.push.app) }
            // Stored by a bgtaskd that let such text in: it could never be sent, and would cost its app a wake each time.
            if let scalar = DBusText.unsendable(in: stored.push.payload) {
                host.log(.warning, "dropping push \(key) of \(stored.push.app): its payload holds \(DBusText.name(scalar)), which D-Bus cannot carry")
                try host.delete(collection: "pushes", key: key)
                continue
            }
            pushes.append(stored.push)
        }
        for (app, var state) in states {
            state.bucket.capacity = silentPerHour
            var inbox = PushInbox(bucket: state.bucket)
            inbox.counts = state.counts
            inboxes[app] = inbox
        }
        var waiting = 0
        for push in pushes {
            var box = inbox(push.app)
            box.restore(push)
            inboxes[push.app] = box
            lastSequence = StoredSequence.last(lastSequence, push.sequence)
            waiting += 1
        }
        expirationBound = exactExpirationBound()
        for (app, box) in inboxes where box.pushes.contains(where: { $0.state == .held && $0.hasAlert }) {
            if let info = appInfo(app), info.refreshStatus != "available" {
                heldForRefresh.insert(app)
            } else {
                // Power saver or a low battery is known only once the daemon has read it, after this.
                heldBeforeStart.insert(app)
            }
        }
        if waiting > 0 {
            redeliverAfter = host.realtimeMicroseconds + Self.restartGrace
            host.log(.info, "\(waiting) pushes from before the restart wait for their apps")
        }
        armTimer()
        let bridge = UnifiedPushBridge(host: host, maximumPayloadBytes: maxPayloadBytes) { [unowned self] (app, payload, acknowledge) in
            try self.admit(app: app, payload: payload, options: try PushOptions([:]), acknowledge: acknowledge)
        }
        // What a call changed in the bridge is undone with the rest of its batch.
        bridge.recordUndo = { [unowned self] action in self.undo.record(action) }
        bridge.endpointChanged = { [unowned self] app, endpoint in
            for connection in self.connections[app] ?? [] {
                do {
                    try self.host.emit(RemoteNotificationsInterface.Signal.endpointChanged.rawValue, interface: BgTaskNames.remoteNotifications,
                                       to: connection) { (signal) throws(ModeError) in try signal.append(endpoint ?? "") }
                } catch {
                    self.host.log(.warning, "cannot send EndpointChanged to \(app): \(error)")
                }
            }
        }
        try bridge.start()
        self.bridge = bridge
    }

    // MARK: Batches

    func checkpoint() {
        undo.clear()
        touched.removeAll(keepingCapacity: true)
        counters = Counters(
            lastSequence: lastSequence, stateVersion: stateVersion, redeliverAfter: redeliverAfter,
            expirationBound: expirationBound)
    }

    /// The notes for a rollback go once the batch has landed and its messages are out.
    func committed() {
        undo.clear()
    }

    /// A batch's writes were rolled back (a full disk): a push it accepted is
    /// forgotten, one it completed or dropped is back, and the counters are as they were.
    func rollBack() {
        undo.undoAll()
        touched.removeAll(keepingCapacity: true)
        if let saved = counters {
            lastSequence = saved.lastSequence
            stateVersion = saved.stateVersion
            redeliverAfter = saved.redeliverAfter
            expirationBound = saved.expirationBound
        }
        armedAt = nil
        armTimer()
    }

    /// The app's inbox is about to change: save it once per batch.
    private func touch(_ app: String) {
        guard touched.insert(app).inserted else { return }
        let saved = inboxes[app]
        undo.record { [unowned self] in self.inboxes[app] = saved }
    }

    private func setToken(_ token: String, _ value: (app: String, push: String)?) {
        undo.set(token, to: value, in: &tokens) { [unowned self] in $0(&self.tokens) }
    }

    private func setInFlight(_ id: String, _ delivering: Bool) {
        undo.set(id, contained: delivering, in: &inFlight) { [unowned self] in $0(&self.inFlight) }
    }

    /// The app's inbox, or a new one with a full bucket.
    private func inbox(_ app: String) -> PushInbox {
        inboxes[app] ?? PushInbox(bucket: TokenBucket(capacity: silentPerHour, now: host.realtimeMicroseconds))
    }

    // MARK: Calls

    func handle(_ call: PluginCall) throws {
        if try bridge?.handle(call) == true { return }
        switch RemoteNotificationsInterface.Method(rawValue: call.member) {
        case .deliverPush: try deliverPush(call)
        case .completeNotification: try completeNotification(call)
        case .listPushes: try listPushes(call)
        case .getEndpoint: try getEndpoint(call)
        case nil: throw ModeError.failed("unknown method \(call.member)")
        }
    }

    /// `GetEndpoint(s app_id)`: "" asks for the caller's own app; another
    /// app's endpoint is told only to trusted callers.
    private func getEndpoint(_ call: PluginCall) throws {
        let asked = try call.arguments.readString()
        let app: String
        if asked.isEmpty || asked == call.caller.appID {
            guard let own = call.caller.appID else {
                throw ModeError(.notPermitted, "only a checked-in app may ask for its own push endpoint; name an app id as a trusted caller")
            }
            app = own
        } else {
            guard call.caller.isTrusted else {
                throw ModeError(.notPermitted, "only trusted callers may read another app's push endpoint")
            }
            if let problem = DesktopFileID.problem(with: asked) {
                throw ModeError.invalidArgs("'\(asked.prefix(300))' is not a valid desktop-file id: \(problem)")
            }
            app = asked
        }
        try call.reply { (reply) throws(ModeError) in try reply.append(bridge?.registrations[app]?.endpoint ?? "") }
    }

    private func deliverPush(_ call: PluginCall) throws {
        // Before reading anything: an untrusted caller learns nothing and costs nothing.
        guard call.caller.isTrusted else {
            throw ModeError(.notPermitted, "only trusted callers may deliver pushes")
        }
        let arguments = call.arguments
        let app = try arguments.readString()
        let json = try arguments.readString()
        let options = try PushOptions(try arguments.readTypedOptions())
        try admit(app: app, json: json, options: options, maximumBytes: maxPayloadBytes) { (id) throws(ModeError) in
            try call.reply { (reply) throws(ModeError) in try reply.append(id) }
        }
    }

    /// Takes a push for `app` in: checks it, stores it (a call's writes are
    /// committed before its reply), calls `acknowledge` with its id, and
    /// delivers it or holds it. DeliverPush and the UnifiedPush bridge both
    /// come through here.
    func admit(app: String, json: String, options: PushOptions, maximumBytes: Int,
               acknowledge: (String) throws(ModeError) -> Void) throws {
        // The id is judged before the payload, as the arguments come.
        try checkAppID(app)
        try admit(app: app, payload: try PushPayload(json: json, maximumBytes: maximumBytes), options: options, acknowledge: acknowledge)
    }

    private func checkAppID(_ app: String) throws {
        if let problem = DesktopFileID.problem(with: app) {
            throw ModeError.invalidArgs("'\(app.prefix(300))' is not a valid desktop-file id: \(problem)")
        }
    }

    /// ``admit(app:json:options:maximumBytes:acknowledge:)`` with the payload checked
    /// already: the UnifiedPush bridge checks it to choose whether to wrap it.
    func admit(app: String, payload: PushPayload, options: PushOptions, acknowledge: (String) throws(ModeError) -> Void) throws {
        try checkAppID(app)
        let json = payload.json
        guard let info = appInfo(app) else {
            throw ModeError(.unknownApplication, "\(app) has no desktop entry")
        }
        guard info.modes.contains(Self.name) else {
            throw ModeError(.modeNotDeclared, "\(app) does not declare the remote-notification mode (X-BgTaskd-Modes)")
        }

        let now = host.realtimeMicroseconds
        lastSequence += 1
        var push = PushRecord(
            id: "p\(String(now, radix: 16))-\(lastSequence)", app: app, payload: json,
            priority: options.priority ?? (payload.alert != nil ? 10 : 5), expiration: options.expiration,
            collapseID: options.collapseID, receivedAt: now, sequence: lastSequence,
            hasAlert: payload.alert != nil, isSilent: payload.isSilent, state: .held)
        // Taken out of the dictionary while it changes, so that its pushes are not copied on append.
        touch(app)
        var box = inboxes.removeValue(forKey: app) ?? inbox(app)
        // Refresh governs background wakes only: an app in the foreground gets its pushes, as on iOS.
        let inForeground = isInForeground(app)
        let canWake = info.refreshStatus == "available" || inForeground
        let inFlight = inFlight
        let (admission, removed) = box.admit(&push, canWake: canWake, inForeground: inForeground, isAsleep: sleeping, now: now) {
            inFlight.contains($0.id)
        }
        if !canWake && push.hasAlert && push.state == .held { heldForRefresh.insert(app) }
        inboxes[app] = box
        for (old, reason) in removed {
            try host.delete(collection: "pushes", key: old.id)
            host.logWhenCommitted(.info, "dropped push \(old.id) for \(app): \(reason)")
        }
        if case .drop(let reason) = admission {
            host.logWhenCommitted(.info, "dropped push \(push.id) for \(app): \(reason)")
        } else {
            try store(push)
            if push.state == .held { lowerExpirationBound(push.expiration) }
        }
        // A stored push carries its app's state; otherwise the state is saved on its own.
        if case .drop = admission { try saveState(app) }
        try acknowledge(push.id)

        // Shown once the push is stored: a StorageFailed reply must not have shown it (a sender
        // retries); and not at all when it expired before it came.
        if let alert = payload.alert, !push.isExpired(at: now) {
            host.whenCommitted { [weak self] in self?.show(alert, of: app, info: info) }
        }
        // A wake of its own carries whatever waits, as any other wake does.
        if admission == .deliverNow { deliverWithHeld(app) }
        armTimer()
    }

    private func completeNotification(_ call: PluginCall) throws {
        let arguments = call.arguments
        let token = try arguments.readString()
        let resultText = try arguments.readString()
        let result: FetchResult
        do { result = try FetchResult(parsing: resultText, of: "notification") } catch { throw ModeError.invalidArgs(error.message) }
        try host.complete(token: token, connection: call.caller.connection)
        if let (app, id) = tokens[token] {
            setToken(token, nil)
            setInFlight(id, false)
            touch(app)
            if inboxes[app]?.complete(id) != nil {
                try host.delete(collection: "pushes", key: id)
                try saveState(app)
            }
            host.logWhenCommitted(.debug, "\(app) completed push \(id): \(result.rawValue)")
            // Room for the next push waiting its turn.
            deliverDue(app)
        }
        try call.reply()
        armTimer()
    }

    private func listPushes(_ call: PluginCall) throws {
        let app = try call.arguments.readString()
        guard call.caller.isTrusted else {
            throw ModeError(.notPermitted, "only trusted callers may list pushes")
        }
        // A mistyped id listed nothing, as if the app had no pushes.
        if !app.isEmpty { try checkAppID(app) }
        let pushes = inboxes.filter { app.isEmpty || $0.key == app }.sorted { $0.key < $1.key }.flatMap(\.value.pushes)
        try call.reply { (reply) throws(ModeError) in
            try reply.container("a", "a{sv}") { () throws(ModeError) in
                for push in pushes {
                    typealias Key = RemoteNotificationsInterface.PushKey
                    var fields: [String: PluginValue] = [
                        Key.pushID.rawValue: .string(push.id), Key.appID.rawValue: .string(push.app),
                        Key.payloadJSON.rawValue: .string(push.payload), Key.priority.rawValue: .uint(UInt64(push.priority)),
                        Key.receivedUsec.rawValue: .uint(push.receivedAt),
                        Key.state.rawValue: .string((inFlight.contains(push.id) ? .delivering : push.state.wireState).rawValue),
                        Key.alert.rawValue: .bool(push.hasAlert), Key.silent.rawValue: .bool(push.isSilent),
                    ]
                    if let expiration = push.expiration { fields[Key.expiration.rawValue] = .uint(expiration) }
                    if let collapse = push.collapseID { fields[Key.collapseID.rawValue] = .string(collapse) }
                    try reply.append(dictionary: fields)
                }
            }
        }
    }

    // MARK: Events

    func handle(_ event: PluginEvent) {
        switch event {
        case .tokenReady(let app, let token, let connection):
            guard let (_, id) = tokens[token], let push = inboxes[app]?.pushes.first(where: { $0.id == id }) else { return }
            if dropStale(app, id, token: token, connection: connection) { return }
            // The wake came: a token of the silent budget it spent stays spent.
            if inboxes[app]?.spentOnWake(id) == true {
                touch(app)
                inboxes[app]?.wakeCame(id)
            }
            do {
                try host.emit(RemoteNotificationsInterface.Signal.notificationReceived.rawValue, interface: BgTaskNames.remoteNotifications, to: connection) {
                    (signal) throws(ModeError) in
                    try signal.append(token)
                    try signal.append(push.payload)
                }
            } catch {
                host.log(.warning, "cannot send NotificationReceived: \(error)")
            }
        case .tokenExpired(let app, let token):
            guard let (_, id) = tokens[token] else { return }
            setToken(token, nil)
            setInFlight(id, false)
            touch(app)
            let counted = offences.counts(app, at: host.realtimeMicroseconds, undo: &undo) { [unowned self] in $0(&self.offences) }
            if counted { inboxes[app]?.counts.offences += 1 }
            let nowOrNever = inboxes[app]?.pushes.first(where: { $0.id == id })?.expiration == 0
            putBack(app, id)
            // Those waiting their turn behind it wait for the next wake too.
            holdWaiting(app)
            let fate = nowOrNever ? "it had expiration 0 (now or never) and goes" : "it waits for the next wake"
            let offence = counted ? "offence counted" : "one offence counted already for the pushes it missed with it"
            host.logWhenCommitted(.notice, "\(app) did not complete push \(id) within \(self.wakeBudget) s: \(offence); \(fate)")
        case .launchFailed(let app, let token, let reason):
            if let token, let (_, id) = tokens[token] {
                setToken(token, nil)
                setInFlight(id, false)
                putBack(app, id, wakeFailed: true)
                // A wake withdrawn as refresh went (it waited for a sleep to end, or for
                // its turn): its alert goes once refresh is back, as one held on arrival.
                if inboxes[app]?.pushes.contains(where: { $0.id == id && $0.hasAlert }) == true {
                    if let status = host.appInfo(app)?.refreshStatus, status != "available" {
                        heldForRefresh.insert(app)
                    } else {
                        undo.set(app, contained: true, in: &heldForLaunch) { [unowned self] in $0(&self.heldForLaunch) }
                    }
                }
            }
            holdWaiting(app, wakeFailed: true)
            // Another instance still runs (the one the push was handed to
            // went): it takes what waits now, as at a CheckIn, which a running
            // instance never makes again. Else the next instance's CheckIn does.
            appInfos.forget(app)
            if let info = appInfo(app), info.hasRunningInstance, token != nil {
                host.log(.notice, "a push wake of \(app) failed: \(reason); what waits goes to its running instance")
                if info.refreshStatus == "available" || info.isInForeground { deliverWithHeld(app) } else { deliverDue(app) }
            } else {
                host.log(.warning, "a push wake of \(app) failed: \(reason)")
            }
        case .appCheckedIn(let app, let connection, _), .appWoken(let app, let connection, _):
            appInfos.forget(app)
            // Any wake carries what waits: held pushes, and pushes left due by a restart.
            var known = connections[app, default: []].filter { $0 != connection }
            known.append(connection)
            connections[app] = Array(known.suffix(Self.maximumConnectionsPerApp))
            // With refresh off, only an app in the foreground takes what was
            // held: one checking in again in the background (its SDK does when
            // the daemon restarts) is no open by the user.
            if appInfo(app).map({ $0.refreshStatus == "available" || $0.isInForeground }) ?? true {
                deliverWithHeld(app)
            } else {
                deliverDue(app)
            }
        case .wakeOpportunity(let now):
            dropExpired(at: now)
            expirationBound = exactExpirationBound()
            // The timer may be what fired (it is one-shot): arm it again whatever it was.
            armedAt = nil
            if now >= redeliverAfter, redeliverAfter > 0 {
                redeliverAfter = 0
                for app in inboxes.keys { deliverDue(app) }
            }
        case .appsChanged, .refreshChanged:
            appInfos.clear()
            bridge?.registerApps()
            if case .refreshChanged = event, !heldBeforeStart.isEmpty {
                for app in heldBeforeStart where appInfo(app).map({ $0.refreshStatus != "available" }) == true { heldForRefresh.insert(app) }
                heldBeforeStart = []
            }
            // An alert held because refresh was off goes once it is on again,
            // not at some later wake; silent ones ride along. (Alerts held for
            // another reason, an overstayed wake or a failed launch, wait.)
            for app in heldForRefresh.sorted() where appInfo(app)?.refreshStatus == "available" {
                heldForRefresh.remove(app)
                if inboxes[app]?.pushes.contains(where: { $0.state == .held && $0.hasAlert }) == true { deliverWithHeld(app) }
            }
            // An alert held as its app could not be launched goes once the app's
            // entry changed (fixed, reinstalled); failing again, it waits again.
            if case .appsChanged = event {
                // Also those whose wake was refused outright (a launch held back after it failed).
                for app in heldForLaunch.union(wakeRefused).sorted() {
                    let info = appInfo(app)
                    // Uninstalled: nothing to try until it is back (its check-in then carries them).
                    guard info == nil || info?.refreshStatus == "available" else { continue }
                    undo.set(app, contained: false, in: &heldForLaunch) { [unowned self] in $0(&self.heldForLaunch) }
                    if info != nil, inboxes[app]?.pushes.contains(where: { $0.state == .held && $0.hasAlert }) == true { deliverWithHeld(app) }
                }
            }
        case .appStateChanged(let app, let state):
            appInfos.forget(app)
            // The user opening it is a wake too: what was held goes to it.
            let foreground = ApplicationState.isForeground(state)
            if foreground, inboxes[app]?.pushes.contains(where: { $0.state == .held }) == true { deliverWithHeld(app) }
        case .appGone(let app):
            appInfos.forget(app)
            connections[app] = nil
        case .sleepChanged(let asleep, _):
            sleeping = asleep
        case .tokenCompleted, .systemBusBack, .appWakeEnded:
            break
        }
        armTimer()
    }

    /// The app's desktop-entry facts and refresh status; nil for an unknown app.
    private func appInfo(_ app: String) -> AppInfo? { appInfos.info(of: app, from: host) }

    // MARK: Delivery

    /// Makes every held push of the app due, then delivers everything due.
    private func deliverWithHeld(_ app: String) {
        guard inboxes[app]?.pushes.isEmpty == false else { return }
        touch(app)
        guard var box = inboxes.removeValue(forKey: app) else { return }
        let taken = box.takeHeld()
        inboxes[app] = box
        let takenIDs = Set(taken.map(\.id))
        takenUnstored = takenIDs
        deliverDue(app)
        takenUnstored = []
        // Stored as due only those that stay due (on their way, or waiting their turn among the sixteen).
        guard !takenIDs.isEmpty, let box = inboxes[app] else { return }
        for push in box.pushes where push.state == .due && takenIDs.contains(push.id) {
            persist("store push \(push.id)") { try store(push) }
        }
    }

    /// Whether the app is in the foreground (`active` or `inactive`). From the
    /// cache, which forgets an app whenever it checks in, changes its state
    /// or goes: asking the host for every push was a fifth of its cost.
    private func isInForeground(_ app: String) -> Bool { appInfo(app)?.isInForeground ?? false }

    /// Wakes the app once per due push that has no wake yet, oldest first,
    /// up to ``maximumInFlightPerApp`` at once.
    private func deliverDue(_ app: String) {
        guard let box = inboxes[app] else { return }
        let due = box.due
        var flying = due.count { inFlight.contains($0.id) }
        for push in due where !inFlight.contains(push.id) {
            guard flying < Self.maximumInFlightPerApp else { return }
            do {
                let token = try host.wake(app, reason: Self.name, budget: wakeBudget)
                wakeRefused.remove(app)
                setToken(token, (app, push.id))
                setInFlight(push.id, true)
                flying += 1
            } catch {
                let level: PluginHost.LogLevel = wakeRefused.insert(app).inserted ? .warning : .debug
                host.log(level, "cannot wake \(app) for push \(push.id): \(error.message); it waits for the next wake")
                // All of them, not only this one: none would be woken for otherwise.
                holdWaiting(app, wakeFailed: true)
                return
            }
        }
    }

    /// Due pushes of `app` with no wake go back to wait for the next one.
    /// `wakeFailed`: the app could not be woken, so the silent budget gets
    /// back what they spent (it counts wakes); not when it overstayed one.
    private func holdWaiting(_ app: String, wakeFailed: Bool = false) {
        guard inboxes[app]?.pushes.contains(where: { $0.state == .due && !inFlight.contains($0.id) }) == true else { return }
        touch(app)
        guard var box = inboxes.removeValue(forKey: app) else { return }
        let held = box.holdDue(refundAt: wakeFailed ? host.realtimeMicroseconds : nil) { !inFlight.contains($0.id) }
        inboxes[app] = box
        for push in held {
            if !takenUnstored.contains(push.id) { persist("store push \(push.id)") { try store(push) } }
            lowerExpirationBound(push.expiration)
        }
        dropNowOrNever(app)
        persist("store the state of \(app)") { try saveState(app) }
    }

    /// A push whose wake came after it expired, or after a newer push with
    /// its collapse id came, goes instead of reaching the app (it waited for
    /// the machine to wake, the app to start, or the daemon to restart).
    /// Its wake is completed once that is stored, as if the app had handled
    /// it: the app is not at fault. Returns whether it went.
    private func dropStale(_ app: String, _ id: String, token: String, connection: String) -> Bool {
        touch(app)
        guard let reason = inboxes[app]?.dropStale(id, at: host.realtimeMicroseconds) else { return false }
        setToken(token, nil)
        setInFlight(id, false)
        persist("delete push \(id)") { try host.delete(collection: "pushes", key: id) }
        persist("store the state of \(app)") { try saveState(app) }
        host.logWhenCommitted(.info, "dropped push \(id) for \(app): \(reason)")
        host.whenCommitted { [weak self] in try? self?.host.complete(token: token, connection: connection) }
        // Room for the next push waiting its turn.
        deliverDue(app)
        return true
    }

    /// Pushes with expiration 0 whose wake did not happen go, as their sender asked.
    private func dropNowOrNever(_ app: String) {
        guard let dropped = inboxes[app]?.dropNowOrNever() else { return }
        for push in dropped {
            persist("delete push \(push.id)") { try host.delete(collection: "pushes", key: push.id) }
            host.logWhenCommitted(.info, "dropped push \(push.id) for \(app): it had expiration 0 (now or never) and its wake did not happen")
        }
    }

    /// A push whose wake did not happen waits for the next one (`wakeFailed` as in ``holdWaiting(_:wakeFailed:)``).
    private func putBack(_ app: String, _ id: String, wakeFailed: Bool = false) {
        touch(app)
        inboxes[app]?.hold(id, refundAt: wakeFailed ? host.realtimeMicroseconds : nil)
        // One with expiration 0 goes below: not stored first.
        if let push = inboxes[app]?.pushes.first(where: { $0.id == id }), push.expiration != 0 {
            persist("store push \(push.id)") { try store(push) }
            lowerExpirationBound(push.expiration)
        }
        dropNowOrNever(app)
        persist("store the state of \(app)") { try saveState(app) }
    }

    private func dropExpired(at now: UInt64) {
        for app in inboxes.keys {
            // Only inboxes with something expired are touched (and saved for undo).
            guard let earliest = inboxes[app]?.earliestExpiration, now / 1_000_000 >= earliest else { continue }
            touch(app)
            guard let expired = inboxes[app]?.dropExpired(at: now), !expired.isEmpty else { continue }
            for push in expired {
                persist("delete push \(push.id)") { try host.delete(collection: "pushes", key: push.id) }
                host.logWhenCommitted(.info, "dropped push \(push.id) for \(app): it expired")
            }
            persist("store the state of \(app)") { try saveState(app) }
        }
    }

    /// Wakes the plugin when the first held push expires, or when pushes from before a restart are due.
    ///
    /// Called after every call and event, so it must not scan the held pushes:
    /// at thousands of pushes a second to apps holding hundreds each, a scan
    /// per `DeliverPush` was most of the daemon's time. It uses
    /// `expirationBound` instead, which is never later than the first
    /// expiration: a bound left early by a push that was delivered or
    /// completed since only costs one wake that drops nothing and computes
    /// the bound exactly again.
    private func armTimer() {
        var next: UInt64 = redeliverAfter
        // An expiration comes from a remote sender: one beyond what µs can
        // hold is as good as none, and must not trap (it would at every start).
        let (at, overflow) = expirationBound.multipliedReportingOverflow(by: 1_000_000)
        if expirationBound > 0, !overflow {
            next = next == 0 ? at : min(next, at)
        }
        guard next != armedAt else { return }
        armedAt = next
        host.scheduleOpportunity(at: next)
    }

    /// A push with this expiration is held now: the timer must fire by then.
    private func lowerExpirationBound(_ expiration: UInt64?) {
        guard let expiration, expiration > 0 else { return }
        expirationBound = expirationBound == 0 ? expiration : min(expirationBound, expiration)
    }

    /// The earliest expiration of any held push (0: none), by one pass over them all.
    private func exactExpirationBound() -> UInt64 {
        inboxes.values.compactMap(\.earliestExpiration).min() ?? 0
    }

    // MARK: Alerts

    private func show(_ alert: PushPayload.Alert, of app: String, info: AppInfo) {
        let name = info.name ?? app
        let summary = alert.title ?? name
        let body = alert.body ?? ""
        do {
            try host.call("org.freedesktop.Notifications", path: "/org/freedesktop/Notifications",
                          interface: "org.freedesktop.Notifications", member: "Notify", timeout: 10) { (call) throws(ModeError) in
                try call.append(name)
                try call.append(UInt32(0))
                try call.append(info.icon ?? "")
                try call.append(summary)
                try call.append(body)
                try call.container("a", "s") { () throws(ModeError) in }
                try call.append(dictionary: ["desktop-entry": .string(app)])
                try call.append(Int32(-1))
            } reply: { [host] result in
                switch result {
                case .success: host.log(.debug, "alert of \(app) shown: \(summary)")
                case .failure(let error):
                    // Absent, slow, or there and failing (it crashed mid-call, it refused): the log says which.
                    let name = error.code.rawValue
                    let why = if name.hasSuffix(".ServiceUnknown") || name.hasSuffix(".NameHasNoOwner") {
                        "no notification service"
                    } else if name.hasSuffix(".NoReply") || name.hasSuffix(".Timeout") {
                        "the notification service did not answer within 10 s; it may still show it"
                    } else {
                        "the notification service did not show it"
                    }
                    host.log(.info, "alert of \(app) (\(why): \(error.message)): \(summary) — \(body)")
                }
            }
        } catch {
            host.log(.info, "alert of \(app) (cannot ask the notification service: \(error.message)): \(summary) — \(body)")
        }
    }

    // MARK: Records

    /// A write outside a call: if it fails, the event's batch is rolled back
    /// (memory included), so it is only logged here.
    private func persist(_ what: @autoclosure () -> String, _ write: () throws -> Void) {
        do { try write() } catch { host.log(.warning, "cannot \(what()): \(error); this event is undone") }
    }

    /// Writes a push with its app's state beside it: DeliverPush then needs
    /// one record, not two (one b-tree page per commit, on the path of every push).
    private func store(_ push: PushRecord) throws {
        try host.put(PushRecordJSON.encode(push, appState: appState(push.app)), collection: "pushes", key: push.id)
    }

    /// The app's bucket and counters (``PushAppState``).
    private func saveState(_ app: String) throws {
        guard inboxes[app] != nil else { return }
        try host.put(PushRecordJSON.write(appState(app)), collection: "apps", key: app)
    }

    /// The app's state now, as the next version.
    private func appState(_ app: String) -> PushAppState {
        stateVersion += 1
        let box = inboxes[app] ?? inbox(app)
        return PushAppState(bucket: box.bucket, counts: box.counts, version: stateVersion)
    }

    // MARK: bgtaskctl apps and CheckIn

    /// Pushes waiting for the app without a wake (held, or due and not yet
    /// woken): delivered when it checks in.
    func waitingEvents(for app: String) -> Int {
        inboxes[app]?.pushes.reduce(0) { $0 + (inFlight.contains($1.id) ? 0 : 1) } ?? 0
    }

    func describe(app: String, into description: inout [String: PluginValue]) {
        if let endpoint = bridge?.registrations[app]?.endpoint {
            description[RemoteNotificationsInterface.ApplicationKey.pushEndpoint.rawValue] = .string(endpoint)
        }
        guard let box = inboxes[app] else { return }
        typealias Key = RemoteNotificationsInterface.ApplicationKey
        description[Key.held.rawValue] = .uint(UInt64(box.heldCount))
        description[Key.delivering.rawValue] = .uint(UInt64(box.pushes.count - box.heldCount))
        description[Key.received.rawValue] = .uint(UInt64(box.counts.received))
        description[Key.delivered.rawValue] = .uint(UInt64(box.counts.delivered))
        description[Key.dropped.rawValue] = .uint(UInt64(box.counts.expired + box.counts.overflowed + box.counts.collapsed))
        description[Key.offences.rawValue] = .uint(UInt64(box.counts.offences))
        description[Key.silentBudget.rawValue] = .double(box.bucket.available(at: host.realtimeMicroseconds))
    }
}
