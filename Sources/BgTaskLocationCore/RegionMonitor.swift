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
    /// Regions whose side changed (with an event or without: the first side
    /// to hold, unannounced), since ``drainSideChanges()``: what to persist.
    private var sideChanges: [(key: Key, side: RegionBoundary.Side, previous: RegionBoundary.Side?)] = []

    /// How long a side must hold before it counts (realtime µs).
    public let dwell: UInt64

    public init(dwell: UInt64 = RegionBoundary.dwell) {
        self.dwell = dwell
    }

    /// How many regions `app` monitors.
    public func count(of app: String) -> Int { perApp[app] ?? 0 }

    /// The regions of `app`, by id.
    public func regions(of app: String) -> [MonitoredRegion] {
        slots.compactMap { $0 }.filter { $0.key.app == app }.sorted { $0.key < $1.key }.map(\.region)
    }

    /// Starts monitoring `region` for `app`, replacing one of the same id;
    /// its side starts as `side` (unknown, unless restored).
    public mutating func add(_ region: MonitoredRegion, for app: String, side: RegionBoundary.Side? = nil) {
        let key = Key(app: app, region: region.id)
        remove(region.id, for: app)
        let number: Int
        if let reused = free.popLast() {
            number = reused
            slots[number] = Slot(key: key, region: region, boundary: RegionBoundary(side: side))
        } else {
            number = slots.count
            slots.append(Slot(key: key, region: region, boundary: RegionBoundary(side: side)))
            seen.append(0)
        }
        slotOf[key] = number
        perApp[app, default: 0] += 1
        grid.insert(number, center: region.center, radius: region.radius)
        if side == .outside { open.remove(number) } else { open.insert(number) }
    }

    /// Puts a region's side back to `side` with nothing pending (a crossing
    /// whose event could not be stored is undone, to be seen again). An
    /// undo: the side is what is stored already, so it is not noted as a
    /// change (noted, a later batch wrote it again and undid it wrongly).
    public mutating func reset(_ key: Key, to side: RegionBoundary.Side?) {
        guard let number = slotOf[key], var slot = slots[number] else { return }
        slot.boundary = RegionBoundary(side: side)
        store(slot, at: number, before: side)
    }

    /// Every monitored region, by app and id, with the side that counts.
    public var all: [(key: Key, region: MonitoredRegion, side: RegionBoundary.Side?)] {
        slots.compactMap { $0 }.sorted { $0.key < $1.key }.map { ($0.key, $0.region, $0.boundary.side) }
    }

    /// The apps with at least one region.
    public var apps: [String] { Array(perApp.keys) }

    /// How many regions are monitored in all.
    public var count: Int { slotOf.count }

    /// The smallest radius monitored (metres), to choose how closely to follow the device.
    public var smallestRadius: Double? { slots.compactMap { $0?.region.radius }.min() }

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
            let before = slot.boundary.side
            let event = slot.boundary.update(with: fix, in: slot.region, dwell: dwell)
            store(slot, at: number, before: before)
            if let event { crossings.append(Crossing(key: slot.key, event: event, time: fix.time)) }
        }
        return crossings
    }

    /// Takes a fix for one region only (the position known when it was
    /// added); returns the crossing it completes, if any.
    public mutating func update(_ key: Key, with fix: LocationFix) -> Crossing? {
        guard let number = slotOf[key], var slot = slots[number] else { return nil }
        let before = slot.boundary.side
        let event = slot.boundary.update(with: fix, in: slot.region, dwell: dwell)
        store(slot, at: number, before: before)
        return event.map { Crossing(key: key, event: $0, time: fix.time) }
    }

    /// The region monitored under `key`.
    public func region(_ key: Key) -> MonitoredRegion? { slotOf[key].flatMap { slots[$0]?.region } }

    /// Settles the sides that have held long enough by `now` with no fix against them.
    public mutating func settle(at now: UInt64) -> [Crossing] {
        var crossings: [Crossing] = []
        for number in open.sorted() {
            guard var slot = slots[number], slot.boundary.pending != nil else { continue }
            let before = slot.boundary.side
            let event = slot.boundary.settle(at: now, in: slot.region, dwell: dwell)
            store(slot, at: number, before: before)
            if let event { crossings.append(Crossing(key: slot.key, event: event, time: now)) }
        }
        return crossings
    }

    /// The earliest time a pending side settles (to arm a timer for).
    public var nextSettle: UInt64? {
        // A loop, not compactMap + min: this runs on every fix, and needs no array.
        var earliest: UInt64?
        for slot in open {
            if let at = slots[slot]?.boundary.settlesAt(dwell: dwell), earliest.map({ at < $0 }) ?? true { earliest = at }
        }
        return earliest
    }

    /// The regions whose side changed since the last call, oldest first,
    /// with the side before (to persist them, or to undo them).
    public mutating func drainSideChanges() -> [(key: Key, side: RegionBoundary.Side, previous: RegionBoundary.Side?)] {
        defer { sideChanges.removeAll(keepingCapacity: true) }
        return sideChanges
    }

    /// Puts a slot back after its boundary changed from side `before`.
    private mutating func store(_ slot: Slot, at number: Int, before: RegionBoundary.Side?) {
        if let side = slot.boundary.side, side != before {
            sideChanges.append((slot.key, side, before))
        }
        let settledOutside = slot.boundary.side == .outside && slot.boundary.pending == nil
        slots[number] = slot
        // Settled outside with nothing pending: only a fix near it can change that.
        if settledOutside { open.remove(number) } else { open.insert(number) }
    }
}
