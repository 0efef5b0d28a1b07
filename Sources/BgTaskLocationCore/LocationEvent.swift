public import BgTaskProtocol

/// An event for an app, as the location plugin stores it until the app
/// completes it: a region crossed, or a significant change of position.
public struct LocationEvent: Codable, Sendable, Equatable {
    public enum Kind: String, Codable, Sendable {
        case region
        case significant
    }

    /// Unique, ordered by creation within one run (`l<time hex>-<sequence>`).
    public var id: String
    public var app: String
    public var kind: Kind
    /// The region crossed and how (`kind == .region`).
    public var region: String?
    public var crossing: String?
    /// Where the device was (the fix that completed the event).
    public var latitude: Double
    public var longitude: Double
    public var accuracy: Double
    /// When it happened, realtime µs.
    public var time: UInt64
    /// Orders events; highest seen continues after a restart.
    public var sequence: UInt64

    public init(
        id: String, app: String, kind: Kind, region: String? = nil, crossing: RegionEvent? = nil, fix: LocationFix,
        sequence: UInt64
    ) {
        self.id = id
        self.app = app
        self.kind = kind
        self.region = region
        self.crossing = crossing?.rawValue
        latitude = fix.coordinate.latitude
        longitude = fix.coordinate.longitude
        // JSON has no infinity: an unknown accuracy is stored as -1.
        accuracy = fix.accuracy.isFinite ? fix.accuracy : -1
        time = fix.time
        self.sequence = sequence
    }

    /// The record as JSON, written by hand (as ``StoredRegion/json``); JSONDecoder reads it back.
    public var json: [UInt8] {
        var text = "{\"id\":" + JSONText.quoted(id) + ",\"app\":" + JSONText.quoted(app) + ",\"kind\":\"\(kind.rawValue)\""
        if let region { text += ",\"region\":" + JSONText.quoted(region) }
        if let crossing { text += ",\"crossing\":" + JSONText.quoted(crossing) }
        text += ",\"latitude\":\(latitude),\"longitude\":\(longitude),\"accuracy\":\(accuracy),\"time\":\(time),\"sequence\":\(sequence)}"
        return Array(text.utf8)
    }

    /// The crossing, when it is a region event.
    public var regionEvent: RegionEvent? { crossing.flatMap(RegionEvent.init(rawValue:)) }
}
