import BackgroundTasks
import BgTaskTestKit
import Foundation
import SDBus
import Testing

/// The SDK's side of the location mode, through the real daemon: the test
/// app monitors regions and follows significant changes, a trusted client
/// moves the device with SimulateLocation, and the app's location handler
/// gets each event decoded and completes it. `Location.DwellSec=1` lets a
/// side settle within a second of the fix that started it.
@Suite struct SDKLocationTests {
    static let app = "org.example.Places"
    /// The region's centre (Notre-Dame de Paris) and a point 1.1 km north of it.
    static let home = (latitude: 48.8530, longitude: 2.3499)
    static let away = (latitude: 48.8630, longitude: 2.3499)

    func daemon(_ settings: [String] = []) throws -> DaemonUnderTest {
        try DaemonUnderTest(settings: ["Location.DwellSec=1"] + settings, desktopEntries: [
            DesktopEntrySpec(id: Self.app, name: "Places", modes: ["location"], exec: "/bin/false"),
            DesktopEntrySpec(id: "org.example.Plain", modes: ["fetch"], exec: "/bin/false"),
        ])
    }

    /// `--monitor-region` for a region of `radius` metres around ``home``.
    static func homeRegion(_ id: String = "home", radius: Double = 200) -> String {
        "\(id),\(home.latitude),\(home.longitude),\(radius)"
    }

    // MARK: The daemon's view, through a trusted connection

    static func simulate(_ admin: RawClient, _ latitude: Double, _ longitude: Double, accuracy: Double = 10) throws {
        try admin.call("Location", "SimulateLocation") { call in
            try call.append(latitude)
            try call.append(longitude)
            try call.append(accuracy)
        }
    }

    /// `ListRegions`, one dictionary per region (variants unwrapped).
    static func regions(_ admin: RawClient, of app: String = "") throws -> [[String: BusValue]] {
        let reply = try admin.call("Location", "ListRegions") { try $0.append(app) }
        guard case .array(_, let regions)? = try reply.readValue() else { return [] }
        return regions.map { region in
            guard case .dictionary(_, _, let entries) = region else { return [:] }
            var fields: [String: BusValue] = [:]
            for entry in entries { if case .string(let key) = entry.key { fields[key] = entry.value.unwrapped } }
            return fields
        }
    }

    /// Polls ListRegions until region `id` of ``app`` is in `state`; returns the state last seen.
    static func waitForState(_ admin: RawClient, region id: String, _ state: String, timeout: Duration = .seconds(10)) throws -> String? {
        let deadline = ContinuousClock.now + timeout
        while true {
            let seen = try regions(admin, of: app).first { $0["region_id"] == .string(id) }?["state"]
            if seen == .string(state) || ContinuousClock.now >= deadline {
                if case .string(let text)? = seen { return text }
                return nil
            }
            Thread.sleep(forTimeInterval: 0.05)
        }
    }

    /// What GetApplications says of ``app``.
    static func application(_ admin: RawClient) throws -> [String: BusValue]? {
        try admin.applications().first { $0["app_id"] == .string(app) }
    }

    // MARK: Tests

    @Test func handlerGetsTheCrossingAndItsCompletionReachesTheDaemon() throws {
        let daemon = try daemon()
        let app = try daemon.startTestApp([
            "--app-id", Self.app, "--tasks", "0", "--location-handler", "complete", "--monitor-region", Self.homeRegion(),
        ])
        let monitored = app.waitForEvent("monitored")
        #expect(monitored?["region_id"] as? String == "home", "\(app.lines) \(app.standardError)")
        #expect(monitored?["radius"] as? Double == 200, "\(app.lines)")
        let admin = try RawClient(daemon)
        #expect(try Self.regions(admin, of: Self.app).first?["state"] == .string("unknown"), "no fix yet")

        // Away first: the first side to hold is not an event (no notify_on_start).
        try Self.simulate(admin, Self.away.latitude, Self.away.longitude)
        #expect(try Self.waitForState(admin, region: "home", "outside") == "outside")
        // Then home: once it has held for the dwell, the crossing wakes the app.
        try Self.simulate(admin, Self.home.latitude, Self.home.longitude)
        let event = app.waitForEvent("location_event")
        #expect(event?["kind"] as? String == "region", "\(app.lines)")
        #expect(event?["region_id"] as? String == "home", "\(app.lines)")
        #expect(event?["crossing"] as? String == "enter", "\(app.lines)")
        let completed = app.waitForEvent("location_completed")
        #expect(completed?["token"] as? String == event?["token"] as? String, "\(app.lines)")
        #expect(app.events(named: "location_event").count == 1, "the side away was not an event: \(app.lines)")

        #expect(try Self.waitForState(admin, region: "home", "inside") == "inside")
        let counters = try Self.application(admin)
        #expect(counters?["location_events_waiting"] == .uint64(0), "\(String(describing: counters))")
        #expect(counters?["location_events_delivered"] == .uint64(1), "\(String(describing: counters))")
        #expect(daemon.waitForLog(containing: "\(Self.app): enter region home"), "\(daemon.log)")
        app.stop()
        #expect(daemon.stop() == .status(0))
    }

    @Test func notifyOnStartDeliversTheSideTheDeviceIsOn() throws {
        let daemon = try daemon()
        let app = try daemon.startTestApp([
            "--app-id", Self.app, "--tasks", "0", "--location-handler", "complete",
            "--monitor-region", Self.homeRegion(), "--notify-on-start",
        ])
        #expect(app.waitForEvent("monitored") != nil, "\(app.lines) \(app.standardError)")
        let admin = try RawClient(daemon)
        #expect(try Self.regions(admin, of: Self.app).first?["notify_on_start"] == .bool(true))

        try Self.simulate(admin, Self.away.latitude, Self.away.longitude)
        let event = app.waitForEvent("location_event")
        #expect(event?["region_id"] as? String == "home" && event?["crossing"] as? String == "exit",
                "the side the device is on, once it held: \(app.lines)")
        #expect(app.waitForEvent("location_completed") != nil, "\(app.lines)")
        #expect(try Self.regions(admin, of: Self.app).first?["state"] == .string("outside"))
        app.stop()
        #expect(daemon.stop() == .status(0))
    }

    @Test func significantChangesArriveOncePerMove() throws {
        // No least interval: only the distance (500 m by default) decides.
        let daemon = try daemon(["Location.SignificantChangeMinIntervalSec=0"])
        let app = try daemon.startTestApp([
            "--app-id", Self.app, "--tasks", "0", "--location-handler", "complete", "--significant-changes",
        ])
        #expect(app.waitForEvent("significant_changes")?["state"] as? String == "started", "\(app.lines) \(app.standardError)")
        let admin = try RawClient(daemon)

        // The first fix is reported as it is.
        try Self.simulate(admin, Self.home.latitude, Self.home.longitude, accuracy: 25)
        let first = app.waitForEvent("location_event")
        #expect(first?["kind"] as? String == "significant_change", "\(app.lines)")
        #expect(first?["latitude"] as? Double == Self.home.latitude && first?["longitude"] as? Double == Self.home.longitude,
                "\(app.lines)")
        #expect(first?["accuracy"] as? Double == 25, "\(app.lines)")
        #expect(app.waitForEvent("location_completed") != nil, "\(app.lines)")

        // 50 m further is no significant change: nothing new is stored or sent.
        try Self.simulate(admin, Self.home.latitude + 0.00045, Self.home.longitude)
        let after = try Self.application(admin)
        #expect(after?["location_events_waiting"] == .uint64(0), "\(String(describing: after))")
        #expect(after?["location_events_delivered"] == .uint64(1), "\(String(describing: after))")

        // 1.1 km further is.
        try Self.simulate(admin, Self.away.latitude, Self.away.longitude)
        let events = app.waitForEvents("location_event", count: 2)
        #expect(events.count == 2, "\(app.lines)")
        #expect(events.last?["latitude"] as? Double == Self.away.latitude, "\(app.lines)")
        #expect(app.waitForEvents("location_completed", count: 2).count == 2, "\(app.lines)")
        #expect(app.events(named: "location_event").count == 2, "one event per move: \(app.lines)")
        app.stop()
        #expect(daemon.stop() == .status(0))
    }

    @Test func anEventNotCompletedInTimeIsDeliveredAgainAtTheNextCheckIn() throws {
        let daemon = try daemon(["Location.WakeBudgetSec=1"])
        let careless = try daemon.startTestApp([
            "--app-id", Self.app, "--tasks", "0", "--location-handler", "never", "--background",
            "--monitor-region", Self.homeRegion(), "--notify-on-start",
        ])
        #expect(careless.waitForEvent("state")?["state"] as? String == "background", "\(careless.lines) \(careless.standardError)")
        let admin = try RawClient(daemon)
        try Self.simulate(admin, Self.away.latitude, Self.away.longitude)
        let first = careless.waitForEvent("location_event")
        #expect(first?["crossing"] as? String == "exit", "\(careless.lines)")
        // Not completed within the budget: the daemon terminates the app (it is
        // in the background) and keeps the event.
        #expect(careless.waitForEvent("sigterm") != nil, "\(careless.lines)\n\(daemon.log)")
        #expect(careless.waitForExit() == .status(143))
        #expect(careless.events(named: "location_completed").isEmpty)

        let careful = try daemon.startTestApp(["--app-id", Self.app, "--tasks", "0", "--location-handler", "complete"])
        #expect(careful.waitForEvent("ready") != nil, "\(careful.lines) \(careful.standardError)")
        let again = careful.waitForEvent("location_event")
        #expect(again?["region_id"] as? String == "home" && again?["crossing"] as? String == "exit", "\(careful.lines)")
        #expect(again?["token"] as? String != first?["token"] as? String, "a new wake, with a token of its own")
        #expect(careful.waitForEvent("location_completed") != nil, "\(careful.lines)")
        let counters = try Self.application(admin)
        #expect(counters?["location_offences"] == .uint64(1), "\(String(describing: counters))")
        #expect(counters?["location_events_delivered"] == .uint64(1), "\(String(describing: counters))")
        #expect(counters?["location_events_waiting"] == .uint64(0), "\(String(describing: counters))")
        careful.stop()
        #expect(daemon.stop() == .status(0))
    }

    /// Regions and their errors through the SDK in this process (no fix is
    /// simulated, so no event wakes the test runner).
    @Test func monitoredRegionsRoundTrip() async throws {
        let daemon = try daemon()
        let manager = try await BackgroundTaskManager.connect(bus: .address(daemon.bus.address), appID: Self.app)
        let office = CircularRegion(id: "office", latitude: 52.5200, longitude: 13.4050, radius: 150)
        let kiosk = CircularRegion(id: "kiosk", latitude: -33.8568, longitude: 151.2153, radius: 30)
        try await manager.startMonitoring(region: office)
        try await manager.startMonitoring(region: kiosk, notifyOnStart: true)
        let regions = try await manager.monitoredRegions()
        // By id; the kiosk's 30 m raised to Location.MinRadiusM (100).
        #expect(regions == [
            CircularRegion(id: "kiosk", latitude: -33.8568, longitude: 151.2153, radius: 100), office,
        ])
        let admin = try RawClient(daemon)
        let listed = try Self.regions(admin, of: Self.app)
        #expect(listed.map { $0["notify_on_start"] } == [.bool(true), .bool(false)], "\(listed)")

        try await manager.stopMonitoring(regionID: "kiosk")
        try await manager.stopMonitoring(regionID: "never-monitored")
        let left = try await manager.monitoredRegions()
        #expect(left == [office])

        let invalid = await #expect(throws: BackgroundTasksError.self) {
            try await manager.startMonitoring(region: CircularRegion(id: "nowhere", latitude: .nan, longitude: 0, radius: 100))
        }
        #expect(invalid?.code == .invalidArgument, "\(String(describing: invalid))")
        let tooBig = await #expect(throws: BackgroundTasksError.self) {
            try await manager.startMonitoring(region: CircularRegion(id: "everywhere", latitude: 0, longitude: 0, radius: 200_000))
        }
        #expect(tooBig?.code == .invalidArgument, "\(String(describing: tooBig))")
        let unchanged = try await manager.monitoredRegions()
        #expect(unchanged == [office], "refused regions are not added")

        let plain = try await BackgroundTaskManager.connect(bus: .address(daemon.bus.address), appID: "org.example.Plain")
        let undeclared = await #expect(throws: BackgroundTasksError.self) { try await plain.startSignificantLocationChanges() }
        #expect(undeclared?.code == .modeNotDeclared, "\(String(describing: undeclared))")
        let anonymous = try await BackgroundTaskManager.connect(bus: .address(daemon.bus.address))
        let unknown = await #expect(throws: BackgroundTasksError.self) { try await anonymous.monitoredRegions() }
        #expect(unknown?.code == .unknownApplication, "\(String(describing: unknown))")

        try await manager.startSignificantLocationChanges()
        #expect(try Self.application(admin)?["location_significant_changes"] == .bool(true))
        try await manager.stopSignificantLocationChanges()
        #expect(try Self.application(admin)?["location_significant_changes"] == .bool(false))
        manager.close()
        plain.close()
        anonymous.close()
        #expect(daemon.stop() == .status(0))
    }

    @Test func afterADaemonCrashTheRegionIsKeptAndEventsKeepComing() throws {
        let daemon = try daemon()
        let app = try daemon.startTestApp([
            "--app-id", Self.app, "--tasks", "0", "--location-handler", "complete", "--monitor-region", Self.homeRegion(),
        ])
        #expect(app.waitForEvent("monitored") != nil, "\(app.lines) \(app.standardError)")
        let admin = try RawClient(daemon)
        try Self.simulate(admin, Self.away.latitude, Self.away.longitude)
        #expect(try Self.waitForState(admin, region: "home", "outside") == "outside")

        #expect(try daemon.crashAndRestart() == .signal(SIGKILL))
        #expect(app.waitForEvent("rechecked_in", timeout: .seconds(20)) != nil, "\(app.lines) \(app.standardError)")
        let restarted = try RawClient(daemon)
        #expect(try Self.regions(restarted, of: Self.app).first?["state"] == .string("outside"),
                "the region and its side were stored")
        try Self.simulate(restarted, Self.home.latitude, Self.home.longitude)
        let event = app.waitForEvent("location_event")
        #expect(event?["region_id"] as? String == "home" && event?["crossing"] as? String == "enter",
                "the new daemon's event reaches the same handler: \(app.lines)")
        #expect(app.waitForEvent("location_completed") != nil, "\(app.lines)")
        app.stop()
        #expect(daemon.stop() == .status(0))
    }
}
