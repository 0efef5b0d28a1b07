import BgTaskCore
import BgTaskProtocol
import SDBus

/// Makes the calls: for every method of the model, each argument at every
/// extreme of its type with the others ordinary, then wrong signatures; and
/// afterwards an endless stream from a seeded generator that mixes those
/// with sequences that make state in the daemon (apps in the background
/// with tasks, fetch registrations, stored pushes, sleep), so that later
/// calls meet stored state.
struct CallGenerator {
    let model: InterfaceModel
    private var catalog: ValueCatalog
    private var rng: SplitMix64
    /// Extreme values that crashed the daemon already (see ``quarantineKey(member:argument:value:)``):
    /// random calls no longer use them, so that the run goes on to find other problems.
    var quarantined: Set<String> = []
    /// State steps still to be made, in order (a scripted sequence).
    private var plan: [StateStep] = []
    /// The probability that a random call may carry a value over 64 KiB.
    private let heavyChance: Double

    /// The first app's data directory (downloads land there) and a file in it to upload.
    let appDirectory: String
    let uploadSource: String

    init(model: InterfaceModel, seed: UInt64, heavyChance: Double = 0.1, appDirectory: String = "/nonexistent", uploadSource: String = "/nonexistent/x") {
        self.model = model
        self.appDirectory = appDirectory
        self.uploadSource = uploadSource
        catalog = ValueCatalog(seed: seed, appDirectory: appDirectory)
        rng = SplitMix64(seed: seed)
        self.heavyChance = heavyChance
    }

    // MARK: Ordinary values and roles

    /// The role a method is normally called from: an app for the calls that
    /// act on the caller's own app, else a connection without an app id.
    static func defaultRole(_ method: InterfaceModel.Method) -> FuzzCall.Role {
        switch method.name {
        case "BeginBackgroundTask", "EndBackgroundTask", "SetApplicationState", "GetBackgroundTimeRemaining",
             "GetBackgroundRefreshStatus", "SetMinimumFetchInterval", "GetFetchRegistration", "CompleteFetch",
             "CompleteNotification", "StartDownload", "StartUpload", "Cancel", "ListTransfers", "CompleteEvents",
             "StartMonitoringRegion", "StopMonitoringRegion", "ListMonitoredRegions", "StartSignificantLocationChanges",
             "StopSignificantLocationChanges", "CompleteEvent":
            .app(Workspace.fullApps[0])
        case "CheckIn":
            .fresh
        default:
            .anonymous
        }
    }

    /// What a well-behaved client passes for `argument` of `method`.
    func ordinaryValue(_ method: InterfaceModel.Method, _ argument: InterfaceModel.Argument, role: FuzzCall.Role, pool: ClientPool?) -> FuzzValue {
        let app: String = if case .app(let id) = role { id } else { Workspace.fullApps[0] }
        switch (method.name, argument.name) {
        case ("BeginBackgroundTask", _): return .ordinary(.string("fuzz task"), "s \"fuzz task\"")
        case ("EndBackgroundTask", _):
            let id = pool?.taskIDs[role]?.last ?? 1
            return .ordinary(.uint32(id), "u \(id) (a task of this connection)")
        case ("SetApplicationState", _): return .ordinary(.string("background"), "s \"background\"")
        case ("SetMinimumFetchInterval", _): return .ordinary(.double(3600), "d 3600")
        case ("ListPushes", _): return .ordinary(.string(""), "s \"\" (all apps)")
        // Nothing listens on the discard port: a download is refused, retried, and stays queued.
        case (_, "url"): return .ordinary(.string("http://127.0.0.1:9/fuzz"), "s http://127.0.0.1:9/fuzz")
        case (_, "destination_path"): return .ordinary(.string(appDirectory + "/fuzz.bin"), "s a path in the app's data directory")
        case (_, "source_path"): return .ordinary(.string(uploadSource), "s a file in the app's data directory")
        case (_, "session_id"): return .ordinary(.string("fuzz"), "s \"fuzz\"")
        case (_, "region_id"): return .ordinary(.string("home"), "s \"home\"")
        case (_, "latitude"): return .ordinary(.double(48.8584), "d 48.8584")
        case (_, "longitude"): return .ordinary(.double(2.2945), "d 2.2945")
        case (_, "radius_m"): return .ordinary(.double(200), "d 200")
        case (_, "app_id"): return .ordinary(.string(app), "s \(app)")
        case (_, "payload_json"): return .ordinary(.string(ValueCatalog.silentPayload), "s payload: silent")
        case (_, "options"): return .ordinary(ValueCatalog.dictionary([]), "a{sv} empty")
        case (_, "result"): return .ordinary(.string("newData"), "s \"newData\"")
        case (_, "enabled"): return .ordinary(.bool(true), "b true")
        case ("CompleteFetch", "token"), ("CompleteNotification", "token"):
            if let token = (method.name == "CompleteFetch" ? pool?.fetchTokens : pool?.pushTokens)?[role]?.last {
                return .ordinary(.string(token), "s a token the daemon gave")
            }
            return .ordinary(.string("no-token-yet"), "s \"no-token-yet\"")
        case (_, "interface_name"), (_, "interface"):
            return .ordinary(.string(BgTaskNames.manager), "s Manager")
        case (_, "property_name"), (_, "property"):
            return .ordinary(.string(method.name == "Set" ? "Sleeping" : "Version"), "s \(method.name == "Set" ? "Sleeping" : "Version")")
        case ("Set", "value"): return .ordinary(.variant(.bool(true)), "v b true")
        default: return .ordinary(ValueCatalog.ordinary(argument.signature), "\(argument.signature) ordinary")
        }
    }

    private func call(
        _ method: InterfaceModel.Method, role: FuzzCall.Role, values: [FuzzValue], names: [String]? = nil,
        origin: FuzzCall.Origin, interface: String?? = nil, member: String? = nil, path: String? = nil
    ) -> FuzzCall {
        // Calls carrying noncharacters travel on a hand-spoken connection, which never checks in.
        let raw = values.contains { $0.needsRawTransport }
        return FuzzCall(
            role: raw ? .anonymous : role, path: path ?? BgTaskNames.objectPath,
            interface: interface ?? method.interface, member: member ?? method.name, arguments: values,
            argumentNames: names ?? method.inputs.map(\.name), declared: method, origin: origin)
    }

    // MARK: Systematic calls

    /// Each argument at every extreme of its type, the others ordinary.
    mutating func typedCalls(for method: InterfaceModel.Method, pool: ClientPool?) -> [FuzzCall] {
        let role = Self.defaultRole(method)
        let ordinary = method.inputs.map { ordinaryValue(method, $0, role: role, pool: pool) }
        var calls = [call(method, role: role, values: ordinary, origin: .typed)]
        for (index, argument) in method.inputs.enumerated() {
            for value in catalog.extremes(signature: argument.signature, argument: argument.name) {
                var values = ordinary
                values[index] = value
                calls.append(call(method, role: role, values: values, origin: .typed))
            }
        }
        return calls
    }

    /// Arguments missing, extra, of other types or swapped; the method on
    /// another interface, with no interface, on another path; an unknown member.
    func signatureCalls(for method: InterfaceModel.Method, pool: ClientPool?) -> [FuzzCall] {
        let role = Self.defaultRole(method)
        let ordinary = method.inputs.map { ordinaryValue(method, $0, role: role, pool: pool) }
        let names = method.inputs.map(\.name)
        var calls: [FuzzCall] = []
        func add(_ values: [FuzzValue], _ names: [String], interface: String?? = nil, member: String? = nil, path: String? = nil) {
            calls.append(call(method, role: role, values: values, names: names, origin: .signature,
                              interface: interface, member: member, path: path))
        }
        if !ordinary.isEmpty {
            add([], [])
            add(Array(ordinary.dropLast()), Array(names.dropLast()))
        }
        add(ordinary + [.init(.string("extra"), "s extra")], names + ["extra"])
        add(ordinary + [.init(.uint32(7), "u 7")], names + ["extra"])
        add(ordinary + [.init(ValueCatalog.dictionary([]), "a{sv} empty")], names + ["extra"])
        for (index, argument) in method.inputs.enumerated() {
            for wrong in ValueCatalog.wrongTypedValues where wrong.value.signature != argument.signature {
                var values = ordinary
                values[index] = FuzzValue(wrong.value, "\(wrong.label) (wrong type)")
                add(values, names)
            }
        }
        if ordinary.count > 1, Set(method.inputs.map(\.signature)).count > 1 {
            add(ordinary.reversed(), names.reversed())
        }
        add([.init(.structure(ordinary.isEmpty ? [.string("x")] : ordinary.map(\.value)), "whole body in a struct")], ["body"])
        add([.init(.array(element: "y", [0, 1, 2, 255].map { .byte($0) }), "ay [0,1,2,255]")], ["body"])
        // Where the method is not: the daemon must say so, not run it.
        add(ordinary, names, interface: .some(nil))
        if let other = model.interfaces.first(where: { interface in
            interface != method.interface && model.method(interface, method.name) == nil
        }) {
            add(ordinary, names, interface: .some(other))
        }
        add(ordinary, names, member: method.name + "X")
        add(ordinary, names, path: BgTaskNames.objectPath + "/x")
        add(ordinary, names, path: "/")
        return calls
    }

    // MARK: Random calls

    /// The next call of the random phase.
    mutating func nextRandom(pool: ClientPool) -> FuzzCall {
        for _ in 0..<8 {
            let candidate: FuzzCall?
            if !plan.isEmpty {
                candidate = stateCall(plan.removeFirst(), pool: pool)
            } else {
                let roll = rng.unit()
                if roll < 0.35 {
                    candidate = randomTypedCall(pool: pool)
                } else if roll < 0.45 {
                    candidate = randomSignatureCall(pool: pool)
                } else if roll < 0.5 {
                    plan = scriptedSequence()
                    candidate = stateCall(plan.removeFirst(), pool: pool)
                } else {
                    candidate = stateCall(randomStep(pool: pool), pool: pool)
                }
            }
            guard let candidate, !isQuarantined(candidate) else { continue }
            if !rng.chance(heavyChance), candidate.arguments.contains(where: { Self.size(of: $0.value) > 65536 }) { continue }
            return candidate
        }
        let method = model.methods.first { $0.name == "GetBackgroundTimeRemaining" } ?? model.methods[0]
        return call(method, role: Self.defaultRole(method), values: [], origin: .random)
    }

    /// `Member.argument=label` of an extreme value.
    static func quarantineKey(member: String, argument: String, value: FuzzValue) -> String {
        "\(member).\(argument)=\(value.label)"
    }

    private func isQuarantined(_ call: FuzzCall) -> Bool {
        guard !quarantined.isEmpty else { return false }
        return zip(call.argumentNames, call.arguments).contains { name, value in
            value.isExtreme && quarantined.contains(Self.quarantineKey(member: call.member, argument: name, value: value))
        }
    }

    private mutating func randomRole(default role: FuzzCall.Role) -> FuzzCall.Role {
        if rng.chance(0.5) { return role }
        let roles: [FuzzCall.Role] = [.anonymous, .fresh] + (Workspace.knownApps + [Workspace.unknownApp]).map { .app($0) }
        return roles[rng.int(0...(roles.count - 1))]
    }

    private mutating func randomTypedCall(pool: ClientPool) -> FuzzCall {
        let method = model.methods[rng.int(0...(model.methods.count - 1))]
        let role = randomRole(default: Self.defaultRole(method))
        let values = method.inputs.map { argument -> FuzzValue in
            let roll = rng.unit()
            if roll < 0.55 { return ordinaryValue(method, argument, role: role, pool: pool) }
            if roll < 0.85 {
                let choices = catalog.extremes(signature: argument.signature, argument: argument.name)
                if !choices.isEmpty { return choices[rng.int(0...(choices.count - 1))] }
            }
            return catalog.random(signature: argument.signature, argument: argument.name)
        }
        return call(method, role: role, values: values, origin: .random)
    }

    private mutating func randomSignatureCall(pool: ClientPool) -> FuzzCall {
        let method = model.methods[rng.int(0...(model.methods.count - 1))]
        if rng.chance(0.5) {
            let choices = signatureCalls(for: method, pool: pool)
            var chosen = choices[rng.int(0...(choices.count - 1))]
            chosen.origin = .random
            return chosen
        }
        // Up to three values of random types.
        let signatures = ["s", "u", "d", "t", "b", "a{sv}", "v", "as", "i", "x", "(su)"]
        let values = (0..<rng.int(0...3)).map { _ in
            catalog.random(signature: signatures[rng.int(0...(signatures.count - 1))], argument: "")
        }
        return call(method, role: randomRole(default: Self.defaultRole(method)), values: values,
                    names: values.indices.map { "arg\($0)" }, origin: .random)
    }

    // MARK: State

    /// One step of a sequence that makes state, materialized when it is sent
    /// (so that it uses the task ids and tokens the daemon handed out by then).
    enum StateStep {
        case checkIn(String, claim: String)
        case setState(String, String)
        case begin(String)
        case end(String)
        case fetchInterval(String)
        case fetchRegistration(String)
        case deliverPush(to: String, from: FuzzCall.Role)
        case simulateFetch(String)
        case completeFetch(String)
        case completeNotification(String)
        case listPushes(String)
        case sleep(Bool)
        case refresh(String, Bool)
        case timeRemaining(String)
        case applications
    }

    private mutating func randomApp() -> String {
        let roll = rng.unit()
        if roll < 0.8 { return Workspace.fullApps[rng.int(0...(Workspace.fullApps.count - 1))] }
        return [Workspace.brokenApp, Workspace.plainApp, Workspace.unknownApp][rng.int(0...2)]
    }

    private mutating func randomStep(pool: ClientPool) -> StateStep {
        let app = randomApp()
        // Drawn whatever the state, so that a seed makes the same sequence of calls however the daemon answers.
        let answerFetch = rng.chance(0.7)
        let answerPush = rng.chance(0.7)
        let step = rng.int(0...17)
        // Wakes the daemon sent are answered first, as an app would.
        if pool.fetchTokens[.app(app)]?.isEmpty == false, answerFetch { return .completeFetch(app) }
        if pool.pushTokens[.app(app)]?.isEmpty == false, answerPush { return .completeNotification(app) }
        switch step {
        case 0: return .checkIn(app, claim: rng.chance(0.8) ? app : randomApp())
        case 1, 2: return .setState(app, ["background", "active", "inactive"][rng.int(0...2)])
        case 3: return .begin(app)
        case 4: return .end(app)
        case 5: return .fetchInterval(app)
        case 6: return .fetchRegistration(app)
        case 7, 8, 9: return .deliverPush(to: app, from: rng.chance(0.8) ? .anonymous : .app(app))
        case 10: return .simulateFetch(app)
        case 11: return .completeFetch(app)
        case 12: return .completeNotification(app)
        case 13: return .listPushes(rng.chance(0.5) ? app : "")
        case 14: return .sleep(rng.chance(0.5))
        case 15: return .refresh(rng.chance(0.2) ? "" : app, rng.chance(0.7))
        case 16: return .timeRemaining(app)
        default: return .applications
        }
    }

    /// An app goes to the background with a task, registers for fetch, gets
    /// pushes and a fetch wake, the machine sleeps and wakes, the app answers
    /// and comes back.
    private mutating func scriptedSequence() -> [StateStep] {
        let app = Workspace.fullApps[rng.int(0...(Workspace.fullApps.count - 1))]
        return [
            .setState(app, "background"), .begin(app), .fetchInterval(app), .deliverPush(to: app, from: .anonymous),
            .deliverPush(to: app, from: .anonymous), .simulateFetch(app), .sleep(true), .timeRemaining(app), .sleep(false),
            .completeFetch(app), .completeNotification(app), .listPushes(app), .end(app), .setState(app, "active"),
        ]
    }

    private mutating func stateCall(_ step: StateStep, pool: ClientPool) -> FuzzCall? {
        func make(_ interface: String, _ member: String, _ role: FuzzCall.Role, _ values: [FuzzValue]) -> FuzzCall? {
            guard let method = model.method(interface, member) else { return nil }
            return call(method, role: role, values: values, origin: .state)
        }
        let manager = BgTaskNames.manager
        switch step {
        case .checkIn(let app, let claim):
            return make(manager, "CheckIn", .app(app), [.ordinary(.string(claim), "s \(claim)")])
        case .setState(let app, let state):
            return make(manager, "SetApplicationState", .app(app), [.ordinary(.string(state), "s \"\(state)\"")])
        case .begin(let app):
            let name = rng.chance(0.9) ? "task \(rng.int(0...999))" : catalog.randomUTF8(count: rng.int(0...300))
            return make(manager, "BeginBackgroundTask", .app(app), [.ordinary(.string(name), "s task name")])
        case .end(let app):
            let pick = rng.next()
            let other = UInt32(rng.int(0...50))
            let ids = pool.taskIDs[.app(app)] ?? []
            let id = ids.isEmpty ? other : ids[Int(pick % UInt64(ids.count))]
            return make(manager, "EndBackgroundTask", .app(app), [.ordinary(.uint32(id), "u \(id)")])
        case .fetchInterval(let app):
            let value: FuzzValue = rng.chance(0.6)
                ? [0, 900, 3600, .infinity].map { FuzzValue.ordinary(.double($0), "d \($0)") }[rng.int(0...3)]
                : ValueCatalog.doubles[rng.int(0...(ValueCatalog.doubles.count - 1))]
            return make(BgTaskNames.fetch, "SetMinimumFetchInterval", .app(app), [value])
        case .fetchRegistration(let app):
            return make(BgTaskNames.fetch, "GetFetchRegistration", .app(app), [])
        case .deliverPush(let app, let role):
            let payloads = ValueCatalog.payloads
            let payload = rng.chance(0.85) ? payloads[rng.int(0...3)] : payloads[rng.int(0...(payloads.count - 1))]
            let options: FuzzValue
            switch rng.unit() {
            case ..<0.4: options = .ordinary(ValueCatalog.dictionary([]), "a{sv} empty")
            case ..<0.7:
                let key = ValueCatalog.pushOptions[rng.int(0...2)].key
                options = .ordinary(ValueCatalog.dictionary([(key, ValueCatalog.ordinaryOption(key))]), "a{sv} \(key) ordinary")
            default: options = catalog.random(signature: "a{sv}", argument: "options")
            }
            return make(BgTaskNames.remoteNotifications, "DeliverPush", role, [.ordinary(.string(app), "s \(app)"), payload, options])
        case .simulateFetch(let app):
            return make(BgTaskNames.fetch, "SimulateFetch", .anonymous, [.ordinary(.string(app), "s \(app)")])
        case .completeFetch(let app), .completeNotification(let app):
            let fetch = if case .completeFetch = step { true } else { false }
            let token = pool.takeToken(fetch: fetch, role: .app(app))
            let result = ["newData", "noData", "failed"][rng.int(0...2)]
            return make(fetch ? BgTaskNames.fetch : BgTaskNames.remoteNotifications, fetch ? "CompleteFetch" : "CompleteNotification",
                        .app(app), [.ordinary(.string(token ?? "stale-token"), token == nil ? "s stale token" : "s a token the daemon gave"),
                                    .ordinary(.string(result), "s \"\(result)\"")])
        case .listPushes(let app):
            return make(BgTaskNames.remoteNotifications, "ListPushes", .anonymous, [.ordinary(.string(app), "s \"\(app)\"")])
        case .sleep(let sleeping):
            return make(manager, sleeping ? "SimulateSleep" : "SimulateWake", .anonymous, [])
        case .refresh(let app, let enabled):
            return make(manager, "SetBackgroundRefreshEnabled", .anonymous,
                        [.ordinary(.string(app), "s \"\(app)\""), .ordinary(.bool(enabled), "b \(enabled)")])
        case .timeRemaining(let app):
            return make(manager, "GetBackgroundTimeRemaining", .app(app), [])
        case .applications:
            return make(manager, "GetApplications", .anonymous, [])
        }
    }

    /// The CheckIn that binds a new connection to its app role.
    func checkIn(_ role: FuzzCall.Role) -> FuzzCall? {
        guard case .app(let app) = role, let method = model.method(BgTaskNames.manager, "CheckIn") else { return nil }
        return call(method, role: role, values: [.ordinary(.string(app), "s \(app)")], origin: .setup)
    }

    /// Roughly how many bytes a value takes on the wire.
    static func size(of value: BusValue) -> Int {
        switch value {
        case .string(let text), .objectPath(let text), .signature(let text): text.utf8.count + 5
        case .array(_, let values), .structure(let values): values.reduce(8) { $0 + size(of: $1) }
        case .dictionary(_, _, let entries): entries.reduce(8) { $0 + size(of: $1.key) + size(of: $1.value) + 8 }
        case .variant(let inner): size(of: inner) + 4
        default: 8
        }
    }
}
