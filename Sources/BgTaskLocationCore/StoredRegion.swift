public import BgTaskProtocol

/// A monitored region as the location plugin stores it, with the side the
/// device was last known to be on (so that a restart neither repeats nor
/// loses a crossing).
///
/// A crossing that becomes an event is not written here at once: the
/// stored event says which side the device went to, and ``sequence`` tells
/// which came later. At a restart, the region events stored after the record
/// (``sideAfter(_:)``) give the side; the record catches up when an event is
/// completed. That keeps one write off the path from a fix to the app.
public struct StoredRegion: Codable, Sendable, Equatable {
    public var latitude: Double
    public var longitude: Double
    public var radius: Double
    public var notifyOnStart: Bool
    /// `inside`, `outside`, or nil while unknown.
    public var side: String?
    /// The location events' sequence number when the record was written:
    /// region events with a higher one came after it. Nil in records
    /// written before events carried sides; those had every side written.
    public var sequence: UInt64?

    public init(_ region: MonitoredRegion, side: RegionBoundary.Side?, sequence: UInt64? = nil) {
        latitude = region.center.latitude
        longitude = region.center.longitude
        radius = region.radius
        notifyOnStart = region.notifyOnStart
        self.side = side.map(Self.spell)
        self.sequence = sequence
    }

    /// The side the device is on given `events`, the stored region events of
    /// this region: the record's own, unless an event came after it (then the
    /// latest such event's side).
    public func sideAfter(_ events: [LocationEvent]) -> RegionBoundary.Side? {
        guard let sequence,
              let latest = events.filter({ $0.kind == .region && $0.sequence > sequence && $0.regionEvent != nil })
                  .max(by: { $0.sequence < $1.sequence }),
              let crossing = latest.regionEvent
        else { return boundarySide }
        return crossing == .enter ? .inside : .outside
    }

    /// The region again, checked as a client's would be (a record is no more trusted than a call).
    public func region(id: String, minimumRadius: Double) throws(BgTaskError) -> MonitoredRegion {
        try MonitoredRegion(
            validatingID: id, latitude: latitude, longitude: longitude, radius: radius, minimumRadius: minimumRadius,
            notifyOnStart: notifyOnStart)
    }

    /// The record as JSON, written by hand: JSONEncoder was a tenth of the
    /// daemon's time per crossing. JSONDecoder reads it back.
    public var json: [UInt8] {
        var text = "{\"latitude\":\(latitude),\"longitude\":\(longitude),\"radius\":\(radius),\"notifyOnStart\":\(notifyOnStart)"
        if let side { text += ",\"side\":" + JSONText.quoted(side) }
        if let sequence { text += ",\"sequence\":\(sequence)" }
        return Array((text + "}").utf8)
    }

    public var boundarySide: RegionBoundary.Side? {
        switch side {
        case "inside": .inside
        case "outside": .outside
        default: nil
        }
    }

    /// How a side is written in records and in ListRegions' `state`.
    public static func spell(_ side: RegionBoundary.Side) -> String {
        switch side {
        case .inside: LocationInterface.RegionState.inside.rawValue
        case .outside: LocationInterface.RegionState.outside.rawValue
        }
    }
}
