import BgTaskLocationCore

/// The position last reported to an app following significant changes, as
/// stored (nil before the first report).
struct StoredFix: Codable {
    var latitude: Double?
    var longitude: Double?
    var accuracy: Double?
    var time: UInt64?

    init(_ fix: LocationFix?) {
        latitude = fix?.coordinate.latitude
        longitude = fix?.coordinate.longitude
        accuracy = fix.map { $0.accuracy.isFinite ? $0.accuracy : -1 }
        time = fix?.time
    }

    /// The fix again, if one was stored and it is a position at all.
    var fix: LocationFix? {
        guard let latitude, let longitude, let accuracy, let time,
              let coordinate = try? GeoCoordinate(validatingLatitude: latitude, longitude: longitude) else { return nil }
        return LocationFix(coordinate: coordinate, accuracy: accuracy, time: time)
    }
}
