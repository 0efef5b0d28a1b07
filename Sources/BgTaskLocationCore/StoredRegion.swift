public import BgTaskProtocol

/// A monitored region as the location plugin stores it, with the side the
/// device was last known to be on (so that a restart neither repeats nor
/// loses a crossing).
public struct StoredRegion: Codable, Sendable, Equatable {
    public var latitude: Double
    public var longitude: Double
    public var radius: Double
    public var notifyOnStart: Bool
    /// `inside`, `outside`, or nil while unknown.
    public var side: String?

    public init(_ region: MonitoredRegion, side: RegionBoundary.Side?) {
        latitude = region.center.latitude
        longitude = region.center.longitude
        radius = region.radius
        notifyOnStart = region.notifyOnStart
        self.side = side.map(Self.spell)
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
