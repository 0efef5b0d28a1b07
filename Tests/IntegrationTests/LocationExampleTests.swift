import BgTaskTestKit
import Foundation
import SDBus
import Testing

/// The location example app: started by the user it monitors its place and
/// says when the device enters it; started again it keeps the region as it
/// is; and when the device leaves while it is not running, the daemon
/// launches it through its desktop entry, it gets the crossing after its
/// check-in and completes it; then, in the background with nothing to do,
/// it is suspended, and thawed for the next crossing.
@Suite struct LocationExampleTests {
    @Test func exampleAppSaysWhenTheDeviceArrivesAndIsLaunchedWhenItLeaves() throws {
        let example = BinaryLocator.path(of: "bgtaskd-example-location")
        let place = "home,\(SDKLocationTests.home.latitude),\(SDKLocationTests.home.longitude),200"
        let daemon = try DaemonUnderTest(settings: ["Location.DwellSec=1"], desktopEntries: [
            DesktopEntrySpec(id: SDKLocationTests.app, modes: ["location"], exec: "\(example) --place \(place)"),
        ])
        let admin = try RawClient(daemon)
        func startByUser() throws -> ChildProcess {
            try ChildProcess(example, ["--bus", daemon.bus.address, "--app-id", SDKLocationTests.app, "--place", place])
        }

        // --register-only registers the place and exits.
        let register = try ChildProcess(
            example, ["--bus", daemon.bus.address, "--app-id", SDKLocationTests.app, "--place", place, "--register-only"])
        #expect(register.waitForExit(timeout: .seconds(20)) == .status(0), "\(register.lines) \(register.standardError)")
        #expect(register.lines.suffix(2) == ["monitoring home (48.853, 2.3499, 200 m)", "exiting: registered"], "\(register.lines)")
        #expect(try SDKLocationTests.regions(admin, of: SDKLocationTests.app).count == 1)

        let first = try startByUser()
        #expect(first.waitForLine { $0.hasPrefix("still monitoring home") } != nil, "\(first.lines) \(first.standardError)")
        try SDKLocationTests.simulate(admin, SDKLocationTests.away.latitude, SDKLocationTests.away.longitude)
        #expect(try SDKLocationTests.waitForState(admin, region: "home", "outside") == "outside")
        try SDKLocationTests.simulate(admin, SDKLocationTests.home.latitude, SDKLocationTests.home.longitude)
        #expect(first.waitForLine { $0 == "entered home" } != nil, "\(first.lines) \(first.standardError)")
        #expect(first.stop() == .status(0))
        #expect(first.lines.last == "exiting: SIGTERM", "\(first.lines)")

        // Started again with the same place: the region, and the side the daemon knows, stay.
        let second = try startByUser()
        #expect(second.waitForLine { $0.hasPrefix("still monitoring home") } != nil, "\(second.lines) \(second.standardError)")
        #expect(second.stop() == .status(0))
        #expect(try SDKLocationTests.regions(admin, of: SDKLocationTests.app).first?["state"] == .string("inside"))

        // Leaving while it is not running: the daemon launches it for the crossing.
        try SDKLocationTests.simulate(admin, SDKLocationTests.away.latitude, SDKLocationTests.away.longitude)
        #expect(daemon.waitForLog(containing: "launched \(SDKLocationTests.app) for location", timeout: .seconds(20)), "\(daemon.log)")
        #expect(daemon.waitForLog(containing: "pending=1 reason=location"), "it checked in with its event waiting: \(daemon.log)")
        let deadline = ContinuousClock.now + .seconds(20)
        var counters = try SDKLocationTests.application(admin)
        while counters?["location_events_delivered"] != .uint64(2) && ContinuousClock.now < deadline {
            Thread.sleep(forTimeInterval: 0.05)
            counters = try SDKLocationTests.application(admin)
        }
        #expect(counters?["location_events_delivered"] == .uint64(2), "\(String(describing: counters))\n\(daemon.log)")
        #expect(counters?["location_events_waiting"] == .uint64(0), "\(String(describing: counters))")
        #expect(counters?["location_offences"] == .uint64(0), "completed in time: \(String(describing: counters))")
        // Its output goes where the daemon's goes.
        #expect(daemon.process.waitForLine { $0 == "left home" } != nil, "\(daemon.process.lines)")
        // Said once the CheckIn is answered, which may be after the event it brought was handled.
        let checkedIn = "checked in as \(SDKLocationTests.app) (launched for location, 1 event(s) waiting)"
        #expect(daemon.process.waitForLine { $0 == checkedIn } != nil, "\(daemon.process.lines)")
        // Done, in the background with nothing to do: suspended (frozen), as iOS suspends it.
        #expect(daemon.waitForLog(containing: "froze \(SDKLocationTests.app)"), "\(daemon.log)")
        #expect(try SDKLocationTests.application(admin)?["suspended"] == .bool(true))

        // Back home: the suspended app is thawed for the crossing, not launched again.
        try SDKLocationTests.simulate(admin, SDKLocationTests.home.latitude, SDKLocationTests.home.longitude)
        #expect(daemon.process.waitForLine(timeout: .seconds(20)) { $0 == "entered home" } != nil, "\(daemon.process.lines)\n\(daemon.log)")
        #expect(daemon.waitForLog(containing: "thawed \(SDKLocationTests.app)"), "\(daemon.log)")
        #expect(daemon.log.components(separatedBy: "launched \(SDKLocationTests.app) for location").count == 2, "launched once: \(daemon.log)")
        let thawDeadline = ContinuousClock.now + .seconds(20)
        counters = try SDKLocationTests.application(admin)
        while counters?["location_events_delivered"] != .uint64(3) && ContinuousClock.now < thawDeadline {
            Thread.sleep(forTimeInterval: 0.05)
            counters = try SDKLocationTests.application(admin)
        }
        #expect(counters?["location_events_delivered"] == .uint64(3), "\(String(describing: counters))\n\(daemon.log)")
        #expect(daemon.stop() == .status(0))
    }
}
