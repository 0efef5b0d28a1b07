import ArgumentParser
import BackgroundTasks

/// `--place NAME,LAT,LON[,RADIUS]`: a place to be told about, monitored as a
/// region whose id is its name.
struct Place: ExpressibleByArgument, Sendable, CustomStringConvertible {
    /// The radius when none is given, in metres: a building and its street.
    static let defaultRadius = 150.0

    var name: String
    var latitude: Double
    var longitude: Double
    var radius: Double

    init?(argument: String) {
        // The name may hold commas: the numbers are the last two or three fields.
        let fields = argument.split(separator: ",", omittingEmptySubsequences: false).map(String.init)
        let numbers = fields.reversed().prefix { Double($0) != nil }.count
        let count = min(numbers, 3)
        guard count >= 2, fields.count > count else { return nil }
        let values = fields.suffix(count).compactMap(Double.init)
        name = fields.dropLast(count).joined(separator: ",")
        guard !name.isEmpty else { return nil }
        latitude = values[0]
        longitude = values[1]
        radius = count == 3 ? values[2] : Self.defaultRadius
    }

    /// Why bgtaskd would refuse the place, in words; nil when it looks fine.
    /// (The daemon checks again; this only spares the user a round trip.)
    var problem: String? {
        if name.utf8.count > 256 { return "the name '\(name.prefix(20))…' is longer than 256 bytes" }
        if !latitude.isFinite || abs(latitude) > 90 { return "\(name): the latitude must be from -90 to 90" }
        if !longitude.isFinite || abs(longitude) > 180 { return "\(name): the longitude must be from -180 to 180" }
        if !radius.isFinite || radius <= 0 || radius > 100_000 { return "\(name): the radius must be more than 0 and at most 100000 m" }
        return nil
    }

    /// The region bgtaskd monitors for this place.
    var region: CircularRegion {
        CircularRegion(id: name, latitude: latitude, longitude: longitude, radius: radius)
    }

    var description: String { "\(name) (\(latitude), \(longitude), \(Int(radius.rounded())) m)" }
}
