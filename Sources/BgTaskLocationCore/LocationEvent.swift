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
        // Built as bytes: this runs on every crossing's path to the app.
        var out: [UInt8] = []
        out.reserveCapacity(192 + id.utf8.count + app.utf8.count + (region?.utf8.count ?? 0))
        out.append(contentsOf: #"{"id":"#.utf8)
        JSONText.appendQuoted(id, to: &out)
        out.append(contentsOf: #","app":"#.utf8)
        JSONText.appendQuoted(app, to: &out)
        out.append(contentsOf: #","kind":""#.utf8)
        out.append(contentsOf: kind.rawValue.utf8)
        out.append(UInt8(ascii: "\""))
        if let region {
            out.append(contentsOf: #","region":"#.utf8)
            JSONText.appendQuoted(region, to: &out)
        }
        if let crossing {
            out.append(contentsOf: #","crossing":"#.utf8)
            JSONText.appendQuoted(crossing, to: &out)
        }
        func number(_ name: String, _ value: String) {
            out.append(contentsOf: name.utf8)
            out.append(contentsOf: value.utf8)
        }
        number(#","latitude":"#, latitude.description)
        number(#","longitude":"#, longitude.description)
        number(#","accuracy":"#, accuracy.description)
        number(#","time":"#, time.description)
        number(#","sequence":"#, sequence.description)
        out.append(UInt8(ascii: "}"))
        return out
    }

    /// The crossing, when it is a region event.
    public var regionEvent: RegionEvent? { crossing.flatMap(RegionEvent.init(rawValue:)) }
}
