import CSystemd
import Glibc
import SDBus

/// GeoClue2 played by the benchmark on a private system bus, as fast as the
/// real service answers (no Python in the timed path): a Manager whose
/// `GetClient` hands out one Client, whose properties the daemon sets and
/// which it starts; ``move(latitude:longitude:accuracy:)`` publishes a new
/// position as GeoClue does, in a Location object and `LocationUpdated(old, new)`.
/// Two Location objects take turns, so the one the daemon reads is never
/// the one being rewritten.
final class FakeGeoClue {
    static let clientPath = "/org/freedesktop/GeoClue2/Client/1"

    let bus: Bus
    private var objects: [ExportedObject] = []
    private var positions: [(latitude: Double, longitude: Double, accuracy: Double)] = [(0, 0, 0), (0, 0, 0)]
    private var current = 0
    private var published = false
    /// Whether the daemon started the client.
    private(set) var active = false
    private(set) var distanceThreshold: UInt32 = 0
    private(set) var desktopID = ""
    /// When the daemon last read a Location object (CLOCK_MONOTONIC ns).
    private(set) var readAt: Int64 = 0

    init(address: String) throws {
        bus = try Bus.open(Bus.Address(parsing: address), description: "bench-geoclue")
        let getClient = BusMethod("GetClient", outputs: [.init("client", "o")]) { (call) throws(BusError) in
            try call.reply { (reply) throws(BusError) in try reply.appendObjectPath(Self.clientPath) }
        }
        objects.append(try bus.export(BusInterface(name: "org.freedesktop.GeoClue2.Manager", methods: [getClient]),
                                      at: "/org/freedesktop/GeoClue2/Manager"))
        let start = BusMethod("Start") { [unowned self] (call) throws(BusError) in
            active = true
            try call.reply()
        }
        let stop = BusMethod("Stop") { [unowned self] (call) throws(BusError) in
            active = false
            try call.reply()
        }
        func number(_ name: String, _ store: @escaping (UInt32) -> Void, _ read: @escaping () -> UInt32) -> BusProperty {
            BusProperty(name, "u", change: .none, getter: { (reply) throws(BusError) in try reply.append(read()) },
                        setter: { (value) throws(BusError) in store(try value.readUInt32()) })
        }
        var accuracyLevel: UInt32 = 0, timeThreshold: UInt32 = 0
        let properties = [
            BusProperty("DesktopId", "s", change: .none, getter: { [unowned self] (reply) throws(BusError) in try reply.append(desktopID) },
                        setter: { [unowned self] (value) throws(BusError) in desktopID = try value.readString() }),
            number("DistanceThreshold", { [unowned self] in distanceThreshold = $0 }, { [unowned self] in distanceThreshold }),
            number("TimeThreshold", { timeThreshold = $0 }, { timeThreshold }),
            number("RequestedAccuracyLevel", { accuracyLevel = $0 }, { accuracyLevel }),
            BusProperty("Location", "o", change: .none) { [unowned self] (reply) throws(BusError) in
                try reply.appendObjectPath(published ? Self.locationPath(current) : "/")
            },
            BusProperty("Active", "b", change: .none) { [unowned self] (reply) throws(BusError) in try reply.append(active) },
        ]
        objects.append(try bus.export(
            BusInterface(name: "org.freedesktop.GeoClue2.Client", methods: [start, stop],
                         signals: [BusSignal("LocationUpdated", [.init("old", "o"), .init("new", "o")])], properties: properties),
            at: Self.clientPath))
        for index in 0..<2 {
            func value(_ name: String, _ read: @escaping (Int) -> Double) -> BusProperty {
                BusProperty(name, "d", change: .none) { (reply) throws(BusError) in try reply.append(read(index)) }
            }
            objects.append(try bus.export(
                BusInterface(name: "org.freedesktop.GeoClue2.Location", properties: [
                    value("Latitude") { [unowned self] in
                        readAt = MonotonicTime.nanoseconds()
                        return positions[$0].latitude
                    },
                    value("Longitude") { [unowned self] in positions[$0].longitude },
                    value("Accuracy") { [unowned self] in positions[$0].accuracy },
                ]),
                at: Self.locationPath(index)))
        }
        try bus.requestName("org.freedesktop.GeoClue2")
    }

    static func locationPath(_ index: Int) -> String { "/org/freedesktop/GeoClue2/Location/\(index + 1)" }

    /// Publishes a new position and emits `LocationUpdated`; returns when it was sent (CLOCK_MONOTONIC ns).
    @discardableResult
    func move(latitude: Double, longitude: Double, accuracy: Double) throws -> Int64 {
        let old = published ? Self.locationPath(current) : "/"
        current = published ? 1 - current : 0
        positions[current] = (latitude, longitude, accuracy)
        published = true
        let signal = try bus.newSignal(path: Self.clientPath, interface: "org.freedesktop.GeoClue2.Client", member: "LocationUpdated")
        try signal.appendObjectPath(old)
        try signal.appendObjectPath(Self.locationPath(current))
        let sent = MonotonicTime.nanoseconds()
        try bus.send(signal)
        return sent
    }

    /// Dispatches everything that arrived (the daemon's calls); true if anything was.
    @discardableResult
    func process() throws -> Bool {
        var any = false
        while try bus.processPending() { any = true }
        return any
    }

    var pollDescriptor: pollfd {
        pollfd(fd: sd_bus_get_fd(bus.handle), events: Int16(truncatingIfNeeded: sd_bus_get_events(bus.handle)), revents: 0)
    }
}
