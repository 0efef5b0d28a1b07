import BgTaskLocationCore
import BgTaskPluginKit
import BgTaskProtocol
import Foundation

// Implementation notes
//
// Positions come from GeoClue2 (GeoClueSource), asked for only while some app
// monitors a region or significant changes, or from SimulateLocation; both
// go through process(_:). The RegionMonitor (BgTaskLocationCore) turns fixes
// into crossings with hysteresis; a side that holds with no fix against it
// settles on a timer (scheduleOpportunity). Each crossing and each
// significant change becomes a LocationEvent, written to the daemon's
// database in the same batch as the region's new side: a crash loses neither
// and repeats neither. An event gets a wake of its own (one token per
// event); the host launches the app if need be and hands each token back
// when the app can take it, and the plugin sends RegionEvent or
// SignificantLocationChange. An event is removed when its app completes it
// and never before; one whose wake expired, failed, or died with the daemon
// waits for the app's next wake (its check-in, another mode's wake). An app
// whose Background App Refresh is off is not woken: its events wait the same
// way. After a restart, events on their way wait a few seconds for running
// apps to check in again, then wake their apps.
//
// Every change of memory in a batch notes how to undo it (UndoLog): if the
// batch's commit fails, the crossing is forgotten with its event, and the
// next fix sees it again.

/// The `location` mode: regions and significant location changes that wake apps.
final class LocationMode: ModePlugin {
    static let name = "location"
    static let wakesNeedRefresh = true
    static let version = "1.0.0"

    static let wakeBudgetKey = ConfigKey.wakeBudget("Location.WakeBudgetSec", default: 10, "time to call CompleteEvent")
    static let maxRegionsKey = ConfigKey.integer(
        "Location.MaxRegionsPerApp", default: 20, minimum: 1, maximum: 10_000, "regions an app may monitor at once")
    static let minRadiusKey = ConfigKey(
        "Location.MinRadiusM", kind: .number(minimum: 1, maximum: MonitoredRegion.maximumRadius, positive: true, unit: "metres"),
        default: 100, "smaller region radii are raised to this")
    static let significantDistanceKey = ConfigKey(
        "Location.SignificantChangeM", kind: .number(minimum: 1, maximum: 1_000_000, positive: true, unit: "metres"),
        default: 500, "distance that makes a significant location change")
    static let significantIntervalKey = ConfigKey.seconds(
        "Location.SignificantChangeMinIntervalSec", default: 300, positive: false, "least time between significant changes")
    static let dwellKey = ConfigKey(
        "Location.DwellSec", kind: .number(minimum: 0, maximum: 3600, positive: false, unit: "seconds"),
        default: 20, "how long a side of a region's boundary must hold before it counts")
    static let configKeys = [
        wakeBudgetKey, maxRegionsKey, minRadiusKey, significantDistanceKey, significantIntervalKey, dwellKey,
    ]
    static let errorNames: [ModeError.Code] = [
        .notPermitted, .unknownApplication, .modeNotDeclared, .limitExceeded, .noSuchToken,
    ]

    /// How long events due before a restart wait for their apps to check in again.
    static let restartGrace: UInt64 = 5_000_000
    /// The desktop id bgtaskd gives GeoClue.
    static let geoclueDesktopID = "bgtaskd"

    private let host: PluginHost
    private let wakeBudget: Double
    private let maxRegions: Int
    private let minRadius: Double
    private let significantDistance: Double
    private let significantInterval: UInt64
    private var monitor: RegionMonitor
    /// Apps that asked for significant changes, with what was last reported to each.
    private var significant: [String: SignificantChangeFilter] = [:]
    /// Apps with regions or significant changes stored that no desktop entry
    /// declaring the mode claims: not followed (see ``followDeclaredApps()``).
    private var setAside: Set<String> = []
    /// Events not yet completed, by id.
    private var events: [String: LocationEvent] = [:]
    /// Why each waiting event was last said to wait: said again only when
    /// that changes, not at every refresh or desktop-entry change of any app.
    private var loggedWaits: [String: String] = [:]
    /// Tokens of events on their way: token → event id.
    private var tokens: [String: String] = [:]
    /// Which missed wakes count: one offence per wake budget, not one per event.
    private var offences: OffenceWindow
    /// Event ids on their way.
    private var inFlight: Set<String> = []
    /// Events whose wake expired or failed: they go with the app's next
    /// wake (its check-in), not when some other app's refresh or entry
    /// changes, nor at the restart grace. In memory: after a restart each
    /// gets its one redelivery.
    private var waitingForWake: Set<String> = []
    /// Whether the signal of each event made in this run has gone out to
    /// the app. Events from before a restart are not here: they may have
    /// reached it. See ``supersedeWaiting(by:)``.
    private var deliveries: [String: EventDelivery] = [:]
    private var counters: [String: LocationAppCounters] = [:]
    private var lastSequence: UInt64 = 0
    /// Regions whose record has no sequence yet (see ``load()``): their
    /// crossings' events cannot carry their sides.
    private var sidesWrittenAtOnce: Set<RegionMonitor.Key> = []
    /// The last position seen, for regions added later and for settled crossings.
    private var lastFix: LocationFix?
    /// Until when events from before a restart wait for their apps (realtime µs; 0: none wait).
    private var redeliverAfter: UInt64 = 0
    private var armedAt: UInt64?
    private var source: GeoClueSource!
    /// What the host said of each app's desktop entry and refresh status.
    private var appInfos = AppInfoCache()
    /// How to undo what the current batch changed (see ``rollBack()``).
    private var undo = UndoLog()

    init(host: PluginHost) throws {
        self.host = host
        wakeBudget = host.value(of: Self.wakeBudgetKey)
        offences = OffenceWindow(wakeBudget: wakeBudget)
        maxRegions = host.integer(of: Self.maxRegionsKey)
        minRadius = host.value(of: Self.minRadiusKey)
        significantDistance = host.value(of: Self.significantDistanceKey)
        significantInterval = Self.microseconds(host.value(of: Self.significantIntervalKey))
        monitor = RegionMonitor(dwell: Self.microseconds(host.value(of: Self.dwellKey)))
        source = GeoClueSource(host: host, desktopID: Self.geoclueDesktopID, onRetry: { [unowned self] in self.armTimer() }) {
            [unowned self] latitude, longitude, accuracy in
            // GeoClue's fix: checked as a client's would be; its own timestamp may be on another clock.
            guard let coordinate = try? GeoCoordinate(validatingLatitude: latitude, longitude: longitude) else {
                return self.host.log(.debug, "GeoClue reported an impossible position \(latitude),\(longitude)")
            }
            self.process(LocationFix(coordinate: coordinate, accuracy: accuracy, time: self.host.realtimeMicroseconds))
        }
    }

    /// Seconds (checked by the daemon: finite, at most a century) as µs.
    private static func microseconds(_ seconds: Double) -> UInt64 { UInt64((seconds * 1_000_000).rounded()) }

    func start() throws {
        typealias M = LocationInterface.Method
        typealias S = LocationInterface.Signal
        let region: [(String, String)] = [("region_id", "s"), ("latitude", "d"), ("longitude", "d"), ("radius_m", "d")]
        try host.export(PluginInterface(name: BgTaskNames.location, members: [
            .method(M.startMonitoringRegion.rawValue, in: region),
            .method(M.startMonitoringRegionWithOptions.rawValue, in: region + [("options", "a{sv}")]),
            .method(M.stopMonitoringRegion.rawValue, in: [("region_id", "s")]),
            .method(M.listMonitoredRegions.rawValue, out: [("regions", "a(sddd)")]),
            .method(M.listRegions.rawValue, in: [("app_id", "s")], out: [("regions", "aa{sv}")]),
            .method(M.startSignificantLocationChanges.rawValue),
            .method(M.stopSignificantLocationChanges.rawValue),
            .method(M.completeEvent.rawValue, in: [("token", "s")]),
            .method(M.simulateLocation.rawValue, in: [("latitude", "d"), ("longitude", "d"), ("accuracy_m", "d")]),
            .signal(S.regionEvent.rawValue, [("token", "s"), ("region_id", "s"), ("event", "s")]),
            .signal(S.significantLocationChange.rawValue, [("token", "s"), ("latitude", "d"), ("longitude", "d"), ("accuracy_m", "d")]),
        ]))
        try load()
        followDeclaredApps()
        updateSource()
        armTimer()
    }

    func stop() {
        source.stop()
    }

    // MARK: Records

    private func load() throws {
        let decoder = JSONDecoder()
        // Events first: a region's side may be in the events stored after it.
        for (key, data) in try host.records(collection: "events") {
            guard let event = try? decoder.decode(LocationEvent.self, from: Data(data)) else {
                host.log(.warning, "ignoring the unreadable location event \(key)")
                continue
            }
            events[event.id] = event
            lastSequence = StoredSequence.last(lastSequence, event.sequence)
        }
        let unsequenced = try loadRegions { _ in true }
        try loadSignificant { _ in true }
        for (app, data) in try host.records(collection: "apps") {
            counters[app] = (try? decoder.decode(LocationAppCounters.self, from: Data(data))) ?? LocationAppCounters()
        }
        // A record from before events carried sides holds its side; written
        // again with a sequence, the next crossing's event can override it.
        // Until then (a write that fails here) its crossings write it as before.
        for key in unsequenced {
            do { try saveRegion(key) } catch {
                sidesWrittenAtOnce.insert(key)
                host.log(.warning, "cannot store region \(key.region) of \(key.app) again (\(error)): its sides are written at each crossing until a restart")
            }
        }
        if !events.isEmpty {
            redeliverAfter = host.realtimeMicroseconds + Self.restartGrace
            host.log(.info, "\(events.count) location events from before the restart wait for their apps")
        }
        if monitor.count > 0 || !significant.isEmpty {
            host.log(.info, "monitoring \(monitor.count) regions of \(monitor.apps.count) apps; \(significant.count) apps follow significant changes")
        }
    }

    private static func regionKey(_ app: String, _ id: String) -> String { "\(app)/\(id)" }

    /// Monitors the stored regions of the apps `including` takes, each on
    /// the side its record or a later event of it gives; returns those whose
    /// record has no sequence yet (from before events carried sides).
    private func loadRegions(of including: (String) -> Bool) throws -> [RegionMonitor.Key] {
        let decoder = JSONDecoder()
        let regionEvents = Dictionary(grouping: events.values.filter { $0.kind == .region && including($0.app) }) {
            RegionMonitor.Key(app: $0.app, region: $0.region ?? "")
        }
        var unsequenced: [RegionMonitor.Key] = []
        for (key, data) in try host.records(collection: "regions") {
            guard let slash = key.firstIndex(of: "/") else { continue }
            let app = String(key[..<slash]), id = String(key[key.index(after: slash)...])
            guard including(app) else { continue }
            do {
                let stored = try decoder.decode(StoredRegion.self, from: Data(data))
                let side = stored.sideAfter(regionEvents[RegionMonitor.Key(app: app, region: id)] ?? [])
                monitor.add(try stored.region(id: id, minimumRadius: minRadius), for: app, side: side)
                // Events continue after every record, those with no event pending included.
                lastSequence = StoredSequence.last(lastSequence, stored.sequence ?? 0)
                if stored.sequence == nil { unsequenced.append(RegionMonitor.Key(app: app, region: id)) }
            } catch {
                host.log(.warning, "ignoring the unreadable region \(key): \(error)")
            }
        }
        return unsequenced
    }

    /// Follows significant changes again for the stored apps `including` takes.
    private func loadSignificant(of including: (String) -> Bool) throws {
        let decoder = JSONDecoder()
        for (app, data) in try host.records(collection: "significant") where including(app) {
            var filter = SignificantChangeFilter(minimumDistance: significantDistance, minimumInterval: significantInterval)
            if let last = try? decoder.decode(StoredFix.self, from: Data(data)).fix { filter.restore(last) }
            significant[app] = filter
        }
    }

    /// Whether the app has a desktop entry declaring the location mode.
    private func declaresLocation(_ app: String) -> Bool { appInfo(app)?.modes.contains(Self.name) == true }

    /// An app whose desktop entry is gone or no longer declares the mode (it
    /// was uninstalled) is not followed: its regions and significant changes
    /// stay stored but are set aside, so GeoClue is not kept on for it and no
    /// event is made for it, and they are followed again if it declares the
    /// mode again. Apps set aside come back the same way, and the position
    /// known then counts for them at once, as for a region just monitored:
    /// GeoClue reports again only after a move, so a crossing made while the
    /// app was away would otherwise wait for the device to move.
    private func followDeclaredApps() {
        let followed = Set(monitor.apps).union(significant.keys)
        for app in followed.sorted() where !declaresLocation(app) {
            let regions = monitor.count(of: app)
            monitor.removeAll(for: app)
            significant[app] = nil
            setAside.insert(app)
            host.log(.notice, "\(app) no longer declares the location mode: its \(regions) regions and significant changes are set aside until it does")
        }
        for app in setAside.sorted() where declaresLocation(app) {
            setAside.remove(app)
            do {
                _ = try loadRegions { $0 == app }
                try loadSignificant { $0 == app }
                host.log(.notice, "\(app) declares the location mode again: following its \(monitor.count(of: app)) regions")
                if let lastFix {
                    let keys = monitor.regions(of: app).map { RegionMonitor.Key(app: app, region: $0.id) }
                    record(keys.compactMap { monitor.update($0, with: lastFix) }, at: lastFix)
                    considerSignificant(app, lastFix)
                } else {
                    recordSideChanges()
                }
            } catch {
                setAside.insert(app)
                host.log(.warning, "cannot read the regions of \(app) again: \(error); they stay set aside")
            }
        }
    }

    private func saveRegion(_ key: RegionMonitor.Key) throws {
        guard let region = monitor.region(key) else { return }
        let stored = StoredRegion(region, side: monitor.boundary(key)?.side, sequence: lastSequence)
        try host.put(stored.json, collection: "regions", key: Self.regionKey(key.app, key.region))
    }

    /// A region not in memory (its app is set aside) takes the side a
    /// completed event carried into its stored record, if the event came
    /// after the record; else that side would go with the event.
    private func saveSide(of event: LocationEvent, into key: RegionMonitor.Key) throws {
        guard let crossing = event.regionEvent else { return }
        let recordKey = Self.regionKey(key.app, key.region)
        guard let data = try host.records(collection: "regions").first(where: { $0.key == recordKey })?.data,
              var stored = try? JSONDecoder().decode(StoredRegion.self, from: Data(data)),
              (stored.sequence ?? 0) < event.sequence else { return }
        stored.side = StoredRegion.spell(crossing == .enter ? .inside : .outside)
        // Events of the region after this one still say more (see StoredRegion.sideAfter).
        stored.sequence = event.sequence
        try host.put(stored.json, collection: "regions", key: recordKey)
    }

    private func saveSignificant(_ app: String) throws {
        guard let filter = significant[app] else { return }
        try host.put(Array(try JSONEncoder().encode(StoredFix(filter.lastReported))), collection: "significant", key: app)
    }

    private func saveCounters(_ app: String) throws {
        try host.put((counters[app] ?? LocationAppCounters()).json, collection: "apps", key: app)
    }

    /// A write outside a call: if it fails, the batch is rolled back (memory included), so it is only logged here.
    private func persist(_ what: @autoclosure () -> String, _ write: () throws -> Void) {
        do { try write() } catch { host.log(.warning, "cannot \(what()): \(error); this event is undone") }
    }

    // MARK: Batches

    func checkpoint() {
        undo.clear()
    }

    /// The notes for a rollback go once the batch has landed and its messages are out.
    func committed() {
        undo.clear()
    }

    /// The batch's writes were rolled back (a full disk): what it changed in memory goes too.
    func rollBack() {
        undo.undoAll()
        armedAt = nil
        armTimer()
        updateSource()
    }

    private func setEvent(_ id: String, _ event: LocationEvent?) {
        undo.set(id, to: event, in: &events) { [unowned self] in $0(&self.events) }
        if event == nil {
            setWaitingForWake(id, false)
            setDelivery(id, nil)
            loggedWaits[id] = nil
        }
    }

    private func setDelivery(_ id: String, _ delivery: EventDelivery?) {
        guard deliveries[id] != delivery else { return }
        undo.set(id, to: delivery, in: &deliveries) { [unowned self] in $0(&self.deliveries) }
    }

    private func setToken(_ token: String, _ id: String?) {
        undo.set(token, to: id, in: &tokens) { [unowned self] in $0(&self.tokens) }
    }

    private func setInFlight(_ id: String, _ delivering: Bool) {
        undo.set(id, contained: delivering, in: &inFlight) { [unowned self] in $0(&self.inFlight) }
    }

    private func setWaitingForWake(_ id: String, _ waiting: Bool) {
        guard waitingForWake.contains(id) != waiting else { return }
        undo.set(id, contained: waiting, in: &waitingForWake) { [unowned self] in $0(&self.waitingForWake) }
    }

    private func changeCounters(_ app: String, _ change: (inout LocationAppCounters) -> Void) {
        let old = counters[app]
        undo.record { [unowned self] in self.counters[app] = old }
        change(&counters[app, default: LocationAppCounters()])
    }

    private func setSignificant(_ app: String, _ filter: SignificantChangeFilter?) {
        undo.set(app, to: filter, in: &significant) { [unowned self] in $0(&self.significant) }
    }

    /// Adds or removes a region, noting how to put the old one back.
    private func replaceRegion(_ key: RegionMonitor.Key, with region: MonitoredRegion?) {
        let old = monitor.region(key).map { ($0, monitor.boundary(key)?.side) }
        undo.record { [unowned self] in
            if let (region, side) = old { self.monitor.add(region, for: key.app, side: side) } else { self.monitor.remove(key.region, for: key.app) }
        }
        if let region { monitor.add(region, for: key.app) } else { monitor.remove(key.region, for: key.app) }
    }

    // MARK: Calls

    func handle(_ call: PluginCall) throws {
        switch LocationInterface.Method(rawValue: call.member) {
        case .startMonitoringRegion: try startMonitoring(call, withOptions: false)
        case .startMonitoringRegionWithOptions: try startMonitoring(call, withOptions: true)
        case .stopMonitoringRegion: try stopMonitoring(call)
        case .listMonitoredRegions: try listMonitored(call)
        case .listRegions: try listRegions(call)
        case .startSignificantLocationChanges: try startSignificant(call)
        case .stopSignificantLocationChanges: try stopSignificant(call)
        case .completeEvent: try completeEvent(call)
        case .simulateLocation: try simulate(call)
        case nil: throw ModeError.failed("unknown method \(call.member)")
        }
        armTimer()
    }

    /// The calling app, which must have checked in and declare the location mode.
    private func declaringApp(_ call: PluginCall) throws(ModeError) -> String {
        guard let app = call.caller.appID else {
            throw ModeError(.unknownApplication, "this connection has no app id: call CheckIn first")
        }
        guard let info = appInfo(app) else {
            throw ModeError(.unknownApplication, "\(app) has no desktop entry")
        }
        guard info.modes.contains(Self.name) else {
            throw ModeError(.modeNotDeclared, "\(app) does not declare the location mode (X-BgTaskd-Modes)")
        }
        return app
    }

    private func startMonitoring(_ call: PluginCall, withOptions: Bool) throws {
        let arguments = call.arguments
        let id = try arguments.readString()
        let latitude = try arguments.readDouble()
        let longitude = try arguments.readDouble()
        let radius = try arguments.readDouble()
        var notifyOnStart = false
        if withOptions {
            let options = try arguments.readTypedOptions()
            if let option = options[LocationInterface.OptionKey.notifyOnStart.rawValue] {
                guard option.signature == "b", case .bool(let value) = option.value else {
                    throw ModeError.invalidArgs("option 'notify_on_start' must be of type 'b', not '\(option.signature)'")
                }
                notifyOnStart = value
            }
        }
        let app = try declaringApp(call)
        let region = try MonitoredRegion(
            validatingID: id, latitude: latitude, longitude: longitude, radius: radius, minimumRadius: minRadius,
            notifyOnStart: notifyOnStart)
        let key = RegionMonitor.Key(app: app, region: id)
        // The same region again (an app registering its places at every start)
        // keeps the side it knows: forgetting it would hide a crossing made
        // while it is learnt again, and repeat notify_on_start's event.
        if monitor.region(key) == region { return try call.reply() }
        if monitor.region(key) == nil, monitor.count(of: app) >= maxRegions {
            throw ModeError(.limitExceeded, "\(app) monitors \(monitor.count(of: app)) regions already, the most Location.MaxRegionsPerApp (\(maxRegions)) allows")
        }
        replaceRegion(key, with: region)
        try saveRegion(key)
        try call.reply()
        host.logWhenCommitted(.info, "\(app) monitors region \(id) (\(region.center), \(Int(region.radius)) m)")
        // The position known now counts for the new region (GeoClue reports again only after a move).
        if let lastFix, let crossing = monitor.update(key, with: lastFix) {
            record([crossing], at: lastFix)
        } else {
            recordSideChanges()
        }
        updateSource()
    }

    private func stopMonitoring(_ call: PluginCall) throws {
        let id = try call.arguments.readString()
        let app = try declaringApp(call)
        let key = RegionMonitor.Key(app: app, region: id)
        if monitor.region(key) != nil {
            replaceRegion(key, with: nil)
            try host.delete(collection: "regions", key: Self.regionKey(app, id))
            host.logWhenCommitted(.info, "\(app) stopped monitoring region \(id)")
        }
        try call.reply()
        updateSource()
    }

    private func listMonitored(_ call: PluginCall) throws {
        let app = try declaringApp(call)
        let regions = monitor.regions(of: app)
        try call.reply { (reply) throws(ModeError) in
            try reply.container("a", "(sddd)") { () throws(ModeError) in
                for region in regions {
                    try reply.container("r", "sddd") { () throws(ModeError) in
                        try reply.append(region.id)
                        try reply.append(region.center.latitude)
                        try reply.append(region.center.longitude)
                        try reply.append(region.radius)
                    }
                }
            }
        }
    }

    private func listRegions(_ call: PluginCall) throws {
        let app = try call.arguments.readString()
        guard call.caller.isTrusted else {
            throw ModeError(.notPermitted, "only trusted callers may list the regions of apps")
        }
        // A mistyped id listed nothing, as if the app had no regions.
        if !app.isEmpty, let problem = DesktopFileID.problem(with: app) {
            throw ModeError.invalidArgs("'\(app.prefix(300))' is not a valid desktop-file id: \(problem)")
        }
        let all = monitor.all.filter { app.isEmpty || $0.key.app == app }
        try call.reply { (reply) throws(ModeError) in
            try reply.container("a", "a{sv}") { () throws(ModeError) in
                typealias Key = LocationInterface.RegionKey
                for (key, region, side) in all {
                    try reply.append(dictionary: [
                        Key.appID.rawValue: .string(key.app), Key.regionID.rawValue: .string(key.region),
                        Key.latitude.rawValue: .double(region.center.latitude),
                        Key.longitude.rawValue: .double(region.center.longitude), Key.radius.rawValue: .double(region.radius),
                        Key.state.rawValue: .string(side.map(StoredRegion.spell) ?? LocationInterface.RegionState.unknown.rawValue),
                        Key.notifyOnStart.rawValue: .bool(region.notifyOnStart),
                    ])
                }
            }
        }
    }

    private func startSignificant(_ call: PluginCall) throws {
        let app = try declaringApp(call)
        let starting = significant[app] == nil
        if starting {
            setSignificant(app, SignificantChangeFilter(minimumDistance: significantDistance, minimumInterval: significantInterval))
            try saveSignificant(app)
            host.logWhenCommitted(.info, "\(app) follows significant location changes")
        }
        try call.reply()
        // The first report is the position known now, if any, as of now: the
        // interval to the next counts from this report, not from when the fix
        // came (an old fix let the next one through at once). Once: starting
        // again does nothing.
        if starting, let lastFix {
            considerSignificant(app, LocationFix(coordinate: lastFix.coordinate, accuracy: lastFix.accuracy, time: host.realtimeMicroseconds))
        }
        updateSource()
    }

    private func stopSignificant(_ call: PluginCall) throws {
        let app = try declaringApp(call)
        if significant[app] != nil {
            setSignificant(app, nil)
            try host.delete(collection: "significant", key: app)
            host.logWhenCommitted(.info, "\(app) stopped following significant location changes")
        }
        try call.reply()
        updateSource()
    }

    private func completeEvent(_ call: PluginCall) throws {
        let token = try call.arguments.readString()
        try host.complete(token: token, connection: call.caller.connection)
        if let id = tokens[token] {
            setToken(token, nil)
            setInFlight(id, false)
            if let event = events[id] {
                setEvent(id, nil)
                try host.delete(collection: "events", key: id)
                // The side this event carried now goes to the region's own record.
                if event.kind == .region, let region = event.region {
                    let key = RegionMonitor.Key(app: event.app, region: region)
                    if monitor.region(key) != nil { try saveRegion(key) } else { try saveSide(of: event, into: key) }
                }
                changeCounters(event.app) { $0.delivered += 1 }
                try saveCounters(event.app)
                host.logWhenCommitted(.debug, "\(event.app) completed location event \(id)")
            }
        }
        try call.reply()
    }

    private func simulate(_ call: PluginCall) throws {
        guard call.caller.isTrusted else {
            throw ModeError(.notPermitted, "only trusted callers may simulate a location")
        }
        let arguments = call.arguments
        let latitude = try arguments.readDouble()
        let longitude = try arguments.readDouble()
        let accuracy = try arguments.readDouble()
        let coordinate = try GeoCoordinate(validatingLatitude: latitude, longitude: longitude)
        guard accuracy.isFinite, accuracy >= 0 else {
            throw ModeError.invalidArgs("accuracy \(accuracy) m is not a finite number of metres, 0 or more")
        }
        try call.reply()
        process(LocationFix(coordinate: coordinate, accuracy: accuracy, time: host.realtimeMicroseconds))
    }

    // MARK: Positions

    /// A fix from GeoClue or SimulateLocation: crossings and significant changes become events.
    private func process(_ fix: LocationFix) {
        // Sides that had held before this fix came count first, at the
        // position that held them, as the settle timer would have had them
        // (it may not have run yet: a busy loop, a wake from sleep).
        if let due = monitor.nextSettle, due <= fix.time { settle(at: fix.time) }
        let previous = lastFix
        undo.record { [unowned self] in self.lastFix = previous }
        lastFix = fix
        record(monitor.update(with: fix), at: fix)
        for app in significant.keys.sorted() { considerSignificant(app, fix) }
        armTimer()
    }

    private func considerSignificant(_ app: String, _ fix: LocationFix) {
        guard var filter = significant[app] else { return }
        let report = filter.consider(fix)
        // Kept also when not reported: the filter may have deferred the fix.
        if filter != significant[app] { setSignificant(app, filter) }
        if report { reportSignificant(app, fix) }
    }

    /// Stores the filter's new last report and makes `fix` the app's event.
    private func reportSignificant(_ app: String, _ fix: LocationFix) {
        persist("store the significant change of \(app)") { try saveSignificant(app) }
        newEvent(LocationEvent(id: nextID(fix.time), app: app, kind: .significant, fix: fix, sequence: lastSequence))
    }

    /// Persists the regions' new sides, then turns crossings into events
    /// (whose records carry the sides they set: see ``StoredRegion``).
    private func record(_ crossings: [RegionMonitor.Crossing], at fix: LocationFix) {
        recordSideChanges(carriedBy: crossings)
        for crossing in crossings {
            let at = LocationFix(coordinate: fix.coordinate, accuracy: fix.accuracy, time: crossing.time)
            let made = newEvent(LocationEvent(
                id: nextID(crossing.time), app: crossing.key.app, kind: .region, region: crossing.key.region,
                crossing: crossing.event, fix: at, sequence: lastSequence))
            // Not for a crossing dropped as it restates what the app was told (logged there).
            if made { host.logWhenCommitted(.info, "\(crossing.key.app): \(crossing.event.rawValue) region \(crossing.key.region)") }
        }
    }

    /// Writes the side of every region whose side changed, noting how to
    /// undo it; not for those of `crossings`, whose events will carry them.
    private func recordSideChanges(carriedBy crossings: [RegionMonitor.Crossing] = []) {
        for change in monitor.drainSideChanges() {
            undo.record { [unowned self] in self.monitor.reset(change.key, to: change.previous) }
            if crossings.contains(where: { $0.key == change.key }), !sidesWrittenAtOnce.contains(change.key) { continue }
            persist("store region \(change.key.region) of \(change.key.app)") { try saveRegion(change.key) }
        }
    }

    private func nextID(_ time: UInt64) -> String {
        let previous = lastSequence
        undo.record { [unowned self] in self.lastSequence = previous }
        lastSequence += 1
        return "l\(String(time, radix: 16))-\(lastSequence)"
    }

    /// Stores an event, then wakes its app for it (or leaves it waiting).
    /// Returns whether it was made (not dropped as restating the side the app was told).
    @discardableResult
    private func newEvent(_ event: LocationEvent) -> Bool {
        guard let anchored = supersedeWaiting(by: event) else { return false }
        setEvent(event.id, event)
        setDelivery(event.id, .unsent(anchored: anchored))
        persist("store location event \(event.id)") {
            try host.put(event.json, collection: "events", key: event.id)
        }
        deliver(event.id)
        return true
    }

    /// The other events of `event`'s app about the same region (or its
    /// other significant changes), oldest first.
    private func related(to event: LocationEvent) -> [LocationEvent] {
        events.values.filter { $0.id != event.id && $0.app == event.app && $0.kind == event.kind && $0.region == event.region }
            .sorted { $0.sequence < $1.sequence }
    }

    /// What still waits for the app (not yet on its way) about the same
    /// region, or its previous significant change, is out of date: it goes,
    /// so that an app that cannot be woken for months finds at most one
    /// event a region and one position, not thousands of wakes. The new
    /// crossing goes too when it only restates the side the app was last
    /// told: by the latest of these events on its way or sent in this run,
    /// or, when none is and none was sent, the side before the first of
    /// them (crossings alternate) if that side is known (the first was made
    /// in this run after an event the app was told or took). When the side
    /// is not known the new crossing is sent.
    /// Returns nil when the new event goes, else whether what it follows is
    /// known (see ``EventDelivery``).
    private func supersedeWaiting(by event: LocationEvent) -> Bool? {
        let others = events.isEmpty ? [] : related(to: event)
        guard !others.isEmpty else { return true }
        // What the app was or is being told (an event on its way reaches it,
        // or is dropped for a later one), read before the stale events go.
        let told: RegionEvent?
        if let last = others.last(where: { inFlight.contains($0.id) || deliveries[$0.id] == .sent }) {
            told = last.regionEvent
        } else if let first = others.first, deliveries[first.id] == .unsent(anchored: true),
                  others.allSatisfy({ deliveries[$0.id]?.isUnsent == true }), let crossing = first.regionEvent {
            told = crossing == .enter ? .exit : .enter
        } else {
            told = nil
        }
        let stale = others.filter { !inFlight.contains($0.id) }
        for old in stale {
            setEvent(old.id, nil)
            persist("delete location event \(old.id)") { try host.delete(collection: "events", key: old.id) }
        }
        guard event.kind == .region, let region = event.region, let crossing = event.regionEvent, told == crossing else {
            if !stale.isEmpty {
                host.logWhenCommitted(.info, "\(event.app): \(stale.count) waiting location event(s) replaced by \(event.id)")
            }
            return told != nil
        }
        persist("store region \(region) of \(event.app)") { try saveRegion(RegionMonitor.Key(app: event.app, region: region)) }
        host.logWhenCommitted(.info, "\(event.app): \(event.crossing ?? "") region \(region) restates the side it was last told; \(stale.count) waiting event(s) of it dropped")
        return nil
    }

    /// An event whose wake expired or failed, when a later one about the
    /// same region (or a later position) exists, is out of date: it goes
    /// rather than wait for a wake that would send it after the later one.
    /// If it was never sent, what the app was told before the later ones is
    /// no longer known from them. Returns whether it went.
    private func dropIfSuperseded(_ id: String) -> Bool {
        guard let event = events[id] else { return false }
        let later = related(to: event).filter { $0.sequence > event.sequence }
        guard !later.isEmpty else { return false }
        if deliveries[id]?.isUnsent == true {
            for next in later where deliveries[next.id]?.isUnsent == true { setDelivery(next.id, .unsent(anchored: false)) }
        }
        setEvent(id, nil)
        persist("delete location event \(id)") { try host.delete(collection: "events", key: id) }
        host.logWhenCommitted(.info, "\(event.app): location event \(id) dropped: \(later.last!.id) came after it")
        return true
    }

    /// Wakes the event's app for it, unless it is on its way or the app may not be woken.
    private func deliver(_ id: String) {
        guard let event = events[id], !inFlight.contains(id) else { return }
        guard let info = appInfo(event.app), info.modes.contains(Self.name) else {
            return logWait(id, of: event.app, "the app has no desktop entry declaring the location mode")
        }
        // Refresh governs background wakes only: an app in the foreground
        // gets its events, as on iOS; one running in the background does not.
        guard info.refreshStatus == BackgroundRefreshStatus.available.rawValue || isInForeground(event.app) else {
            return logWait(id, of: event.app, "Background App Refresh is \(info.refreshStatus)")
        }
        do {
            let token = try host.wake(event.app, reason: Self.name, budget: wakeBudget)
            setToken(token, id)
            setInFlight(id, true)
            loggedWaits[id] = nil
        } catch {
            host.log(.warning, "cannot wake \(event.app) for location event \(id): \(error.message); it waits for the next wake")
        }
    }

    /// Logs once the batch has landed why event `id` waits, unless that is what was said last.
    private func logWait(_ id: String, of app: String, _ reason: String) {
        guard loggedWaits[id] != reason else { return }
        host.whenCommitted { [weak self] in
            guard let self, self.loggedWaits[id] != reason else { return }
            // An event's entry goes with it (setEvent); this only bounds what a rollback left.
            if self.loggedWaits.count > 2 * self.events.count + 1024 {
                self.loggedWaits = self.loggedWaits.filter { self.events[$0.key] != nil }
            }
            self.loggedWaits[id] = reason
            self.host.log(.info, "location event \(id) of \(app) waits: \(reason)")
        }
    }

    /// The app's desktop-entry facts and refresh status; nil for an unknown app.
    private func appInfo(_ app: String) -> AppInfo? { appInfos.info(of: app, from: host) }

    /// Whether the app is in the foreground (`active` or `inactive`), asked of
    /// the host: the cache is not told when an app's state changes.
    private func isInForeground(_ app: String) -> Bool { host.appInfo(app)?.isInForeground ?? false }

    /// Wakes `app` for its events that wait, oldest first; `isWake`: the app is woken or
    /// checked in, so also those that wait for its next wake (see ``waitingForWake``).
    private func deliverWaiting(_ app: String, isWake: Bool = false) {
        let waiting = events.values.filter { $0.app == app && !inFlight.contains($0.id) && (isWake || !waitingForWake.contains($0.id)) }
            .sorted { $0.sequence < $1.sequence }
        for event in waiting {
            setWaitingForWake(event.id, false)
            deliver(event.id)
        }
    }

    // MARK: Events

    func handle(_ event: PluginEvent) {
        switch event {
        case .tokenReady(_, let token, let connection):
            guard let id = tokens[token], let stored = events[id] else { return }
            send(stored, token: token, to: connection)
            if deliveries[id]?.isUnsent == true { setDelivery(id, .sent) }
        case .tokenExpired(let app, let token):
            guard let id = tokens[token] else { return }
            setToken(token, nil)
            setInFlight(id, false)
            let dropped = dropIfSuperseded(id)
            if !dropped { setWaitingForWake(id, true) }
            let counted = offences.counts(app, at: host.realtimeMicroseconds, undo: &undo) { [unowned self] in $0(&self.offences) }
            if counted {
                changeCounters(app) { $0.offences += 1 }
                persist("store the counters of \(app)") { try saveCounters(app) }
            }
            let then = dropped ? "a later event replaces it" : "it waits for the next wake"
            let offence = counted ? "offence counted" : "one offence counted already for the events it missed with it"
            host.logWhenCommitted(.notice, "\(app) did not complete location event \(id) within \(self.wakeBudget) s: \(offence); \(then)")
        case .launchFailed(let app, let token, let reason):
            if let token, let id = tokens[token] {
                setToken(token, nil)
                setInFlight(id, false)
                // Handed back as refresh went, it goes once refresh is back; else with the next wake.
                if !dropIfSuperseded(id), host.appInfo(app)?.refreshStatus == BackgroundRefreshStatus.available.rawValue {
                    setWaitingForWake(id, true)
                }
            }
            // Another instance still runs (the one the event was handed to
            // went): it takes what waits now, as at a CheckIn, which a running
            // instance never makes again. Else the next instance's CheckIn does.
            if token != nil, host.appInfo(app)?.hasRunningInstance == true {
                host.log(.notice, "a location wake of \(app) failed: \(reason); what waits goes to its running instance")
                deliverWaiting(app, isWake: true)
            } else {
                host.log(.warning, "a location wake of \(app) failed: \(reason)")
            }
        case .appCheckedIn(let app, _, _), .appWoken(let app, _, _):
            deliverWaiting(app, isWake: true)
        case .wakeOpportunity(let now):
            armedAt = nil
            source.retryIfDue(at: now)
            settle(at: now)
            reportDeferredSignificant(at: now)
            if redeliverAfter > 0, now >= redeliverAfter {
                redeliverAfter = 0
                for app in Set(events.values.map(\.app)).sorted() { deliverWaiting(app) }
            }
        case .refreshChanged, .appsChanged:
            appInfos.clear()
            if case .appsChanged = event {
                followDeclaredApps()
                updateSource()
            }
            // Apps allowed again get what waited for them.
            for app in Set(events.values.map(\.app)).sorted() { deliverWaiting(app) }
        case .systemBusBack:
            source.systemBusBack()
        case .appWakeEnded:
            break
        case .appStateChanged(let app, let state):
            // The user opening it: what waited while refresh was off goes to it.
            if ApplicationState.isForeground(state) { deliverWaiting(app) }
        case .tokenCompleted, .appGone, .sleepChanged:
            break
        }
        armTimer()
    }

    /// Significant moves deferred until their interval was over are reported now.
    private func reportDeferredSignificant(at now: UInt64) {
        for app in significant.keys.sorted() {
            guard var filter = significant[app], let fix = filter.takeDeferred(at: now) else { continue }
            setSignificant(app, filter)
            reportSignificant(app, fix)
        }
    }

    /// Sides that held with no fix against them count now.
    private func settle(at now: UInt64) {
        let crossings = monitor.settle(at: now)
        guard let lastFix else { return recordSideChanges() }
        record(crossings, at: LocationFix(coordinate: lastFix.coordinate, accuracy: lastFix.accuracy, time: now))
    }

    private func send(_ event: LocationEvent, token: String, to connection: String) {
        do {
            switch event.kind {
            case .region:
                try host.emit(LocationInterface.Signal.regionEvent.rawValue, interface: BgTaskNames.location, to: connection) {
                    (signal) throws(ModeError) in
                    try signal.append(token)
                    try signal.append(event.region ?? "")
                    try signal.append(event.crossing ?? "")
                }
            case .significant:
                try host.emit(LocationInterface.Signal.significantLocationChange.rawValue, interface: BgTaskNames.location, to: connection) {
                    (signal) throws(ModeError) in
                    try signal.append(token)
                    try signal.append(event.latitude)
                    try signal.append(event.longitude)
                    try signal.append(event.accuracy)
                }
            }
        } catch {
            host.log(.warning, "cannot send location event \(event.id): \(error)")
        }
    }

    // MARK: Timer and source

    /// Wakes the plugin when a pending side settles, a deferred significant
    /// move is due, or events from before a restart are due.
    private func armTimer() {
        let redeliver = redeliverAfter > 0 ? redeliverAfter : nil
        let deferred = significant.values.compactMap(\.deferredDue).min()
        let next = [monitor.nextSettle, redeliver, deferred, source.retryAt].compactMap { $0 }.min() ?? 0
        guard next != armedAt else { return }
        armedAt = next
        host.scheduleOpportunity(at: next)
    }

    /// Asks GeoClue for what the monitored regions and significant changes need, or for nothing.
    private func updateSource() {
        source.want(Self.settings(smallestRadius: monitor.smallestRadius, significant: !significant.isEmpty,
                                  significantDistance: significantDistance))
    }

    /// How closely to follow the device: a fix per follow distance of the
    /// smallest region (``MonitoredRegion/followDistance(radius:)``: a twelfth
    /// of its radius, 20 to 150 m), exact positions only for regions under
    /// 2 km; for significant changes alone, street level every half of the
    /// significant distance. No time threshold: GeoClue drops an update
    /// that comes too soon rather than sending it later, so a device that
    /// stops right after crossing would never be seen on the other side.
    static func settings(smallestRadius: Double?, significant: Bool, significantDistance: Double) -> GeoClueSource.Settings? {
        var settings: GeoClueSource.Settings?
        if let radius = smallestRadius {
            let follow = MonitoredRegion.followDistance(radius: radius)
            settings = .init(distanceThreshold: UInt32(follow), timeThreshold: 0, accuracyLevel: radius < 2000 ? 8 : 6)
        }
        if significant {
            let distance = UInt32(min(max(significantDistance / 2, 1), 100_000))
            if var current = settings {
                current.distanceThreshold = min(current.distanceThreshold, distance)
                settings = current
            } else {
                settings = .init(distanceThreshold: distance, timeThreshold: 0, accuracyLevel: 6)
            }
        }
        return settings
    }

    // MARK: bgtaskctl apps and CheckIn

    /// Events waiting for the app without a wake (refresh was off, or its wake
    /// failed or expired): delivered when it checks in.
    func waitingEvents(for app: String) -> Int {
        events.values.reduce(0) { $0 + ($1.app == app && !inFlight.contains($1.id) ? 1 : 0) }
    }

    func describe(app: String, into description: inout [String: PluginValue]) {
        let count = monitor.count(of: app)
        let waiting = events.values.filter { $0.app == app }.count
        let counts = counters[app]
        guard count > 0 || significant[app] != nil || waiting > 0 || counts != nil else { return }
        typealias Key = LocationInterface.ApplicationKey
        description[Key.regions.rawValue] = .uint(UInt64(count))
        description[Key.significantChanges.rawValue] = .bool(significant[app] != nil)
        description[Key.waiting.rawValue] = .uint(UInt64(waiting))
        description[Key.delivered.rawValue] = .uint(counts?.delivered ?? 0)
        description[Key.offences.rawValue] = .uint(counts?.offences ?? 0)
    }
}
