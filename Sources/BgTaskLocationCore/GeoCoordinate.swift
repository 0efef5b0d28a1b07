public import BgTaskProtocol
import Foundation

/// A position on the Earth, in WGS84 degrees.
public struct GeoCoordinate: Sendable, Hashable, CustomStringConvertible {
    public let latitude: Double
    public let longitude: Double

    /// The Earth's mean radius in metres (IUGG), for distances.
    public static let earthRadius = 6_371_008.8

    /// A coordinate from a client: throws `InvalidArgs` unless latitude is in
    /// −90…90 and longitude in −180…180 (both finite).
    public init(validatingLatitude latitude: Double, longitude: Double) throws(BgTaskError) {
        guard latitude.isFinite, (-90...90).contains(latitude) else {
            throw .invalidArgs("latitude \(latitude) is not in -90…90")
        }
        guard longitude.isFinite, (-180...180).contains(longitude) else {
            throw .invalidArgs("longitude \(longitude) is not in -180…180")
        }
        self.latitude = latitude
        self.longitude = longitude
    }

    /// A coordinate known to be valid (from a checked source).
    public init(latitude: Double, longitude: Double) {
        self.latitude = latitude
        self.longitude = longitude
    }

    /// The great-circle distance to `other` in metres (haversine: accurate to
    /// well under a metre at the distances regions care about).
    public func distance(to other: GeoCoordinate) -> Double {
        let φ1 = latitude * .pi / 180, φ2 = other.latitude * .pi / 180
        let dφ = φ2 - φ1, dλ = (other.longitude - longitude) * .pi / 180
        let a = sin(dφ / 2) * sin(dφ / 2) + cos(φ1) * cos(φ2) * sin(dλ / 2) * sin(dλ / 2)
        return 2 * Self.earthRadius * asin(min(1, a.squareRoot()))
    }

    /// The coordinate `metres` away towards `bearing` (degrees clockwise from north).
    public func moved(metres: Double, bearing: Double) -> GeoCoordinate {
        let δ = metres / Self.earthRadius, θ = bearing * .pi / 180
        let φ1 = latitude * .pi / 180, λ1 = longitude * .pi / 180
        let φ2 = asin(sin(φ1) * cos(δ) + cos(φ1) * sin(δ) * cos(θ))
        let λ2 = λ1 + atan2(sin(θ) * sin(δ) * cos(φ1), cos(δ) - sin(φ1) * sin(φ2))
        var longitude = λ2 * 180 / .pi
        longitude = (longitude + 540).truncatingRemainder(dividingBy: 360) - 180
        return GeoCoordinate(latitude: φ2 * 180 / .pi, longitude: longitude)
    }

    public var description: String { "\(latitude),\(longitude)" }
}
