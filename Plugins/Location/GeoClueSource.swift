import BgTaskLocationCore
import BgTaskPluginKit

/// Positions from GeoClue2 on the system bus, asked for only while wanted.
///
/// It follows GeoClue's name on the bus (NameOwnerChanged). GeoClue usually
/// runs only on demand (the bus starts it, and it exits when unused): when
/// positions are wanted and it is not on the bus, the bus is asked to start
/// it (StartServiceByName). When GeoClue starts, or comes back after going
/// away, and positions are wanted, it gets
/// a client, sets its desktop id, thresholds and accuracy, subscribes to the
/// client's `LocationUpdated` and starts it; each update's Location object is
/// read and handed on as a fix. When nothing is wanted any more the client
/// is stopped. Every step is asynchronous; a reply that arrives after the
/// situation changed (a newer attempt, GeoClue gone) is ignored by its
/// generation number. A step GeoClue refuses (its agent denies location to
/// the daemon, say, until the user allows it) is tried again after 5 s,
/// doubling to 10 minutes while it keeps failing: at ``retryAt``, which
/// the owner arms a wake for (`onRetry`) and hands to ``retryIfDue(at:)``.
final class GeoClueSource {
    /// How closely to follow the device.
    struct Settings: Equatable {
        /// Metres the device must move before GeoClue reports again.
        var distanceThreshold: UInt32
        /// Seconds GeoClue waits at least between reports (0: none).
        var timeThreshold: UInt32
        /// GeoClue's accuracy level: 4 city, 5 neighbourhood, 6 street, 8 exact.
        var accuracyLevel: UInt32
    }

    static let service = "org.freedesktop.GeoClue2"
    static let managerPath = "/org/freedesktop/GeoClue2/Manager"
    static let managerInterface = "org.freedesktop.GeoClue2.Manager"
    static let clientInterface = "org.freedesktop.GeoClue2.Client"
    static let locationInterface = "org.freedesktop.GeoClue2.Location"
    static let properties = "org.freedesktop.DBus.Properties"

    private let host: PluginHost
    private let desktopID: String
    private let onFix: (_ latitude: Double, _ longitude: Double, _ accuracy: Double) -> Void
    /// Called when ``retryAt`` changed.
    private let onRetry: () -> Void

    /// What is wanted now; nil: nothing.
    private var wanted: Settings?
    /// What the running client was set up with.
    private var applied: Settings?
    private var nameSubscription: UInt64?
    private var updateSubscription: UInt64?
    /// GeoClue's unique name while it is on the bus.
    private var owner: String?
    /// The client's object path once GetClient answered.
    private var client: String?
    /// Bumped whenever GeoClue comes or goes, or the client is dropped: replies of older steps are stale.
    private var generation = 0
    private var starting = false
    /// Whether "no system bus" was logged already (it is tried again at every change of what is wanted).
    private var toldNoBus = false
    /// GeoClue's owner asked of the bus and not yet answered.
    private var askingOwner = false
    /// A start of GeoClue asked of the bus and not yet answered.
    private var activating = false
    /// When the bus was last asked to start GeoClue (monotonic µs): one that
    /// leaves within seconds of its start is not started again at once (a
    /// GeoClue that crashes at start would be started over and over).
    private var activatedAt: UInt64?
    /// Whether "GeoClue cannot be started" was logged since GeoClue was last seen.
    private var toldNotStartable = false
    /// When a setup GeoClue refused is tried again (realtime µs); nil: none waits.
    private(set) var retryAt: UInt64? { didSet { if retryAt != oldValue { onRetry() } } }
    /// Seconds before the next retry; doubles while setups keep failing.
    private var retryDelay = GeoClueSource.firstRetryDelay
    static let firstRetryDelay = 5.0
    static let longestRetryDelay = 600.0

    init(host: PluginHost, desktopID: String, onRetry: @escaping () -> Void = {},
         onFix: @escaping (Double, Double, Double) -> Void) {
        self.host = host
        self.desktopID = desktopID
        self.onRetry = onRetry
        self.onFix = onFix
    }

    /// Tries again the setup GeoClue refused, once its time has come.
    func retryIfDue(at now: UInt64) {
        guard let retryAt, now >= retryAt else { return }
        self.retryAt = nil
        reconcile()
    }

    /// Asks for positions with `settings`, or for none (nil).
    func want(_ settings: Settings?) {
        guard settings != wanted else { return }
        wanted = settings
        // A new wish is tried at once; with none, nothing is retried.
        retryAt = nil
        if settings != nil, nameSubscription == nil { follow() }
        reconcile()
    }

    /// The system bus is back after it was lost: GeoClue is followed again
    /// if positions are wanted.
    func systemBusBack() {
        guard wanted != nil, nameSubscription == nil else { return }
        host.log(.info, "the system bus is back: following GeoClue again")
        follow()
    }

    /// Stops the client; the daemon is stopping.
    func stop() {
        wanted = nil
        reconcile()
    }

    // MARK: Following GeoClue's name

    private func follow() {
        do {
            nameSubscription = try host.subscribe(
                on: .system, sender: "org.freedesktop.DBus", path: "/org/freedesktop/DBus", interface: "org.freedesktop.DBus",
                member: "NameOwnerChanged", arg0: Self.service
            ) { [weak self] message in self?.nameOwnerChanged(message) }
        } catch {
            if !toldNoBus {
                host.log(.info, "no GeoClue: cannot reach the system bus (\(error.message)); only SimulateLocation moves the device")
                toldNoBus = true
            }
            return
        }
        toldNoBus = false
        askOwner()
    }

    private func askOwner() {
        let generation = generation
        askingOwner = true
        do {
            try host.call("org.freedesktop.DBus", path: "/org/freedesktop/DBus", interface: "org.freedesktop.DBus",
                          member: "GetNameOwner", on: .system, timeout: 10) { (call) throws(ModeError) in
                try call.append(Self.service)
            } reply: { [weak self] result in
                guard let self else { return }
                self.askingOwner = false
                guard generation == self.generation else { return }
                if case .success(let reply) = result, let name = try? reply.readString() {
                    self.appeared(name)
                } else {
                    self.activate()
                }
            }
        } catch {
            askingOwner = false
            host.log(.info, "cannot ask for GeoClue: \(error.message)")
        }
    }

    private func nameOwnerChanged(_ message: PluginMessage?) {
        guard let message else {
            // The system bus connection is gone, and our subscriptions with it.
            host.log(.warning, "lost the system bus: no positions from GeoClue until it is back")
            nameSubscription = nil
            updateSubscription = nil
            vanished()
            return
        }
        guard (try? message.readString()) == Self.service, let old = try? message.readString(),
              let new = try? message.readString() else { return }
        if !old.isEmpty { vanished() }
        if !new.isEmpty { appeared(new) }
    }

    private func appeared(_ name: String) {
        guard owner != name else { return }
        owner = name
        toldNotStartable = false
        // A GeoClue that (re)started is asked at once, with the patience of a first try.
        retryAt = nil
        retryDelay = Self.firstRetryDelay
        host.log(.info, "GeoClue is on the system bus as \(name)")
        reconcile()
    }

    private func vanished() {
        guard owner != nil || client != nil else { return }
        if owner != nil { host.log(.notice, "GeoClue left the system bus; waiting for it to come back") }
        owner = nil
        dropClient()
        // It stopped or crashed while positions are wanted: it is started
        // again, but not over and over if it keeps leaving.
        guard wanted != nil else { return }
        if let activatedAt, host.monotonicMicroseconds &- activatedAt < 10_000_000 {
            return host.log(.warning, "GeoClue left within 10 s of its start; waiting for it rather than starting it again")
        }
        activate()
    }

    /// Asks the bus to start GeoClue, if positions are wanted and it is not
    /// on the bus. Its NameOwnerChanged says when it is there.
    private func activate() {
        guard wanted != nil, owner == nil, nameSubscription != nil, !askingOwner, !activating else { return }
        activatedAt = host.monotonicMicroseconds
        activating = true
        do {
            try host.call("org.freedesktop.DBus", path: "/org/freedesktop/DBus", interface: "org.freedesktop.DBus",
                          member: "StartServiceByName", on: .system, timeout: 30) { (call) throws(ModeError) in
                try call.append(Self.service)
                try call.append(UInt32(0))
            } reply: { [weak self] result in
                guard let self else { return }
                self.activating = false
                guard case .failure(let error) = result, self.owner == nil, !self.toldNotStartable else { return }
                self.toldNotStartable = true
                self.host.log(.info, "GeoClue is not running and the system bus cannot start it (\(error.message)); waiting for it (SimulateLocation still works)")
            }
        } catch {
            activating = false
            host.log(.info, "cannot ask the system bus to start GeoClue: \(error.message)")
        }
    }

    private func dropClient() {
        generation += 1
        client = nil
        applied = nil
        starting = false
        if let id = updateSubscription {
            host.unsubscribe(id)
            updateSubscription = nil
        }
    }

    // MARK: The client

    /// Brings GeoClue's client in line with what is wanted.
    private func reconcile() {
        guard owner != nil else { return activate() }
        guard let wanted else {
            if let client { stopClient(client) }
            return
        }
        guard !starting else { return }
        guard let client else { return getClient() }
        if applied != wanted { configure(client, wanted, restart: applied != nil) }
    }

    private func getClient() {
        starting = true
        let generation = generation
        do {
            try host.call(Self.service, path: Self.managerPath, interface: Self.managerInterface, member: "GetClient",
                          on: .system, timeout: 10) { _ throws(ModeError) in
            } reply: { [weak self] result in
                guard let self, generation == self.generation else { return }
                switch result {
                case .success(let reply):
                    guard let path = try? reply.readObjectPath() else { return self.failed("GetClient answered no path") }
                    self.client = path
                    self.subscribeUpdates(path)
                    guard let wanted = self.wanted else {
                        self.starting = false
                        return self.reconcile()
                    }
                    self.configure(path, wanted, restart: false)
                case .failure(let error):
                    self.failed("GetClient: \(error.message)")
                }
            }
        } catch {
            failed("GetClient: \(error.message)")
        }
    }

    private func subscribeUpdates(_ path: String) {
        do {
            updateSubscription = try host.subscribe(
                on: .system, sender: Self.service, path: path, interface: Self.clientInterface, member: "LocationUpdated"
            ) { [weak self] message in
                guard let message else { return }
                self?.locationUpdated(message)
            }
        } catch {
            failed("cannot follow LocationUpdated: \(error.message)")
        }
    }

    /// Sets the client's properties, then (re)starts it.
    private func configure(_ path: String, _ settings: Settings, restart: Bool) {
        starting = true
        let generation = generation
        let steps: [(String, String, (PluginMessage) throws(ModeError) -> Void)] = [
            ("DesktopId", "s", { (m) throws(ModeError) in try m.append(self.desktopID) }),
            ("DistanceThreshold", "u", { (m) throws(ModeError) in try m.append(settings.distanceThreshold) }),
            ("TimeThreshold", "u", { (m) throws(ModeError) in try m.append(settings.timeThreshold) }),
            ("RequestedAccuracyLevel", "u", { (m) throws(ModeError) in try m.append(settings.accuracyLevel) }),
        ]
        var outstanding = steps.count
        var failure: String?
        for (name, type, write) in steps {
            do {
                try host.call(Self.service, path: path, interface: Self.properties, member: "Set", on: .system, timeout: 10) {
                    (call) throws(ModeError) in
                    try call.append(Self.clientInterface)
                    try call.append(name)
                    try call.container("v", type) { () throws(ModeError) in try write(call) }
                } reply: { [weak self] result in
                    guard let self, generation == self.generation else { return }
                    if case .failure(let error) = result { failure = failure ?? "setting \(name): \(error.message)" }
                    outstanding -= 1
                    guard outstanding == 0 else { return }
                    if let failure { return self.failed(failure) }
                    self.start(path, settings, restart: restart)
                }
            } catch {
                return failed("setting \(name): \(error.message)")
            }
        }
    }

    private func start(_ path: String, _ settings: Settings, restart: Bool) {
        let generation = generation
        // A new accuracy level takes effect at Start.
        let members = restart && settings.accuracyLevel != applied?.accuracyLevel ? ["Stop", "Start"] : ["Start"]
        for member in members {
            do {
                try host.call(Self.service, path: path, interface: Self.clientInterface, member: member, on: .system, timeout: 10) {
                    _ throws(ModeError) in
                } reply: { [weak self] result in
                    guard let self, generation == self.generation, member == "Start" else { return }
                    self.starting = false
                    switch result {
                    case .success:
                        self.applied = settings
                        self.retryDelay = Self.firstRetryDelay
                        self.host.log(.info, "GeoClue follows the device: every \(settings.distanceThreshold) m, accuracy level \(settings.accuracyLevel)")
                        // What is wanted may have changed meanwhile.
                        self.reconcile()
                    case .failure(let error):
                        self.failed("Start: \(error.message)")
                    }
                }
            } catch {
                return failed("\(member): \(error.message)")
            }
        }
    }

    private func stopClient(_ path: String) {
        do {
            try host.call(Self.service, path: path, interface: Self.clientInterface, member: "Stop", on: .system, timeout: 10) {
                _ throws(ModeError) in
            } reply: { _ in }
        } catch {
            host.log(.debug, "cannot stop GeoClue's client: \(error.message)")
        }
        host.log(.info, "nothing monitored: GeoClue stopped")
        dropClient()
    }

    /// A step of the setup failed: the client goes, and the setup is tried
    /// again later (said once as a warning while it keeps failing).
    private func failed(_ why: String) {
        let delay = retryDelay
        retryDelay = min(retryDelay * 2, Self.longestRetryDelay)
        host.log(delay == Self.firstRetryDelay ? .warning : .info,
                 "GeoClue: \(why); trying again in \(Int(delay)) s (until then positions come from SimulateLocation only)")
        dropClient()
        retryAt = host.realtimeMicroseconds &+ UInt64(delay * 1_000_000)
    }

    // MARK: Updates

    private func locationUpdated(_ message: PluginMessage) {
        guard (try? message.readObjectPath()) != nil, let path = try? message.readObjectPath(), path != "/" else { return }
        let generation = generation
        do {
            try host.call(Self.service, path: path, interface: Self.properties, member: "GetAll", on: .system, timeout: 10) {
                (call) throws(ModeError) in
                try call.append(Self.locationInterface)
            } reply: { [weak self] result in
                guard let self, generation == self.generation else { return }
                guard case .success(let reply) = result, let values = try? reply.readDoubles(["Latitude", "Longitude", "Accuracy"]),
                      let latitude = values[0], let longitude = values[1]
                else {
                    return self.host.log(.debug, "an unreadable GeoClue location at \(path)")
                }
                let accuracy = values[2] ?? .infinity
                self.onFix(latitude, longitude, accuracy)
            }
        } catch {
            host.log(.debug, "cannot read GeoClue's location: \(error.message)")
        }
    }
}
