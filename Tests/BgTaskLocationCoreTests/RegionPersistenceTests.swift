import BgTaskLocationCore
import BgTaskProtocol
import Foundation
import Testing

/// What the location plugin needs from the monitor to persist and undo:
/// every change of side (announced or not), sides restored after a restart,
/// a crossing undone, one region fed the known position, the dwell as set.
struct RegionPersistenceTests {
    static let second: UInt64 = 1_000_000
    static let home = GeoCoordinate(latitude: 48.8566, longitude: 2.3522)

    static func fix(north metres: Double, at seconds: UInt64, accuracy: Double = 10) -> LocationFix {
        LocationFix(coordinate: home.moved(metres: metres, bearing: 0), accuracy: accuracy, time: seconds * second)
    }

    static func region(_ id: String = "home", notifyOnStart: Bool = false) throws -> MonitoredRegion {
        try MonitoredRegion(
            validatingID: id, latitude: home.latitude, longitude: home.longitude, radius: 200, minimumRadius: 100,
            notifyOnStart: notifyOnStart)
    }

    static let key = RegionMonitor.Key(app: "org.example.App", region: "home")

    @Test func theFirstSideIsAChangeToPersistThoughNotAnEvent() throws {
        var monitor = RegionMonitor(dwell: 5 * Self.second)
        monitor.add(try Self.region(), for: Self.key.app)
        #expect(monitor.update(with: Self.fix(north: 1000, at: 0)).isEmpty)
        #expect(monitor.settle(at: 5 * Self.second).isEmpty, "no event for the side at the start")
        let changes = monitor.drainSideChanges()
        #expect(changes.count == 1 && changes[0].side == .outside && changes[0].previous == nil)
        #expect(monitor.drainSideChanges().isEmpty, "drained once")

        _ = monitor.update(with: Self.fix(north: 0, at: 10))
        let crossings = monitor.settle(at: 15 * Self.second)
        #expect(crossings.map(\.event) == [.enter])
        let next = monitor.drainSideChanges()
        #expect(next.count == 1 && next[0].side == .inside && next[0].previous == .outside)
    }

    @Test func aRestoredSideMakesTheNextCrossingAnEvent() throws {
        var restored = RegionMonitor(dwell: Self.second)
        restored.add(try Self.region(), for: Self.key.app, side: .outside)
        _ = restored.update(with: Self.fix(north: 0, at: 0))
        #expect(restored.settle(at: Self.second).map(\.event) == [.enter])
        var fresh = RegionMonitor(dwell: Self.second)
        fresh.add(try Self.region(), for: Self.key.app)
        _ = fresh.update(with: Self.fix(north: 0, at: 0))
        #expect(fresh.settle(at: Self.second).isEmpty, "unknown before: the first side is silent")
    }

    @Test func anUndoneCrossingIsSeenAgain() throws {
        var monitor = RegionMonitor(dwell: 0)
        monitor.add(try Self.region(), for: Self.key.app, side: .outside)
        #expect(monitor.update(with: Self.fix(north: 0, at: 0)).count == 1)
        #expect(monitor.drainSideChanges().map(\.side) == [.inside])
        monitor.reset(Self.key, to: .outside)
        #expect(monitor.boundary(Self.key)?.side == .outside)
        // An undo is not a change to store: noted, the next batch took it as one.
        #expect(monitor.drainSideChanges().isEmpty)
        #expect(monitor.update(with: Self.fix(north: 0, at: 1)).map(\.event) == [.enter])
    }

    @Test func oneRegionTakesTheKnownPosition() throws {
        var monitor = RegionMonitor(dwell: Self.second)
        monitor.add(try Self.region("other"), for: Self.key.app, side: .outside)
        monitor.add(try Self.region(notifyOnStart: true), for: Self.key.app)
        #expect(monitor.update(Self.key, with: Self.fix(north: 0, at: 3)) == nil, "one fix starts the dwell")
        #expect(monitor.boundary(Self.key)?.pending?.side == .inside)
        #expect(monitor.boundary(RegionMonitor.Key(app: Self.key.app, region: "other"))?.pending == nil, "others untouched")
        let settled = monitor.settle(at: 4 * Self.second)
        #expect(settled == [RegionMonitor.Crossing(key: Self.key, event: .enter, time: 4 * Self.second)], "notify_on_start")
        #expect(monitor.update(RegionMonitor.Key(app: "nobody", region: "x"), with: Self.fix(north: 0, at: 4)) == nil)
    }

    /// With no time to hold, one fix beyond the margin decides (the settle
    /// timer would at once); a fix that straddles still decides nothing.
    @Test func noDwellDecidesWithOneFix() throws {
        var monitor = RegionMonitor(dwell: 0)
        monitor.add(try Self.region(), for: Self.key.app, side: .outside)
        #expect(monitor.update(with: Self.fix(north: 200, at: 0, accuracy: 50)).isEmpty)
        #expect(monitor.update(with: Self.fix(north: 0, at: 1)).map(\.event) == [.enter])
        #expect(monitor.update(with: Self.fix(north: 900, at: 2)).map(\.event) == [.exit])
    }

    @Test func theDwellIsTheMonitors() throws {
        var monitor = RegionMonitor(dwell: 60 * Self.second)
        monitor.add(try Self.region(), for: Self.key.app, side: .outside)
        _ = monitor.update(with: Self.fix(north: 0, at: 100))
        #expect(monitor.nextSettle == 160 * Self.second)
        #expect(monitor.settle(at: 159 * Self.second).isEmpty)
        #expect(monitor.settle(at: 160 * Self.second).map(\.event) == [.enter])
        var boundary = RegionBoundary(side: .outside)
        _ = boundary.update(with: Self.fix(north: 0, at: 100), in: try Self.region(), dwell: .max)
        #expect(boundary.settlesAt(dwell: .max) == .max, "saturates, never wraps")
    }

    @Test func recordsRoundTripAndAreCheckedAgain() throws {
        let region = try Self.region(notifyOnStart: true)
        let stored = StoredRegion(region, side: .inside)
        let decoded = try JSONDecoder().decode(StoredRegion.self, from: Data(stored.json))
        #expect(decoded == stored && decoded.boundarySide == .inside)
        #expect(try decoded.region(id: "home", minimumRadius: 100) == region)
        var tampered = stored
        tampered.radius = -3
        #expect(throws: BgTaskError.self) { try tampered.region(id: "home", minimumRadius: 100) }

        let event = LocationEvent(
            id: "l1-1", app: "org.example.App", kind: .region, region: "home", crossing: .exit,
            fix: LocationFix(coordinate: Self.home, accuracy: .infinity, time: 7), sequence: 1)
        let back = try JSONDecoder().decode(LocationEvent.self, from: Data(event.json))
        #expect(back == event && back.regionEvent == .exit && back.accuracy == -1)
        // The record's text is fixed: events stored by earlier versions read the same.
        #expect(String(decoding: event.json, as: UTF8.self) == #"{"id":"l1-1","app":"org.example.App","kind":"region","region":"home","crossing":"exit","latitude":"#
            + "\(Self.home.latitude)" + #","longitude":"# + "\(Self.home.longitude)" + #","accuracy":-1.0,"time":7,"sequence":1}"#)
        // Names from clients are quoted; numbers come back exactly.
        let odd = LocationEvent(
            id: "l2-2", app: "org.example.App", kind: .region, region: "a \"quoted\\ name\"\n\u{1}é", crossing: .enter,
            fix: LocationFix(coordinate: GeoCoordinate(latitude: -33.868820000000007, longitude: 151.20929), accuracy: 12.345678901234567,
                             time: .max), sequence: .max)
        #expect(try JSONDecoder().decode(LocationEvent.self, from: Data(odd.json)) == odd)
        var oddRegion = StoredRegion(region, side: nil)
        oddRegion.latitude = 1e-300
        #expect(try JSONDecoder().decode(StoredRegion.self, from: Data(oddRegion.json)) == oddRegion)
        let sequenced = StoredRegion(region, side: .outside, sequence: .max)
        #expect(try JSONDecoder().decode(StoredRegion.self, from: Data(sequenced.json)) == sequenced)
    }

    /// A crossing's side is stored in its event, not in the region's record:
    /// at a restart the latest region event written after the record wins.
    @Test func theSideComesFromTheLatestEventStoredAfterTheRecord() throws {
        let region = try Self.region()
        func event(_ sequence: UInt64, _ crossing: RegionEvent, region: String = "home", kind: LocationEvent.Kind = .region) -> LocationEvent {
            LocationEvent(
                id: "l\(sequence)", app: "org.example.App", kind: kind, region: region, crossing: kind == .region ? crossing : nil,
                fix: LocationFix(coordinate: Self.home, accuracy: 10, time: sequence), sequence: sequence)
        }
        let record = StoredRegion(region, side: .outside, sequence: 5)
        #expect(record.sideAfter([]) == .outside)
        #expect(record.sideAfter([event(4, .enter), event(5, .enter)]) == .outside, "events up to the record are in it")
        #expect(record.sideAfter([event(6, .enter)]) == .inside)
        #expect(record.sideAfter([event(8, .exit), event(6, .enter)]) == .outside, "the latest, in any order")
        #expect(record.sideAfter([event(7, .enter, kind: .significant)]) == .outside, "a significant change has no side")
        // A record from before events carried sides had every side written at once.
        #expect(StoredRegion(region, side: .outside).sideAfter([event(9, .enter)]) == .outside)
        // A record may know no side yet: an event after it gives one.
        #expect(StoredRegion(region, side: nil, sequence: 0).sideAfter([event(1, .enter)]) == .inside)
    }
}
