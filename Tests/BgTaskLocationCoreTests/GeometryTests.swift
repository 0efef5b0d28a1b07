import BgTaskLocationCore
import BgTaskProtocol
import Testing

/// Coordinates and regions as clients give them, and distances.
struct GeometryTests {
    @Test func distancesAreGreatCircle() throws {
        let paris = GeoCoordinate(latitude: 48.8566, longitude: 2.3522)
        let london = GeoCoordinate(latitude: 51.5074, longitude: -0.1278)
        #expect(abs(paris.distance(to: london) - 343_500) < 1_000)
        #expect(paris.distance(to: paris) == 0)
        let moved = paris.moved(metres: 250, bearing: 90)
        #expect(abs(paris.distance(to: moved) - 250) < 0.01)
        // Across the antimeridian.
        let east = GeoCoordinate(latitude: 0, longitude: 179.9995)
        #expect(abs(east.distance(to: east.moved(metres: 200, bearing: 90)) - 200) < 0.01)
        #expect(east.moved(metres: 200, bearing: 90).longitude < 0)
    }

    @Test(arguments: [(91.0, 0.0), (-90.5, 0.0), (0.0, 180.5), (.nan, 0.0), (0.0, .infinity)])
    func badCoordinatesAreInvalidArgs(_ latitude: Double, _ longitude: Double) {
        let error = #expect(throws: BgTaskError.self) { try GeoCoordinate(validatingLatitude: latitude, longitude: longitude) }
        #expect(error?.code == .invalidArgs)
    }

    @Test(arguments: [0.0, -5, .nan, .infinity, 100_001])
    func absurdRadiiAreInvalidArgs(_ radius: Double) {
        let error = #expect(throws: BgTaskError.self) {
            try MonitoredRegion(validatingID: "home", latitude: 48, longitude: 2, radius: radius, minimumRadius: 100)
        }
        #expect(error?.code == .invalidArgs)
    }

    @Test func smallRadiiAreRaisedAndIDsChecked() throws {
        let region = try MonitoredRegion(validatingID: "home", latitude: 48, longitude: 2, radius: 10, minimumRadius: 100)
        #expect(region.radius == 100)
        #expect(MonitoredRegion.followDistance(radius: region.radius) == 20)
        #expect(MonitoredRegion.followDistance(radius: 5000) == 150)
        #expect(throws: BgTaskError.self) {
            try MonitoredRegion(validatingID: "", latitude: 48, longitude: 2, radius: 200, minimumRadius: 100)
        }
        #expect(throws: BgTaskError.self) {
            try MonitoredRegion(validatingID: String(repeating: "r", count: 257), latitude: 48, longitude: 2, radius: 200, minimumRadius: 100)
        }
    }
}
