@testable import BgTaskLocationCore
import Testing

/// The spatial index lists every region a point inside it may be in.
struct RegionGridTests {
    /// Points just inside the circle, all around it, find the region: large
    /// circles, away from the equator too. The box was sized with 111,320 m
    /// a degree and a plain 1/cos(latitude) east–west, while distances are
    /// great-circle on a 6,371 km sphere: at 100 km a band of about 100 m
    /// inside the edge was filed under no cell, and an enter there never came.
    @Test(arguments: [0.0, 9.101629, 45, 60, 75, -60])
    func everyPointJustInsideTheCircleFindsIt(latitude: Double) {
        for radius in [100.0, 2_000, 25_000, 100_000] {
            var grid = RegionGrid<Int>()
            let center = GeoCoordinate(latitude: latitude, longitude: 10)
            grid.insert(1, center: center, radius: radius)
            for step in 0..<72 {
                let bearing = Double(step) * 5
                let point = center.moved(metres: radius * (1 - 1e-7), bearing: bearing)
                #expect(point.distance(to: center) < radius)
                #expect(grid.candidates(near: point).contains(1), "radius \(radius) m at \(latitude)°, bearing \(bearing)°")
            }
        }
    }

    /// The case found: 72 m inside a 100 km circle, due north on the meridian.
    @Test func aPointNearTheNorthEdgeOfALargeCircleFindsIt() {
        var grid = RegionGrid<Int>()
        let center = GeoCoordinate(latitude: 9.101629, longitude: 0)
        grid.insert(1, center: center, radius: 100_000)
        let point = GeoCoordinate(latitude: 10.0003, longitude: 0)
        #expect(point.distance(to: center) < 100_000 - 50)
        #expect(grid.candidates(near: point).contains(1))
    }

    /// A circle that reaches over a pole is looked at for every point.
    @Test func aCircleOverAPoleIsLookedAtEverywhere() {
        var grid = RegionGrid<Int>()
        grid.insert(1, center: GeoCoordinate(latitude: 89.5, longitude: 0), radius: 100_000)
        #expect(grid.candidates(near: GeoCoordinate(latitude: 89.9, longitude: 179)).contains(1))
        #expect(grid.candidates(near: GeoCoordinate(latitude: 0, longitude: 0)).contains(1))
    }
}
