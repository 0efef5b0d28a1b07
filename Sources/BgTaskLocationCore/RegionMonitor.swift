/// Every monitored region of every app, and where the device stands against
/// each: feed it fixes, get the crossings. An update looks only at the regions
/// near the fix (``RegionGrid``) and at those whose side is still open (not
/// yet known, pending, or inside, which a fix far away may leave).
///
/// Regions live in numbered slots, so an update hashes and sorts integers,
/// not the apps' and regions' names.
public struct RegionMonitor: Sendable {
    /// A region of an app.
    public struct Key: Hashable, Sendable, Comparable {
        public var app: String
        public var region: String

        public init(app: String, region: String) {
            self.app = app
            self.region = region
        }

        public static func < (lhs: Key, rhs: Key) -> Bool { (lhs.app, lhs.region) < (rhs.app, rhs.region) }
    }

    /// A crossing to deliver.
    public struct Crossing: Sendable, Equatable {
        public var key: Key
        public var event: RegionEvent
        public var time: UInt64

        public init(key: Key, event: RegionEvent, time: UInt64) {
            self.key = key
            self.event = event
            self.time = time
        }
    }

    private struct Slot: Sendable {
        var key: Key
        var region: MonitoredRegion
        var boundary = RegionBoundary()
    }

    private var slots: [Slot?] = []
    private var free: [Int] = []
    private var slotOf: [Key: Int] = [:]
    private var perApp: [String: Int] = [:]
    private var grid = RegionGrid<Int>()
    /// Slots whose side is not settled outside: looked at with every fix.
    private var open: Set<Int> = []
    /// Which update last looked at each slot (to look once per update).
    private var seen: [UInt64] = []
    private var generation: UInt64 = 0

    public init() {}

    /// How many regions `app` monitors.
    public func count(of app: String) -> Int { perApp[app] ?? 0 }

    /// The regions of `app`, by id.
    public func regions(of app: String) -> [MonitoredRegion] {
        slots.compactMap { $0 }.filter { $0.key.app == app }.sorted { $0.key < $1.key }.map(\.region)
    }

    /// Starts monitoring `region` for `app`, replacing one of the same id (its side starts unknown again).
    public mutating func add(_ region: MonitoredRegion, for app: String) {
        let key = Key(app: app, region: region.id)
        remove(region.id, for: app)
        let number: Int
        if let reused = free.popLast() {
            number = reused
            slots[number] = Slot(key: key, region: region)
        } else {
            number = slots.count
            slots.append(Slot(key: key, region: region))
            seen.append(0)
        }
        slotOf[key] = number
        perApp[app, default: 0] += 1
        grid.insert(number, center: region.center, radius: region.radius)
        open.insert(number)
    }

    /// Stops monitoring; returns whether it was monitored.
    @discardableResult
    public mutating func remove(_ id: String, for app: String) -> Bool {
        guard let number = slotOf.removeValue(forKey: Key(app: app, region: id)) else { return false }
        slots[number] = nil
        free.append(number)
        grid.remove(number)
        open.remove(number)
        perApp[app]! -= 1
        if perApp[app] == 0 { perApp[app] = nil }
        return true
    }

    /// Stops every region of `app`.
    public mutating func removeAll(for app: String) {
        for slot in slots.compactMap({ $0 }) where slot.key.app == app { remove(slot.key.region, for: app) }
    }

    /// Where the device stands against a region.
    public func boundary(_ key: Key) -> RegionBoundary? { slotOf[key].flatMap { slots[$0]?.boundary } }

    /// Takes a fix; returns the crossings it completes, in the order the regions were added.
    public mutating func update(with fix: LocationFix) -> [Crossing] {
        generation &+= 1
        var numbers: [Int] = []
        for number in grid.candidates(near: fix.coordinate) where seen[number] != generation {
            seen[number] = generation
            numbers.append(number)
        }
        for number in open where seen[number] != generation {
            seen[number] = generation
            numbers.append(number)
        }
        numbers.sort()
        var crossings: [Crossing] = []
        for number in numbers {
            guard var slot = slots[number] else { continue }
            let event = slot.boundary.update(with: fix, in: slot.region)
            store(slot, at: number)
            if let event { crossings.append(Crossing(key: slot.key, event: event, time: fix.time)) }
        }
        return crossings
    }

    /// Settles the sides that have held long enough by `now` with no fix against them.
    public mutating func settle(at now: UInt64) -> [Crossing] {
        var crossings: [Crossing] = []
        for number in open.sorted() {
            guard var slot = slots[number], slot.boundary.pending != nil else { continue }
            let event = slot.boundary.settle(at: now, in: slot.region)
            store(slot, at: number)
            if let event { crossings.append(Crossing(key: slot.key, event: event, time: now)) }
        }
        return crossings
    }

    /// The earliest time a pending side settles (to arm a timer for).
    public var nextSettle: UInt64? {
        open.compactMap { slots[$0]?.boundary.settlesAt }.min()
    }

    private mutating func store(_ slot: Slot, at number: Int) {
        let settledOutside = slot.boundary.side == .outside && slot.boundary.pending == nil
        slots[number] = slot
        // Settled outside with nothing pending: only a fix near it can change that.
        if settledOutside { open.remove(number) } else { open.insert(number) }
    }
}
