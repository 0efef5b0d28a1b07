import BgTaskCore
import BgTaskLocationCore
import Testing

/// All regions of all apps: the index finds the same crossings as looking at every region.
struct RegionMonitorTests {
    static let second: UInt64 = 1_000_000

    /// What checking every region with its own boundary gives.
    struct BruteForce {
        var regions: [RegionMonitor.Key: MonitoredRegion] = [:]
        var boundaries: [RegionMonitor.Key: RegionBoundary] = [:]

        mutating func update(with fix: LocationFix) -> [RegionMonitor.Crossing] {
            var crossings: [RegionMonitor.Crossing] = []
            for key in regions.keys.sorted() {
                if let event = boundaries[key]!.update(with: fix, in: regions[key]!) {
                    crossings.append(RegionMonitor.Crossing(key: key, event: event, time: fix.time))
                }
            }
            return crossings
        }
    }

    @Test(arguments: [1, 2])
    func indexAgreesWithCheckingEveryRegion(seed: UInt64) throws {
        var generator = SplitMix64(seed: seed)
        let origin = GeoCoordinate(latitude: 52.52, longitude: 13.405)
        var monitor = RegionMonitor()
        var brute = BruteForce()
        for app in 0..<20 {
            for number in 0..<20 {
                let center = origin.moved(metres: generator.unit() * 20_000, bearing: generator.unit() * 360)
                let region = try MonitoredRegion(
                    validatingID: "r\(number)", latitude: center.latitude, longitude: center.longitude,
                    radius: 100 + generator.unit() * 3000, minimumRadius: 100, notifyOnStart: number % 3 == 0)
                monitor.add(region, for: "org.example.App\(app)")
                let key = RegionMonitor.Key(app: "org.example.App\(app)", region: region.id)
                brute.regions[key] = region
                brute.boundaries[key] = RegionBoundary()
            }
        }
        // A drive: 30 m/s, a fix every 2 s, noise of 20–80 m.
        var position = origin
        var bearing = generator.unit() * 360
        var events = 0
        for step in 0..<1500 {
            bearing += (generator.unit() - 0.5) * 20
            position = position.moved(metres: 60, bearing: bearing)
            if position.distance(to: origin) > 25_000 { bearing += 180 }
            let accuracy = 20 + generator.unit() * 60
            let noisy = position.moved(metres: generator.unit() * accuracy, bearing: generator.unit() * 360)
            let fix = LocationFix(coordinate: noisy, accuracy: accuracy, time: UInt64(step) * 2 * Self.second)
            let indexed = monitor.update(with: fix)
            #expect(indexed.sorted { $0.key < $1.key } == brute.update(with: fix), "step \(step)")
            events += indexed.count
        }
        #expect(events > 50, "the drive crosses regions: \(events) events")
    }

    @Test func replacingAndRemovingRegions() throws {
        var monitor = RegionMonitor()
        let home = try MonitoredRegion(validatingID: "home", latitude: 10, longitude: 10, radius: 500, minimumRadius: 100)
        monitor.add(home, for: "org.example.A")
        monitor.add(try MonitoredRegion(validatingID: "home", latitude: 11, longitude: 11, radius: 900, minimumRadius: 100), for: "org.example.A")
        #expect(monitor.count(of: "org.example.A") == 1)
        #expect(monitor.regions(of: "org.example.A").first?.radius == 900)
        let removed = monitor.remove("home", for: "org.example.A")
        let again = monitor.remove("home", for: "org.example.A")
        #expect(removed && !again)
        let crossings = monitor.update(with: LocationFix(coordinate: home.center, accuracy: 5, time: 0))
        #expect(crossings.isEmpty)
    }

    @Test func pendingSidesSettleWhenNoFixComes() throws {
        var monitor = RegionMonitor()
        let park = try MonitoredRegion(validatingID: "park", latitude: 1, longitude: 1, radius: 300, minimumRadius: 100)
        monitor.add(park, for: "org.example.A")
        let outside = park.center.moved(metres: 2000, bearing: 0)
        _ = monitor.update(with: LocationFix(coordinate: outside, accuracy: 10, time: 0))
        _ = monitor.settle(at: 20 * Self.second)  // no fix since: it stayed
        #expect(monitor.boundary(.init(app: "org.example.A", region: "park"))?.side == .outside)
        _ = monitor.update(with: LocationFix(coordinate: park.center, accuracy: 10, time: 30 * Self.second))
        #expect(monitor.nextSettle == 50 * Self.second)
        let early = monitor.settle(at: 49 * Self.second)
        let due = monitor.settle(at: 50 * Self.second)
        #expect(early.isEmpty)
        #expect(due.map(\.event) == [.enter])
        #expect(monitor.nextSettle == nil)
    }

    @Test func nextSettleIsTheEarliestOfTheOpenSides() throws {
        var monitor = RegionMonitor()
        let park = try MonitoredRegion(validatingID: "park", latitude: 1, longitude: 1, radius: 300, minimumRadius: 100)
        monitor.add(park, for: "org.example.A")
        monitor.add(park, for: "org.example.B")
        let outside = park.center.moved(metres: 2000, bearing: 0)
        _ = monitor.update(with: LocationFix(coordinate: outside, accuracy: 10, time: 0))
        _ = monitor.settle(at: 20 * Self.second)
        // B's region comes in 10 s after A's was entered: A settles first, then B.
        _ = monitor.update(with: LocationFix(coordinate: park.center, accuracy: 10, time: 30 * Self.second))
        monitor.add(try MonitoredRegion(validatingID: "park", latitude: 1, longitude: 1, radius: 310, minimumRadius: 100), for: "org.example.B")
        _ = monitor.update(with: LocationFix(coordinate: park.center, accuracy: 10, time: 40 * Self.second))
        #expect(monitor.nextSettle == 50 * Self.second)
        _ = monitor.settle(at: 50 * Self.second)
        #expect(monitor.nextSettle == 60 * Self.second)
    }
}
