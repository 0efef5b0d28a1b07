import CBgTaskShim
import Glibc
import Logging
import SDBus

// Implementation notes
//
// logind (org.freedesktop.login1 on the system bus) tells of a suspend with
// PrepareForSleep(true) just before, and PrepareForSleep(false) after the
// resume. A `delay` inhibitor for `sleep` — an fd from
// Manager.Inhibit("sleep", "bgtaskd", why, "delay") — makes logind wait,
// up to InhibitDelayMaxUSec (5 s by default), until every such fd is closed:
// the daemon takes one at start (unless logind is preparing for sleep then)
// and after every resume, and closes it once the background apps are frozen
// and the state is on disk; none is taken or kept between PrepareForSleep
// (true) and (false).
//
// The monitor follows logind's name: matches for NameOwnerChanged and
// PrepareForSleep go out first, then the name is looked up; when logind
// appears (or restarts) a new lock is taken, when it goes away the lock is
// dropped and the owner is told. Without a system bus or without logind
// nothing happens here, and SimulateSleep/SimulateWake drive the same path.

/// Follows logind: the sleep delay lock, and PrepareForSleep.
final class LogindMonitor {
    static let service = "org.freedesktop.login1"
    static let path = "/org/freedesktop/login1"
    static let interface = "org.freedesktop.login1.Manager"
    /// What logind shows as the reason of the lock (`systemd-inhibit --list`).
    static let why = "Freezing background apps and saving their state"
    private static let callTimeout: UInt64 = 10_000_000

    private let address: Bus.Address
    private let loop: EventLoop
    private let logger: Logger
    private var bus: Bus?
    private var slots: [Slot] = []
    /// The delay lock, -1 when none is held.
    private(set) var inhibitor: Int32 = -1
    /// Whether logind is on the bus, as far as known.
    private(set) var isPresent = false
    /// Whether logind said the machine goes to sleep (PrepareForSleep(true),
    /// or its PreparingForSleep property when it was found) and has not said
    /// it resumed. No lock is taken then: one would hold up the sleep under
    /// way; the resume takes a new one.
    private(set) var isPreparingForSleep = false
    /// logind's InhibitDelayMaxUSec: how long it waits for delay locks (µs).
    private(set) var delayMax: UInt64 = 5_000_000
    /// A request for a lock in flight (one at a time).
    private var inhibiting = false
    /// Changes whenever logind appears or leaves: an answer from a logind
    /// that has gone since is not a lock of the present one.
    private var presence: UInt64 = 0
    /// Asks again after a refused or failed request, while logind is there.
    private var retryTimer: SDBus.Timer?
    private static let retryDelay: UInt64 = 2_000_000
    private static let longestRetryDelay: UInt64 = 60_000_000
    /// The next wait before asking again: 2 s, doubling to a minute while
    /// logind keeps refusing (a warning every 2 s was 1,800 lines an hour).
    private var nextRetryDelay = LogindMonitor.retryDelay
    /// Follows logind again once a system bus that went away is back.
    private lazy var reconnection = SystemBusReconnection(loop: loop) { [unowned self] in self.connect() }

    /// PrepareForSleep(true) (going to sleep) or (false) (resumed).
    var onPrepareForSleep: (Bool) -> Void = { _ in }
    /// logind left the bus.
    var onVanished: () -> Void = {}

    init(systemBus: Bus.Address, loop: EventLoop, logger: Logger) {
        address = systemBus
        self.loop = loop
        self.logger = logger
    }

    deinit { releaseInhibitor() }

    /// Connects to the system bus and follows logind. Call once.
    func start() {
        guard bus == nil else { return }
        if let error = connectionError() {
            logger.info("no logind (no system bus): sleep is only what SimulateSleep and SimulateWake say",
                        metadata: ["error": "\(error.message)"])
        }
    }

    /// Connects again after the system bus went away; true when it could.
    private func connect() -> Bool {
        guard bus == nil else { return true }
        guard connectionError() == nil else { return false }
        logger.notice("the system bus is back: following logind again")
        return true
    }

    /// Connects and follows logind; why it could not, or nil.
    private func connectionError() -> BusError? {
        let bus: Bus
        var slots: [Slot] = []
        do throws(BusError) {
            bus = try Bus.open(address, description: "bgtaskd-logind")
            try bus.attach(to: loop)
            // A system bus that goes away takes logind with it (a crashed bus
            // daemon sends no NameOwnerChanged): that counts as logind leaving.
            slots.append(try bus.addMatch(
                "type='signal',path='/org/freedesktop/DBus/Local',interface='org.freedesktop.DBus.Local',member='Disconnected'"
            ) { [weak self] _ in self?.disconnected() })
            slots.append(try bus.addMatch(
                "type='signal',sender='org.freedesktop.DBus',path='/org/freedesktop/DBus',"
                    + "interface='org.freedesktop.DBus',member='NameOwnerChanged',arg0='\(Self.service)'"
            ) { [weak self] message in self?.nameOwnerChanged(message) })
            slots.append(try bus.addMatch(
                "type='signal',sender='\(Self.service)',path='\(Self.path)',interface='\(Self.interface)',member='PrepareForSleep'"
            ) { [weak self] message in
                guard let self, let sleeping = try? message.readBool() else { return }
                isPreparingForSleep = sleeping
                onPrepareForSleep(sleeping)
            })
        } catch {
            return error
        }
        self.bus = bus
        self.slots = slots
        lookUp()
        return nil
    }

    /// The system bus went away: logind with it, and bgtaskd connects again once it is back.
    private func disconnected() {
        logger.warning("the system bus went away: logind is gone with it; connecting again when it is back")
        retryTimer?.arm(at: nil)
        // An Inhibit in flight on the old connection answers nothing now.
        inhibiting = false
        presence &+= 1
        setPresent(false)
        reconnection.lost(bus, slots)
        slots.removeAll()
        bus = nil
    }

    /// Drops the lock and the bus (at shutdown).
    func stop() {
        retryTimer?.arm(at: nil)
        reconnection.cancel()
        releaseInhibitor()
        slots.removeAll()
        bus = nil
    }

    /// Takes a delay lock, unless one is held or being asked for, or logind
    /// prepares for sleep.
    func takeInhibitor() {
        guard let bus, isPresent, inhibitor < 0, !inhibiting, !isPreparingForSleep else { return }
        inhibiting = true
        let asked = presence
        do throws(BusError) {
            let call = try bus.newMethodCall(
                destination: Self.service, path: Self.path, interface: Self.interface, member: "Inhibit")
            try call.append("sleep")
            try call.append("bgtaskd")
            try call.append(Self.why)
            try call.append("delay")
            try bus.callAsync(call, timeout: Self.callTimeout) { [weak self] result in self?.inhibited(result, asked: asked) }
        } catch {
            inhibiting = false
            logger.warning("cannot ask logind for a sleep delay lock: \(error.message)")
            retryLater()
        }
    }

    /// Closes the delay lock: logind may go on with the sleep.
    @discardableResult
    func releaseInhibitor() -> Bool {
        guard inhibitor >= 0 else { return false }
        close(inhibitor)
        inhibitor = -1
        return true
    }

    // MARK: Replies and signals

    private func inhibited(_ result: Result<Message, BusError>, asked: UInt64) {
        inhibiting = false
        // The logind that answered is gone (or was replaced) since: ask the present one.
        guard asked == presence, isPresent else {
            if case .success(let reply) = result, let fd = try? reply.readUnixFD() { close(fd) }
            takeInhibitor()
            return
        }
        // Asked before logind said the machine goes to sleep: the lock would
        // hold that sleep up until logind gave up waiting. The resume asks again.
        if isPreparingForSleep {
            if case .success(let reply) = result, let fd = try? reply.readUnixFD() {
                close(fd)
                logger.info("dropped the sleep delay lock logind granted after it said the machine goes to sleep; taking one at the resume")
            }
            return
        }
        switch result {
        case .success(let reply):
            do throws(BusError) {
                let fd = try reply.readUnixFD()
                if inhibitor >= 0 { close(inhibitor) }
                inhibitor = fd
                nextRetryDelay = Self.retryDelay
                logger.info("took logind's sleep delay lock")
            } catch {
                logger.warning("logind's Inhibit answered without a lock: \(error.message)")
                retryLater()
            }
        case .failure(let error):
            logger.warning("logind refused a sleep delay lock: \(error.message); asking again in \(nextRetryDelay / 1_000_000) s")
            retryLater()
        }
    }

    private func retryLater() {
        if retryTimer == nil { retryTimer = try? loop.makeTimer { [weak self] in self?.takeInhibitor() } }
        retryTimer?.arm(at: bgt_monotonic_usec() + nextRetryDelay)
        nextRetryDelay = min(nextRetryDelay * 2, Self.longestRetryDelay)
    }

    private func nameOwnerChanged(_ message: Message) {
        guard (try? message.readString()) == Self.service, (try? message.readString()) != nil,
              let owner = try? message.readString() else { return }
        setPresent(!owner.isEmpty)
    }

    private func lookUp() {
        guard let bus else { return }
        do throws(BusError) {
            let call = try bus.newMethodCall(
                destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus",
                interface: "org.freedesktop.DBus", member: "NameHasOwner")
            try call.append(Self.service)
            try bus.callAsync(call, timeout: Self.callTimeout) { [weak self] result in
                guard let self else { return }
                let present = (try? result.get().readBool()) ?? false
                if !present { self.logger.info("no logind on the system bus (yet): sleep is only what SimulateSleep and SimulateWake say") }
                self.setPresent(present)
            }
        } catch {
            logger.warning("cannot look for logind: \(error.message)")
        }
    }

    private func setPresent(_ present: Bool) {
        let was = isPresent
        // A logind that comes or goes is asked afresh.
        nextRetryDelay = Self.retryDelay
        isPresent = present
        isPreparingForSleep = false
        if present || was { presence &+= 1 }
        if present {
            // A logind that restarted forgot the old lock: take a new one.
            if was { releaseInhibitor() }
            readDelayMax()
            readPreparingForSleep()
        } else if was {
            releaseInhibitor()
            logger.notice("logind left the system bus: no sleep delay lock")
            onVanished()
        }
    }

    /// Whether logind prepares for sleep already (bgtaskd started, or logind
    /// came back, between its PrepareForSleep(true) and (false)): then that
    /// is a sleep like any other; else a lock is taken.
    private func readPreparingForSleep() {
        let asked = presence
        let sent = readProperty("PreparingForSleep") { [weak self] value in
            guard case .bool(let preparing)? = value else { self?.found(preparingForSleep: false, asked: asked); return }
            self?.found(preparingForSleep: preparing, asked: asked)
        }
        if !sent { found(preparingForSleep: false, asked: asked) }
    }

    private func found(preparingForSleep preparing: Bool, asked: UInt64) {
        // Another logind since, or PrepareForSleep came first and said more.
        guard asked == presence, isPresent, !isPreparingForSleep else { return }
        if preparing {
            isPreparingForSleep = true
            logger.notice("logind is preparing for sleep (PreparingForSleep): the machine counts as going to sleep")
            onPrepareForSleep(true)
        } else {
            logger.info("logind is on the system bus: bgtaskd takes a sleep delay lock")
            takeInhibitor()
        }
    }

    private func readDelayMax() {
        readProperty("InhibitDelayMaxUSec") { [weak self] value in
            guard let self else { return }
            guard case .uint64(let usec)? = value else {
                logger.info("logind does not say how long it waits for delay locks (InhibitDelayMaxUSec); assuming \(delayMax / 1000) ms")
                return
            }
            delayMax = usec
            logger.info("logind waits up to \(usec / 1000) ms for delay locks (InhibitDelayMaxUSec)")
        }
    }

    /// Asks logind's Manager for a property; `answer` gets its value, nil
    /// when logind did not give one. False (logged) when the call could not go out.
    @discardableResult
    private func readProperty(_ name: String, _ answer: @escaping (BusValue?) -> Void) -> Bool {
        guard let bus else { return false }
        do throws(BusError) {
            let call = try bus.newMethodCall(
                destination: Self.service, path: Self.path, interface: "org.freedesktop.DBus.Properties", member: "Get")
            try call.append(Self.interface)
            try call.append(name)
            try bus.callAsync(call, timeout: Self.callTimeout) { result in
                answer((try? result.get()).flatMap { try? $0.readValue() }?.unwrapped)
            }
            return true
        } catch {
            logger.debug("cannot read \(name): \(error.message)")
            return false
        }
    }
}
