import BgTaskCore
import Logging
import SDBus

// Implementation notes
//
// Four objects on the system bus feed the power state:
//
//   UPower                      org.freedesktop.UPower               /org/freedesktop/UPower
//                                 OnBattery
//   UPower's display device     org.freedesktop.UPower               /org/freedesktop/UPower/devices/DisplayDevice
//                                 Percentage, IsPresent (org.freedesktop.UPower.Device)
//   power-profiles-daemon       org.freedesktop.UPower.PowerProfiles /org/freedesktop/UPower/PowerProfiles   (≥ 0.20)
//                                 ActiveProfile
//   power-profiles-daemon       net.hadess.PowerProfiles             /net/hadess/PowerProfiles               (older)
//                                 ActiveProfile
//
// For each service the monitor adds, without blocking, a NameOwnerChanged
// match and a PropertiesChanged match per object, and then reads the service:
// GetAll on each of its objects. The matches go out first on the same
// connection, so nothing that happens after the read can be missed; a read
// that finds no owner leaves the values unknown until the name appears. Calls
// never auto-start a service: the monitor follows what runs.
//
// A read is staged and applied only when every object of the service has
// answered, so that one reply (OnBattery without the charge) never shows as a
// state of its own. A PropertiesChanged arriving while a read is staged goes
// into the staged values if that object already answered (the signal is newer),
// and is dropped if not (its reply, still to come, is newer than the signal:
// one sender's messages arrive in order). A new read replaces one in flight,
// whose replies are then ignored: on every owner change, and when a property
// is invalidated without its value.

/// Follows UPower and power-profiles-daemon on the system bus: the inputs of
/// `GetBackgroundRefreshStatus` (docs/DESIGN.md §4).
///
/// Confined to the thread of the loop it is given: create it, call
/// ``start()`` and read ``state`` there. Nothing here blocks the loop. Without
/// a system bus, or without a service, the state stays unknown (which never
/// restricts), with one info line in the log and never an error.
final class PowerMonitor {
    /// One object whose properties feed the state.
    private struct Watched {
        let service: String
        let path: String
        let interface: String
    }

    /// A read of one service in flight: the replies so far.
    private struct Read {
        let serial: Int
        var outstanding: Int
        var staged: [String: [String: BusValue]] = [:]
        /// Whether the service answered at all (not: nobody owns the name).
        var answered = false
    }

    static let upower = "org.freedesktop.UPower"
    static let powerProfiles = "org.freedesktop.UPower.PowerProfiles"
    static let legacyPowerProfiles = "net.hadess.PowerProfiles"

    private static let upowerObject = Watched(service: upower, path: "/org/freedesktop/UPower", interface: upower)
    private static let displayDevice = Watched(
        service: upower, path: "/org/freedesktop/UPower/devices/DisplayDevice", interface: "org.freedesktop.UPower.Device")
    private static let profilesObject = Watched(
        service: powerProfiles, path: "/org/freedesktop/UPower/PowerProfiles", interface: powerProfiles)
    private static let legacyProfilesObject = Watched(
        service: legacyPowerProfiles, path: "/net/hadess/PowerProfiles", interface: legacyPowerProfiles)
    private static let watched = [upowerObject, displayDevice, profilesObject, legacyProfilesObject]
    /// Services in the order they are reported.
    private static let services = [upower, powerProfiles, legacyPowerProfiles]

    /// How long a property read may take before it counts as failed (µs).
    private static let callTimeout: UInt64 = 10_000_000

    private let address: Bus.Address
    private let loop: EventLoop
    private let logger: Logger
    private var bus: Bus?
    private var slots: [Slot] = []
    /// The last known properties of each watched object, by path.
    private var properties: [String: [String: BusValue]] = [:]
    /// The read in flight per service.
    private var reads: [String: Read] = [:]
    private var nextSerial = 0
    /// Per service: whether it is on the bus, as far as the monitor knows.
    private var present: [String: Bool] = [:]
    /// Services whose first read has not finished; the summary is logged when none is left.
    private var awaitingFirstRead: Set<String> = []

    /// What the power sources report now; unknown until they answer.
    private(set) var state = PowerState.unknown

    /// Called on the loop's thread whenever ``state`` really changes.
    var onChange: (PowerState) -> Void = { _ in }

    /// Follows the services again once a system bus that went away is back.
    private lazy var reconnection = SystemBusReconnection(loop: loop) { [unowned self] in
        guard self.bus == nil else { return true }
        guard self.follow(quietly: true) else { return false }
        self.logger.notice("the system bus is back: following power sources again")
        return true
    }

    /// `systemBus` is normally `.system` (`$DBUS_SYSTEM_BUS_ADDRESS`, else the
    /// standard socket); nothing connects before ``start()``.
    init(systemBus: Bus.Address, loop: EventLoop, logger: Logger) {
        address = systemBus
        self.loop = loop
        self.logger = logger
    }

    /// Connects to the system bus, attaches the connection to the loop, and
    /// starts reading and following the services. Call once.
    func start() {
        guard bus == nil else { return }
        _ = follow(quietly: false)
    }

    /// Connects and follows the services; false when there is no system bus
    /// (said in the log unless `quietly`, as reconnection attempts are).
    private func follow(quietly: Bool) -> Bool {
        let bus: Bus
        do throws(BusError) {
            bus = try Bus.open(address, description: "bgtaskd-power")
            try bus.attach(to: loop)
        } catch {
            if !quietly {
                logger.info(
                    "no system bus: power state unknown, Background App Refresh is not restricted by power",
                    metadata: ["bus": "\(address)", "error": "\(error.message)"])
            }
            return false
        }
        self.bus = bus
        do throws(BusError) {
            // A system bus that goes away leaves the state unknown, as if it had never been there.
            slots.append(try bus.addMatch(
                "type='signal',path='/org/freedesktop/DBus/Local',interface='org.freedesktop.DBus.Local',member='Disconnected'"
            ) { [weak self] _ in self?.disconnected() })
            for service in Self.services {
                slots.append(try bus.addMatch(
                    "type='signal',sender='org.freedesktop.DBus',path='/org/freedesktop/DBus',"
                        + "interface='org.freedesktop.DBus',member='NameOwnerChanged',arg0='\(service)'"
                ) { [weak self] message in self?.nameOwnerChanged(message) })
            }
            for object in Self.watched {
                slots.append(try bus.addMatch(
                    "type='signal',sender='\(object.service)',path='\(object.path)',"
                        + "interface='org.freedesktop.DBus.Properties',member='PropertiesChanged',arg0='\(object.interface)'"
                ) { [weak self] message in self?.propertiesChanged(object, message) })
            }
        } catch {
            logger.info(
                "cannot follow the system bus: power state unknown, Background App Refresh is not restricted by power",
                metadata: ["error": "\(error.message)"])
            slots.removeAll()
            self.bus = nil
            // Nothing is followed: a reconnection tries again.
            return false
        }
        awaitingFirstRead = Set(Self.services)
        for service in Self.services { read(service) }
        return true
    }

    // MARK: Reading

    /// Reads every object of `service` (GetAll), replacing any read in flight.
    private func read(_ service: String) {
        let objects = Self.watched.filter { $0.service == service }
        nextSerial += 1
        let serial = nextSerial
        reads[service] = Read(serial: serial, outstanding: objects.count)
        for object in objects {
            getAll(object) { [weak self] result in
                self?.replied(object, serial: serial, result)
            }
        }
    }

    /// GetAll on one object, without auto-starting its service.
    private func getAll(_ object: Watched, _ completion: @escaping (Result<Message, BusError>) -> Void) {
        do throws(BusError) {
            guard let bus else { throw BusError.failed("not connected") }
            let call = try bus.newMethodCall(
                destination: object.service, path: object.path,
                interface: "org.freedesktop.DBus.Properties", member: "GetAll")
            // Follow what runs; never start a service by asking it.
            call.setAutoStart(false)
            try call.append(object.interface)
            try bus.callAsync(call, timeout: Self.callTimeout, completion)
        } catch {
            // Answer after this callback, as a reply would.
            loop.later { completion(.failure(error)) }
        }
    }

    private func replied(_ object: Watched, serial: Int, _ result: Result<Message, BusError>) {
        guard var read = reads[object.service], read.serial == serial else { return }
        switch result {
        case .success(let reply):
            read.answered = true
            do throws(BusError) {
                read.staged[object.path] = try reply.readOptions()
            } catch {
                logger.debug("unreadable properties", metadata: ["path": "\(object.path)", "error": "\(error)"])
            }
        case .failure(let error):
            if !Self.isAbsent(error) {
                read.answered = true
                logger.debug("cannot read properties", metadata: ["path": "\(object.path)", "error": "\(error)"])
            }
        }
        read.outstanding -= 1
        guard read.outstanding == 0 else {
            reads[object.service] = read
            return
        }
        reads[object.service] = nil
        for watched in Self.watched where watched.service == object.service {
            properties[watched.path] = read.staged[watched.path]
        }
        if read.answered { present[object.service] = true }
        update()
        firstReadFinished(object.service)
    }

    /// Whether an error only says that nobody owns the name.
    private static func isAbsent(_ error: BusError) -> Bool {
        error.name == "org.freedesktop.DBus.Error.ServiceUnknown" || error.name == "org.freedesktop.DBus.Error.NameHasNoOwner"
    }

    /// Logs one summary line once every service's first read finished.
    private func firstReadFinished(_ service: String) {
        guard awaitingFirstRead.remove(service) != nil, awaitingFirstRead.isEmpty else { return }
        let upower = present[Self.upower] == true
        let profiles = [Self.powerProfiles, Self.legacyPowerProfiles].filter { present[$0] == true }
        logger.info("following power sources: \(state)", metadata: [
            "upower": "\(upower ? "present" : "absent (battery state unknown)")",
            "power-profiles": "\(profiles.isEmpty ? "absent (power saver unknown)" : profiles.joined(separator: ","))",
        ])
    }

    // MARK: Following

    private func nameOwnerChanged(_ message: Message) {
        let name: String
        let newOwner: String
        do throws(BusError) {
            name = try message.readString()
            _ = try message.readString()
            newOwner = try message.readString()
        } catch {
            return
        }
        guard Self.services.contains(name) else { return }
        reads[name] = nil
        for object in Self.watched where object.service == name { properties[object.path] = nil }
        if newOwner.isEmpty {
            if present[name] == true { logger.info("\(name) left the system bus") }
            present[name] = false
            update()
            firstReadFinished(name)
        } else {
            logger.info("\(name) appeared on the system bus", metadata: ["owner": "\(newOwner)"])
            present[name] = true
            update()
            read(name)
        }
    }

    private func propertiesChanged(_ object: Watched, _ message: Message) {
        let changed: [String: BusValue]
        var invalidated: [String] = []
        do throws(BusError) {
            guard try message.readString() == object.interface else { return }
            changed = try message.readOptions()
            if case .array(_, let names)? = try message.readValue() {
                invalidated = names.compactMap { if case .string(let name) = $0 { name } else { nil } }
            }
        } catch {
            logger.debug("malformed PropertiesChanged", metadata: ["path": "\(object.path)", "error": "\(error)"])
            return
        }
        if !invalidated.isEmpty {
            // A property changed without its value: read the service again.
            read(object.service)
            return
        }
        if var read = reads[object.service] {
            // See the notes above: newer than a staged reply, older than one still to come.
            guard read.staged[object.path] != nil else { return }
            read.staged[object.path]?.merge(changed) { $1 }
            reads[object.service] = read
            return
        }
        properties[object.path, default: [:]].merge(changed) { $1 }
        present[object.service] = true
        update()
    }

    private func disconnected() {
        logger.info("the system bus went away: power state unknown")
        properties.removeAll()
        present.removeAll()
        reads.removeAll()
        update()
        reconnection.lost(bus, slots)
        slots.removeAll()
        bus = nil
    }

    // MARK: State

    /// Derives the state from the known properties; reports real changes.
    private func update() {
        let new = derive()
        guard new != state else { return }
        state = new
        logger.debug("power state changed: \(new)")
        onChange(new)
    }

    private func derive() -> PowerState {
        var result = PowerState.unknown
        if case .bool(let onBattery)? = properties[Self.upowerObject.path]?["OnBattery"] {
            result.onBattery = onBattery
        }
        let display = properties[Self.displayDevice.path] ?? [:]
        if case .bool(true)? = display["IsPresent"], case .double(let percent)? = display["Percentage"], percent.isFinite {
            result.batteryPercent = min(max(percent, 0), 100)
        }
        // Newer name first; a daemon ≥ 0.20 owns both and they agree.
        for object in [Self.profilesObject, Self.legacyProfilesObject] {
            if case .string(let profile)? = properties[object.path]?["ActiveProfile"] {
                result.powerSaver = profile == "power-saver"
                break
            }
        }
        return result
    }
}
