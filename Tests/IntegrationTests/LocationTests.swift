import BgTaskCore
import BgTaskTestKit
import Foundation
import SDBus
import Testing

/// The location mode through the real daemon and its plugin: bad input and
/// the region limit, crossings with hysteresis (no event twice, no flapping
/// on a noisy boundary), significant changes rate-limited, events held while
/// refresh is off, durability across a SIGKILL, and GeoClue2 (a mock on a
/// private system bus) as the source, going away and coming back.
@Suite struct LocationTests {
    static let app = "org.example.Walk"
    static let invalid = "org.freedesktop.DBus.Error.InvalidArgs"
    static let prefix = "org.bgtaskd.BackgroundTasks1.Error."
    /// A place in Paris and points around it (metres north of its centre).
    static let center = (latitude: 48.8566, longitude: 2.3522)

    static func north(_ metres: Double) -> (Double, Double) {
        (center.latitude + metres / 111_195, center.longitude)
    }

    /// Crossings count after 1 s on a side (20 s by default), to keep the tests short.
    static let quick = ["Location.DwellSec=1"]

    func daemon(_ settings: [String] = quick, environment: [String: String] = [:]) throws -> DaemonUnderTest {
        try DaemonUnderTest(settings: settings, desktopEntries: [
            DesktopEntrySpec(id: Self.app, name: "Walk", modes: ["location"], exec: "/bin/false"),
            DesktopEntrySpec(id: "org.example.Plain", modes: ["fetch"], exec: "/bin/false"),
        ], environment: environment)
    }

    /// A connection checked in as the app, listening for its location events.
    func app(_ daemon: DaemonUnderTest) throws -> RawClient {
        let client = try RawClient(daemon)
        try client.listen(for: "RegionEvent")
        try client.listen(for: "SignificantLocationChange")
        try client.call("Manager", "CheckIn") { try $0.append(Self.app) }
        return client
    }

    func monitor(_ client: RawClient, _ id: String, radius: Double = 200, at point: (Double, Double)? = nil) throws {
        let (latitude, longitude) = point ?? (Self.center.latitude, Self.center.longitude)
        try client.call("Location", "StartMonitoringRegion") {
            try $0.append(id)
            try $0.append(latitude)
            try $0.append(longitude)
            try $0.append(radius)
        }
    }

    func simulate(_ client: RawClient, _ point: (Double, Double), accuracy: Double = 10) throws {
        try client.call("Location", "SimulateLocation") {
            try $0.append(point.0)
            try $0.append(point.1)
            try $0.append(accuracy)
        }
    }

    /// The region events received so far: (token, region, event).
    func regionEvents(_ client: RawClient) throws -> [(token: String, region: String, event: String)] {
        try client.received.filter { $0.member == "RegionEvent" }.map { message in
            try message.rewind()
            return (try message.readString(), try message.readString(), try message.readString())
        }
    }

    func complete(_ client: RawClient, _ token: String) throws {
        try client.call("Location", "CompleteEvent") { try $0.append(token) }
    }

    /// Lets `seconds` pass while the connection takes what arrives.
    func pass(_ client: RawClient, _ seconds: Double) {
        _ = client.waitForSignals(Int.max, timeout: .milliseconds(Int(seconds * 1000)))
    }

    /// ListRegions' `state` of the app's first region.
    func state(of client: RawClient) throws -> String? {
        let listed = try client.call("Location", "ListRegions") { try $0.append(Self.app) }
        guard case .array(_, let regions) = try listed.readValue(), case .dictionary(_, _, let entries)? = regions.first,
              case .string(let state)? = entries.first(where: { $0.key == .string("state") })?.value.unwrapped else { return nil }
        return state
    }

    /// Turns the app's Background App Refresh off: its events wait.
    func refreshOff(_ admin: RawClient) throws {
        try admin.call("Manager", "SetBackgroundRefreshEnabled") {
            try $0.append(Self.app)
            try $0.append(false)
        }
    }

    func field(_ client: RawClient, _ key: String) throws -> BusValue? {
        try client.applications().first { $0["app_id"] == .string(Self.app) }?[key]
    }

    @Test func badInputIsRefusedAndTheRegionLimitHolds() throws {
        let daemon = try daemon()
        let client = try app(daemon)
        func start(_ id: String, _ latitude: Double, _ longitude: Double, _ radius: Double) -> String? {
            client.errorName("Location", "StartMonitoringRegion") {
                try $0.append(id)
                try $0.append(latitude)
                try $0.append(longitude)
                try $0.append(radius)
            }
        }
        #expect(start("", 48, 2, 200) == Self.invalid)
        #expect(start(String(repeating: "x", count: 257), 48, 2, 200) == Self.invalid)
        #expect(start("a", .nan, 2, 200) == Self.invalid)
        #expect(start("a", 91, 2, 200) == Self.invalid)
        #expect(start("a", 48, -181, 200) == Self.invalid)
        #expect(start("a", 48, 2, 0) == Self.invalid)
        #expect(start("a", 48, 2, -5) == Self.invalid)
        #expect(start("a", 48, 2, .infinity) == Self.invalid)
        #expect(start("a", 48, 2, 100_001) == Self.invalid)
        let wrongOption = client.errorName("Location", "StartMonitoringRegionWithOptions") {
            try $0.append("a")
            try $0.append(48.0)
            try $0.append(2.0)
            try $0.append(200.0)
            try $0.append(value: .dictionary(key: "s", value: "v", [.init(key: .string("notify_on_start"), value: .variant(.string("yes")))]))
        }
        #expect(wrongOption == Self.invalid)
        for index in 0..<20 { #expect(start("r\(index)", 48, 2, 10) == nil) }
        #expect(start("r20", 48, 2, 200) == Self.prefix + "LimitExceeded")
        #expect(start("r3", 48.5, 2.5, 500) == nil, "an id registered again replaces its region")
        let reply = try client.call("Location", "ListMonitoredRegions")
        guard case .array(_, let regions) = try reply.readValue() else { return #expect(Bool(false)) }
        #expect(regions.count == 20)
        #expect(regions.first == .structure([.string("r0"), .double(48), .double(2), .double(100)]), "radii are raised to the minimum")
        #expect(regions.contains(.structure([.string("r3"), .double(48.5), .double(2.5), .double(500)])))
        #expect(try field(client, "location_regions") == .uint64(20))

        let stranger = try RawClient(daemon)
        #expect(stranger.errorName("Location", "StartSignificantLocationChanges") == Self.prefix + "UnknownApplication")
        try stranger.call("Manager", "CheckIn") { try $0.append("org.example.Plain") }
        #expect(stranger.errorName("Location", "StartMonitoringRegion") {
            try $0.append("a")
            try $0.append(48.0)
            try $0.append(2.0)
            try $0.append(200.0)
        } == Self.prefix + "ModeNotDeclared")
        #expect(client.errorName("Location", "SimulateLocation") {
            try $0.append(48.0)
            try $0.append(2.0)
            try $0.append(-1.0)
        } == Self.invalid)
        #expect(client.errorName("Location", "CompleteEvent") { try $0.append("nope") } == Self.prefix + "NoSuchToken")
        #expect(daemon.stop() == .status(0))
    }

    /// Outside, then inside: one `enter`; then outside: one `exit`; staying
    /// there, or coming back to where it was, sends nothing more.
    /// The refusal said the app monitored as many regions as the limit
    /// allows: after the limit was lowered, not what it monitors.
    @Test func theRegionLimitRefusalSaysHowManyTheAppMonitors() throws {
        let first = try daemon()
        let client = try app(first)
        for index in 0..<7 {
            try client.call("Location", "StartMonitoringRegion") {
                try $0.append("r\(index)")
                try $0.append(48.0)
                try $0.append(2.0)
                try $0.append(300.0)
            }
        }
        first.stop()
        let daemon = try DaemonUnderTest(settings: Self.quick + ["Location.MaxRegionsPerApp=2"], stateDirectory: first.stateDirectory, home: first.home)
        let again = try app(daemon)
        do {
            try again.call("Location", "StartMonitoringRegion") {
                try $0.append("r7")
                try $0.append(48.0)
                try $0.append(2.0)
                try $0.append(300.0)
            }
            Issue.record("an eighth region was taken")
        } catch let error as BusError {
            #expect(error.name == Self.prefix + "LimitExceeded")
            #expect(error.message == "\(Self.app) monitors 7 regions already, the most Location.MaxRegionsPerApp (2) allows", "\(error)")
        }
    }

    @Test func aRunningAppGetsEnterThenExitOnce() throws {
        let daemon = try daemon()
        let client = try app(daemon)
        try monitor(client, "home")
        try simulate(client, Self.north(1000))
        pass(client, 1.5)
        #expect(try regionEvents(client).isEmpty, "no event for the side the device was on at the start")
        try simulate(client, Self.north(0))
        #expect(client.waitForSignals(1))
        let enter = try regionEvents(client)
        #expect(enter.map(\.event) == ["enter"] && enter.map(\.region) == ["home"])
        try simulate(client, Self.north(20))
        pass(client, 1.5)
        #expect(try regionEvents(client).count == 1, "staying inside sends nothing")
        if let token = enter.first?.token { try complete(client, token) }
        #expect(client.errorName("Location", "CompleteEvent") { try $0.append(enter.first?.token ?? "") } == Self.prefix + "NoSuchToken",
                "a token completes once")

        try simulate(client, Self.north(600))
        #expect(client.waitForSignals(2))
        let events = try regionEvents(client)
        #expect(events.map(\.event) == ["enter", "exit"])
        try simulate(client, Self.north(700))
        pass(client, 1.5)
        #expect(try regionEvents(client).count == 2)
        if let token = events.last?.token { try complete(client, token) }
        #expect(try field(client, "location_events_waiting") == .uint64(0))
        #expect(try field(client, "location_events_delivered") == .uint64(2))
        #expect(daemon.stop() == .status(0))
    }

    /// Two instances run; the event goes to one, which goes without
    /// completing it. The other, still running, gets it at once; before, it
    /// waited for a CheckIn a running instance never makes again.
    @Test func anEventWhoseInstanceWentGoesToTheOneStillRunning() throws {
        let daemon = try daemon()
        let stays = try app(daemon)
        try monitor(stays, "home")
        try simulate(stays, Self.north(1000))
        pass(stays, 1.5)
        var goes: RawClient? = try app(daemon)
        try simulate(stays, Self.north(0))
        // The wake goes to the newest connection.
        #expect(goes?.waitForSignals(1) == true, "\(daemon.log)")
        if !stays.received.isEmpty {
            Issue.record("the event went to the older instance: this test needs it at the newer one")
            return
        }
        goes = nil
        #expect(stays.waitForSignals(1), "the running instance did not get the event: \(daemon.log)")
        let events = try regionEvents(stays)
        #expect(events.map(\.event) == ["enter"])
        if let token = events.first?.token { try complete(stays, token) }
        #expect(try field(stays, "location_events_waiting") == .uint64(0))
        #expect(daemon.stop() == .status(0))
    }

    /// The daemon stopped between a first fix outside and one inside (as a
    /// busy machine, or a wake from sleep, holds it): the fix inside comes
    /// with the settle timer overdue. Outside had held by then, so the move
    /// inside is an enter; before, the fix inside took the pending side's
    /// place and, holding later as the first side, sent nothing.
    @Test func aFixThatComesBeforeTheOverdueSettleTimerStillCrosses() throws {
        let daemon = try daemon()
        let client = try app(daemon)
        try monitor(client, "home")
        try simulate(client, Self.north(1000))
        daemon.process.send(SIGSTOP)
        Thread.sleep(forTimeInterval: 2)
        let admin = try RawClient(daemon)
        let inside = try admin.bus.newMethodCall(
            destination: "org.bgtaskd.BackgroundTasks1", path: "/org/bgtaskd/BackgroundTasks1",
            interface: "org.bgtaskd.BackgroundTasks1.Location", member: "SimulateLocation")
        try inside.append(Self.north(0).0)
        try inside.append(Self.north(0).1)
        try inside.append(10.0)
        try admin.bus.send(inside)
        admin.bus.flush()
        daemon.process.send(SIGCONT)
        #expect(client.waitForSignals(1), "\(daemon.log.suffix(2000))")
        #expect(try regionEvents(client).map(\.event) == ["enter"], "\(daemon.log.suffix(2000))")
        #expect(daemon.stop() == .status(0))
    }

    /// An event whose wake ran out waits for the app's next wake: another
    /// app's refresh switch, or any new desktop entry, woke the app for it
    /// again, and counted a new offence each time.
    @Test func anEventWhoseWakeRanOutWaitsForTheAppsNextWake() throws {
        let daemon = try daemon(Self.quick + ["Location.WakeBudgetSec=1"])
        let client = try app(daemon)
        try monitor(client, "home")
        try simulate(client, Self.north(1000))
        pass(client, 1.5)
        try simulate(client, Self.north(0))
        #expect(client.waitForSignals(1))
        #expect(daemon.waitForLog(containing: "did not complete location event"), "\(daemon.log)")
        let admin = try RawClient(daemon)
        try admin.call("Manager", "SetBackgroundRefreshEnabled") { try $0.append("org.example.Plain"); try $0.append(false) }
        try admin.call("Manager", "SetBackgroundRefreshEnabled") { try $0.append("org.example.Plain"); try $0.append(true) }
        try daemon.installDesktopEntry(DesktopEntrySpec(id: "org.example.Unrelated", modes: [], exec: "/bin/true"))
        pass(client, 2.5)
        #expect(try regionEvents(client).count == 1, "not sent again: \(daemon.log.suffix(2000))")
        #expect(try field(client, "location_offences") == .uint64(1))
        // Its next wake (a check-in) carries it.
        let again = try app(daemon)
        #expect(again.waitForSignals(1), "\(daemon.log.suffix(2000))")
        #expect(daemon.stop() == .status(0))
    }

    /// A region id is the app's to choose: its line breaks and escape
    /// sequences are shown escaped in the daemon's log, never as a line (or
    /// a colour) of their own.
    @Test func aRegionIdCannotForgeLinesInTheLog() throws {
        let daemon = try daemon()
        let client = try app(daemon)
        try monitor(client, "a\r\nbgtaskd: notice: FORGED")
        try monitor(client, "\u{1}\u{1b}[31m", radius: 300)
        // Outside first: the side the device is on at the start sends nothing.
        try simulate(client, Self.north(1000))
        pass(client, 1.5)
        try simulate(client, Self.north(0))
        #expect(client.waitForSignals(2))
        #expect(daemon.stop() == .status(0))
        let log = daemon.log
        #expect(log.contains("enter region a\\r\\nbgtaskd: notice: FORGED"), "\(log)")
        #expect(log.contains("\\u{1}\\u{1B}[31m"), "\(log)")
        // isNewline: CR LF is one Character, which "\n" would not match.
        #expect(!log.split(whereSeparator: \.isNewline).contains { $0.hasPrefix("bgtaskd: notice: FORGED") }, "\(log)")
        #expect(!log.unicodeScalars.contains { $0.value < 0x20 && $0 != "\n" }, "no control character but the line ends: \(log)")
    }

    /// An app that registers its places again at every start keeps what the
    /// daemon knows: no second `notify_on_start` event, and the side stays.
    @Test func registeringTheSameRegionAgainKeepsItsSide() throws {
        let daemon = try daemon()
        let client = try app(daemon)
        func register() throws {
            try client.call("Location", "StartMonitoringRegionWithOptions") {
                try $0.append("home")
                try $0.append(Self.center.latitude)
                try $0.append(Self.center.longitude)
                try $0.append(200.0)
                try $0.append(value: .dictionary(key: "s", value: "v", [.init(key: .string("notify_on_start"), value: .variant(.bool(true)))]))
            }
        }
        try register()
        try simulate(client, Self.north(0))
        #expect(client.waitForSignals(1))
        try register()
        pass(client, 1.5)
        #expect(try regionEvents(client).map(\.event) == ["enter"], "registered again: nothing new")
        #expect(try state(of: client) == "inside")
        #expect(daemon.stop() == .status(0))
    }

    /// An app launched for an event reads the daemon's answer to its
    /// `CompleteEvent` before it is suspended: frozen with the answer unread,
    /// it found the call timed out once it was thawed (the bug this guards).
    @Test func aLaunchedAppReadsTheAnswerToItsCompletionBeforeItIsSuspended() throws {
        let testapp = BinaryLocator.path(of: "bgtaskd-testapp")
        let daemon = try DaemonUnderTest(settings: Self.quick, desktopEntries: [
            DesktopEntrySpec(id: Self.app, modes: ["location"], exec: "\(testapp) --tasks 0 --location-handler complete --hold 10"),
        ])
        var client: RawClient? = try app(daemon)
        try monitor(client!, "home")
        try simulate(client!, Self.north(1000))
        pass(client!, 1.3)
        client = nil  // the app quits
        let admin = try RawClient(daemon)
        try simulate(admin, Self.north(0))
        #expect(daemon.waitForLog(containing: "launched \(Self.app) for location", timeout: .seconds(20)), "\(daemon.log)")
        let completed = daemon.process.waitForLine(timeout: .seconds(20)) { $0.contains(#""event":"location_completed""#) }
        #expect(completed != nil, "\(daemon.process.lines)\n\(daemon.log)")
        #expect(daemon.waitForLog(containing: "froze \(Self.app)"), "then suspended: \(daemon.log)")
        #expect(!daemon.process.lines.contains { $0.contains(#""event":"error""#) }, "\(daemon.process.lines)")
        #expect(daemon.stop() == .status(0))
    }

    /// A device standing on the boundary with fixes that wander ±40 m with an
    /// accuracy of 50 m decides nothing; once it is clearly inside, one `enter`.
    @Test func jitterOnTheBoundaryDoesNotFlap() throws {
        let daemon = try daemon()
        let client = try app(daemon)
        try monitor(client, "park", radius: 300)
        try simulate(client, Self.north(2000))
        pass(client, 1.2)
        var generator = SplitMix64(seed: 7)
        for _ in 0..<30 {
            let offset = Double(generator.next() % 81) - 40
            try simulate(client, Self.north(300 + offset), accuracy: 20 + Double(generator.next() % 60))
            pass(client, 0.1)
        }
        pass(client, 1.5)
        #expect(try regionEvents(client).isEmpty, "fixes on the boundary decide nothing")
        try simulate(client, Self.north(50), accuracy: 30)
        #expect(client.waitForSignals(1))
        pass(client, 1.2)
        #expect(try regionEvents(client).map(\.event) == ["enter"])
        #expect(daemon.stop() == .status(0))
    }

    /// The first fix is reported; one too near is not; one far enough but
    /// too soon waits for the interval to be over (it was dropped for good:
    /// a device that stopped after a big move kept its old position).
    @Test func significantChangesAreRateLimited() throws {
        let daemon = try daemon(Self.quick + ["Location.SignificantChangeMinIntervalSec=2", "Location.SignificantChangeM=500"])
        let client = try app(daemon)
        try client.call("Location", "StartSignificantLocationChanges")
        try simulate(client, Self.north(0))
        #expect(client.waitForSignals(1))
        try simulate(client, Self.north(2000))  // far enough, too soon
        pass(client, 0.5)
        #expect(client.received.count == 1, "not at once")
        #expect(client.waitForSignals(2), "when the interval is over: \(daemon.log.suffix(1500))")
        try simulate(client, Self.north(2300))  // too near
        pass(client, 2.5)
        #expect(client.received.count == 2)
        try simulate(client, Self.north(1000))
        #expect(client.waitForSignals(3))
        let reported = try latitudes(client)
        #expect(reported.count == 3 && abs(reported[1] - Self.north(2000).0) < 1e-9 && abs(reported[2] - Self.north(1000).0) < 1e-9, "\(reported)")
        try client.call("Location", "StopSignificantLocationChanges")
        try simulate(client, Self.north(5000))
        pass(client, 0.5)
        #expect(client.received.count == 3, "stopped: nothing more")
        #expect(daemon.stop() == .status(0))
    }

    /// The latitudes of the significant changes received so far.
    func latitudes(_ client: RawClient) throws -> [Double] {
        try client.received.filter { $0.member == "SignificantLocationChange" }.map { message in
            try message.rewind()
            _ = try message.readString()
            return try message.readDouble()
        }
    }

    /// Starting reported the last known fix with its own, old time: the next
    /// fix came through at once, whatever the interval. The interval counts
    /// from the start's report now, and starting again reports nothing.
    @Test func startingReportsTheKnownPositionAndTheIntervalCountsFromThere() throws {
        let daemon = try daemon(Self.quick + ["Location.SignificantChangeMinIntervalSec=3", "Location.SignificantChangeM=500"])
        let client = try app(daemon)
        try simulate(client, Self.north(0))
        pass(client, 3.5)
        try client.call("Location", "StartSignificantLocationChanges")
        #expect(client.waitForSignals(1))
        try client.call("Location", "StartSignificantLocationChanges")
        try simulate(client, Self.north(2000))
        pass(client, 1.5)
        let early = try latitudes(client)
        #expect(early.count == 1, "not within the interval: \(early)")
        #expect(client.waitForSignals(2))
        #expect(try latitudes(client).count == 2)
        #expect(daemon.stop() == .status(0))
    }

    /// While the machine sleeps nothing reaches a background app: a crossing
    /// made then (a fix that came in, a simulated one here) is stored and
    /// delivered after the wake.
    @Test func aCrossingDuringSleepArrivesAfterTheWake() throws {
        let daemon = try daemon()
        let client = try app(daemon)
        try client.call("Manager", "SetApplicationState") { try $0.append("background") }
        try monitor(client, "gym")
        try simulate(client, Self.north(1000))
        pass(client, 1.3)
        _ = try daemon.callManager("SimulateSleep")
        try simulate(client, Self.north(0))
        pass(client, 2)
        #expect(try regionEvents(client).isEmpty, "nothing while asleep")
        _ = try daemon.callManager("SimulateWake")
        #expect(client.waitForSignals(1))
        #expect(try regionEvents(client).map(\.event) == ["enter"])
        #expect(daemon.stop() == .status(0))
    }

    /// Extreme numbers: the largest finite accuracy, the poles, the
    /// antimeridian, the widest region; all stored, and the daemon starts
    /// again on what they left.
    @Test func extremesAreTakenAndSurviveARestart() throws {
        let daemon = try daemon()
        let client = try app(daemon)
        try client.call("Location", "StartSignificantLocationChanges")
        try monitor(client, "pole", radius: 100_000, at: (90, 0))
        try monitor(client, "dateline", radius: 100, at: (0, 180))
        try monitor(client, "south", radius: 100_000, at: (-90, -180))
        for (latitude, longitude, accuracy) in [
            (90.0, 180.0, Double.greatestFiniteMagnitude), (-90, -180, 0), (0, -180, 1e-300), (0, 179.9999999, 5), (90, 0, 1),
        ] {
            try simulate(client, (latitude, longitude), accuracy: accuracy)
        }
        pass(client, 1.5)
        #expect(daemon.log.components(separatedBy: "no GeoClue").count == 2,
                "no system bus is said once, not at every change of what is monitored: \(daemon.log)")
        #expect(try daemon.crashAndRestart() == .signal(SIGKILL))
        let back = try app(daemon)
        let listed = try back.call("Location", "ListMonitoredRegions")
        guard case .array(_, let regions) = try listed.readValue() else { return #expect(Bool(false)) }
        #expect(regions.count == 3)
        try simulate(back, (45, 45), accuracy: 10)
        #expect(!daemon.log.contains("unreadable"), "every record read back: \(daemon.log)")
        #expect(daemon.stop() == .status(0))
    }

    /// An app whose refresh is off is not woken (not launched): its event
    /// waits, and arrives when the app runs again.
    @Test func eventsWaitWhileRefreshIsOff() throws {
        let daemon = try daemon()
        var client: RawClient? = try app(daemon)
        try monitor(client!, "office")
        try simulate(client!, Self.north(1000))
        pass(client!, 1.3)
        let admin = try RawClient(daemon)
        try refreshOff(admin)
        client = nil  // the app quits
        try simulate(admin, Self.north(0))
        #expect(daemon.waitForLog(containing: "waits: Background App Refresh is denied"))
        #expect(!daemon.log.contains("launching \(Self.app)"), "not launched while refresh is off")
        // Said once, not again at every refresh change of another app (half the log of a busy desktop).
        for enabled in [false, true, false, true] {
            try admin.call("Manager", "SetBackgroundRefreshEnabled") { try $0.append("org.example.Plain"); try $0.append(enabled) }
        }
        Thread.sleep(forTimeInterval: 0.3)
        #expect(daemon.log.components(separatedBy: "waits: Background App Refresh is denied").count == 2, "\(daemon.log)")
        let back = try RawClient(daemon)
        try back.listen(for: "RegionEvent")
        let launch = try back.call("Manager", "CheckIn") { try $0.append(Self.app) }
        guard case .dictionary(_, _, let entries) = try launch.readValue() else { return #expect(Bool(false)) }
        #expect(entries.first { $0.key == .string("pending") }?.value.unwrapped == .uint32(1),
                "CheckIn counts the event the plugin held: \(entries)")
        #expect(back.waitForSignals(1))
        #expect(try regionEvents(back).map(\.event) == ["enter"])
        #expect(daemon.stop() == .status(0))
    }

    /// Refresh off holds back background wakes, also of an app that runs in
    /// the background: before, any running app was woken, and when it did
    /// not complete in time it was terminated and an offence counted. The
    /// event waits, and goes to the app when the user brings it forward.
    @Test func anAppRunningInTheBackgroundIsNotWokenWhileRefreshIsOff() throws {
        let daemon = try daemon()
        let client = try app(daemon)
        try monitor(client, "office")
        try simulate(client, Self.north(1000))
        pass(client, 1.3)
        try client.call("Manager", "SetApplicationState") { try $0.append("background") }
        try refreshOff(try RawClient(daemon))
        try simulate(client, Self.north(0))
        #expect(daemon.waitForLog(containing: "waits: Background App Refresh is denied"), "\(daemon.log.suffix(2000))")
        pass(client, 1.0)
        #expect(try regionEvents(client).isEmpty, "not woken in the background")
        try client.call("Manager", "SetApplicationState") { try $0.append("active") }
        #expect(client.waitForSignals(1), "\(daemon.log.suffix(2000))")
        #expect(try regionEvents(client).map(\.event) == ["enter"])
        try complete(client, try regionEvents(client)[0].token)
        #expect(try field(client, "location_offences") == .uint64(0))
        #expect(daemon.stop() == .status(0))
    }

    /// Enter, exit and enter again reach an app that completes none of them
    /// in time. The first enter's wake expired while the exit was still on
    /// its way; the second enter then "cancelled" that first enter as if it
    /// led back to the side the app held, so the app never heard it, and at
    /// its next check-in it was given the exit: told it was outside while the
    /// device was inside. Now the app is told the enter, and what it finds at
    /// its next check-in is that enter alone.
    @Test func anAppThatCompletesNothingEndsToldTheSideTheDeviceIsOn() throws {
        let (daemon, client) = try enteredOffice(wakeBudget: 2)
        // The exit halfway through the enter's budget.
        pass(client, 1.0)
        try simulate(client, Self.north(1000))
        #expect(client.waitForSignals(2))
        // The enter's wake expires; the exit's is still on its way.
        #expect(daemon.waitForLog(containing: "did not complete location event"), "\(daemon.log.suffix(2000))")
        try simulate(client, Self.north(0))
        #expect(client.waitForSignals(3), "\(daemon.log.suffix(2000))")
        #expect(try regionEvents(client).map(\.event) == ["enter", "exit", "enter"], "\(daemon.log.suffix(2000))")
        // Every wake expires; the next check-in gets what the device is: inside.
        let expiredBy = ContinuousClock.now + .seconds(10)
        while daemon.log.components(separatedBy: "did not complete location event").count < 4, ContinuousClock.now < expiredBy {
            Thread.sleep(forTimeInterval: 0.1)
        }
        let back = try app(daemon)
        #expect(back.waitForSignals(1), "\(daemon.log.suffix(2000))")
        pass(back, 0.5)
        #expect(try regionEvents(back).map(\.event) == ["enter"], "\(daemon.log.suffix(3000))")
        #expect(daemon.stop() == .status(0))
    }

    /// A daemon whose running app, monitoring the office from outside it,
    /// has just been sent the enter (crossings count at once).
    func enteredOffice(wakeBudget: Double) throws -> (DaemonUnderTest, RawClient) {
        let daemon = try daemon(["Location.DwellSec=0", "Location.WakeBudgetSec=\(wakeBudget)"])
        let client = try app(daemon)
        try monitor(client, "office")
        try simulate(client, Self.north(1000))
        pass(client, 0.3)
        try simulate(client, Self.north(0))
        #expect(client.waitForSignals(1))
        return (daemon, client)
    }

    /// An app that checks in again on the connection it has is sent what
    /// waits for it, as the CheckIn reply counts: it was counted and never
    /// sent, and only a new connection got it.
    @Test func checkingInAgainOnTheSameConnectionSendsWhatWaits() throws {
        let (daemon, client) = try enteredOffice(wakeBudget: 1)
        #expect(daemon.waitForLog(containing: "did not complete location event"), "\(daemon.log.suffix(2000))")
        let reply = try client.call("Manager", "CheckIn") { try $0.append(Self.app) }
        guard case .dictionary(_, _, let entries) = try reply.readValue() else { return #expect(Bool(false)) }
        #expect(entries.first { $0.key == .string("pending") }?.value.unwrapped == .uint32(1), "\(entries)")
        #expect(client.waitForSignals(2), "\(daemon.log.suffix(2000))")
        #expect(try regionEvents(client).map(\.event) == ["enter", "enter"])
        #expect(daemon.stop() == .status(0))
    }

    /// While an app cannot be woken, crossings of a region do not pile up:
    /// each cancels the one still waiting (the app already holds the side
    /// they lead back to), and a significant change replaces the one before.
    /// Before, every crossing waited, and an app away for long came back to
    /// thousands of wakes that stalled the daemon.
    @Test func whatWaitsForAnAppIsOneEventARegionAndOnePosition() throws {
        let daemon = try daemon(["Location.DwellSec=0", "Location.SignificantChangeMinIntervalSec=0"])
        var client: RawClient? = try app(daemon)
        try monitor(client!, "office")
        try monitor(client!, "cafe", radius: 200, at: Self.north(3000))
        try client!.call("Location", "StartSignificantLocationChanges")
        try simulate(client!, Self.north(1000))
        pass(client!, 0.3)
        let admin = try RawClient(daemon)
        try refreshOff(admin)
        client = nil  // the app quits
        // Into the office and out, seven crossings ending inside (one enter waits),
        // each fix 1 km from the last (a significant change every time).
        for step in 0..<7 { try simulate(admin, Self.north(step % 2 == 0 ? 0 : 1000)) }
        #expect(try field(admin, "location_events_waiting")?.unwrapped == .uint64(2), "the enter and the last position")
        // Out of the office and into the cafe, then out of the cafe: no crossing waits.
        // Both were logged for the crossings above already: these two fixes log them once more.
        func count(_ text: String) -> Int { daemon.log.components(separatedBy: text).count - 1 }
        let (restated, replaced) = (count("restates the side it was last told"), count("replaced by"))
        let exits = count("\(Self.app): exit region office\n")
        try simulate(admin, Self.north(3000))
        try simulate(admin, Self.north(5000))
        let deadline = ContinuousClock.now + .seconds(10)
        while count("restates the side it was last told") == restated || count("replaced by") == replaced, ContinuousClock.now < deadline {
            Thread.sleep(forTimeInterval: 0.05)
        }
        #expect(count("restates the side it was last told") > restated, "\(daemon.log.suffix(3000))")
        #expect(count("replaced by") > replaced, "\(daemon.log.suffix(3000))")
        // The exit that restates what the app was told is not logged as a crossing made.
        #expect(count("\(Self.app): exit region office\n") == exits, "\(daemon.log.suffix(3000))")
        #expect(try field(admin, "location_events_waiting")?.unwrapped == .uint64(1), "the last position only")
        let back = try RawClient(daemon)
        try back.listen(for: "RegionEvent")
        try back.listen(for: "SignificantLocationChange")
        try back.call("Manager", "CheckIn") { try $0.append(Self.app) }
        #expect(back.waitForSignals(1))
        pass(back, 0.5)
        #expect(try regionEvents(back).isEmpty)
        #expect(back.received.filter { $0.member == "SignificantLocationChange" }.count == 1)
        #expect(daemon.stop() == .status(0))
    }

    /// An app whose desktop entry goes (it was uninstalled) is not followed:
    /// no event is made for it and GeoClue is not kept on for it, while its
    /// regions stay stored; when an entry declaring the mode comes back, they
    /// are followed again, and the position known then counts at once (the
    /// device entered meanwhile: `enter`). Before, its regions went on
    /// making events for whichever app took the id next; and on its return
    /// the crossing made while it was away waited for the device to move.
    @Test func anAppWhoseEntryGoesIsNotFollowedUntilItComesBack() throws {
        let daemon = try daemon(["Location.DwellSec=0"])
        let client = try app(daemon)
        try monitor(client, "home")
        try client.call("Location", "StartSignificantLocationChanges")
        try simulate(client, Self.north(1000))
        pass(client, 0.3)
        let before = client.received.count
        let admin = try RawClient(daemon)
        try FileManager.default.removeItem(atPath: daemon.applicationsDirectory + "/\(Self.app).desktop")
        // The registry notices on its own; a fix after that makes nothing for the app.
        #expect(daemon.waitForLog(containing: "\(Self.app) no longer declares the location mode"), "\(daemon.log.suffix(2000))")
        let listed = try admin.call("Location", "ListRegions") { try $0.append(Self.app) }
        guard case .array(_, let regions) = try listed.readValue() else { return #expect(Bool(false)) }
        #expect(regions.isEmpty, "set aside: \(regions)")
        try simulate(admin, Self.north(0))
        pass(client, 0.5)
        #expect(client.received.count == before, "no event for an app with no entry")
        #expect(!daemon.log.contains("\(Self.app): enter region home"))

        try daemon.installDesktopEntry(DesktopEntrySpec(id: Self.app, name: "Walk", modes: ["location"], exec: "/bin/false"))
        #expect(daemon.waitForLog(containing: "\(Self.app) declares the location mode again"), "\(daemon.log.suffix(2000))")
        #expect(client.waitForSignals(before + 1), "the crossing made while it was away: \(daemon.log.suffix(2000))")
        #expect(daemon.waitForLog(containing: "\(Self.app): enter region home"))
        pass(client, 0.3)
        #expect(try regionEvents(client).last?.event == "enter" && regionEvents(client).last?.region == "home")
        #expect(try state(of: admin) == "inside")
        // The same position again makes nothing more.
        let told = client.received.count
        try simulate(admin, Self.north(0))
        pass(client, 0.5)
        #expect(client.received.count == told)
        #expect(daemon.stop() == .status(0))
    }

    /// An event completed while its app is set aside (its desktop entry went
    /// after the event was sent) keeps the side it carried: before, the
    /// event went and its region's record kept the side from before, so the
    /// entry's return brought the old side back and the same crossing was
    /// sent again.
    @Test func anEventCompletedWhileItsAppIsSetAsideKeepsItsSide() throws {
        let daemon = try daemon(["Location.DwellSec=0"])
        let client = try app(daemon)
        try monitor(client, "home")
        try simulate(client, Self.north(1000))
        pass(client, 0.3)
        try simulate(client, Self.north(0))
        #expect(client.waitForSignals(1), "\(daemon.log.suffix(2000))")
        let enter = try #require(try regionEvents(client).first)
        #expect(enter.event == "enter")
        try FileManager.default.removeItem(atPath: daemon.applicationsDirectory + "/\(Self.app).desktop")
        #expect(daemon.waitForLog(containing: "\(Self.app) no longer declares the location mode"), "\(daemon.log.suffix(2000))")
        try complete(client, enter.token)

        try daemon.installDesktopEntry(DesktopEntrySpec(id: Self.app, name: "Walk", modes: ["location"], exec: "/bin/false"))
        #expect(daemon.waitForLog(containing: "\(Self.app) declares the location mode again"), "\(daemon.log.suffix(2000))")
        let admin = try RawClient(daemon)
        #expect(try state(of: admin) == "inside", "the side the completed event carried")
        try simulate(admin, Self.north(0))
        pass(client, 1.0)
        #expect(try regionEvents(client).map(\.event) == ["enter"], "not sent again")
        // And after a restart too.
        #expect(try daemon.crashAndRestart() == .signal(SIGKILL))
        #expect(try state(of: try RawClient(daemon)) == "inside")
        #expect(daemon.stop() == .status(0))
    }

    /// A crossing stored but not yet delivered (its app could not be
    /// launched) survives a SIGKILL of the daemon, as do the regions and the
    /// side the device is on; the app gets it when it checks in.
    @Test func aCrashBetweenCrossingAndDeliveryLosesNothing() throws {
        let daemon = try daemon()
        var client: RawClient? = try app(daemon)
        try monitor(client!, "station")
        try simulate(client!, Self.north(1000))
        pass(client!, 1.3)
        client = nil
        let admin = try RawClient(daemon)
        try simulate(admin, Self.north(10))
        #expect(daemon.waitForLog(containing: "enter region station"))
        #expect(daemon.waitForLog(containing: "a location wake of \(Self.app) failed") || daemon.log.contains("launch"))
        #expect(try daemon.crashAndRestart() == .signal(SIGKILL))
        #expect(daemon.waitForLog(containing: "1 location events from before the restart wait for their apps"))
        // The region's record still says outside: the side came from the stored event.
        #expect(try state(of: try RawClient(daemon)) == "inside")
        let back = try app(daemon)
        #expect(back.waitForSignals(1))
        let events = try regionEvents(back)
        #expect(events.map(\.event) == ["enter"] && events.map(\.region) == ["station"])
        if let token = events.first?.token { try complete(back, token) }
        // The side survived too: more fixes inside send nothing.
        try simulate(back, Self.north(0))
        pass(back, 1.5)
        #expect(try regionEvents(back).count == 1)
        #expect(try state(of: back) == "inside")
        // Completed, the event is gone and the region's record holds the side.
        #expect(try daemon.crashAndRestart() == .signal(SIGKILL))
        let again = try app(daemon)
        #expect(try state(of: again) == "inside")
        try simulate(again, Self.north(1000))
        #expect(again.waitForSignals(1))
        #expect(try regionEvents(again).map(\.event) == ["exit"])
        #expect(daemon.stop() == .status(0))
    }

    /// A region's record written before events carried sides (no
    /// `sequence`) is written again at start: a crossing whose event waits
    /// through a crash then comes back with its side, not a second time.
    @Test func anOlderRegionRecordIsBroughtUpToDateAtStart() throws {
        let daemon = try daemon()
        let admin = try RawClient(daemon)
        var client: RawClient? = try app(daemon)
        try monitor(client!, "station")
        try simulate(admin, Self.north(1000))
        pass(client!, 1.3)
        #expect(try state(of: admin) == "outside")
        client = nil
        var changed = 0
        let exit = try daemon.crashAndRestart {
            changed = try daemon.rewriteStoredRecords(plugin: "location", collection: "regions", replacing: ",\"sequence\":0", with: "''")
        }
        #expect(exit == .signal(SIGKILL) && changed == 1)
        let again = try RawClient(daemon)
        #expect(try state(of: again) == "outside")
        try simulate(again, Self.north(10))
        #expect(daemon.waitForLog(containing: "enter region station"))
        #expect(try daemon.crashAndRestart() == .signal(SIGKILL))
        #expect(try state(of: try RawClient(daemon)) == "inside")
        let back = try app(daemon)
        #expect(back.waitForSignals(1))
        try simulate(back, Self.north(0))
        pass(back, 1.5)
        #expect(try regionEvents(back).map(\.event) == ["enter"], "once")
        #expect(daemon.stop() == .status(0))
    }

    /// GeoClue's mock 3 km from "home", where the tests' devices start.
    static let farGeoClue = MockService.geoclue(latitude: north(3000).0, longitude: north(3000).1, accuracy: 20)

    /// A daemon on `system`'s GeoClue, and an app monitoring "home" (outside it, settled).
    func monitoringHome(on system: MockSystemBus) throws -> (DaemonUnderTest, RawClient) {
        let daemon = try daemon(environment: system.environment)
        let client = try app(daemon)
        try monitor(client, "home")
        #expect(daemon.waitForLog(containing: "GeoClue follows the device: every 20 m"))
        pass(client, 1.3)
        return (daemon, client)
    }

    /// Whether the daemon started GeoClue's client `times` times in all (within `seconds`).
    func waitForGeoClueStarts(_ times: Int, _ daemon: DaemonUnderTest, _ client: RawClient, within seconds: Int = 10) -> Bool {
        func starts() -> Int { daemon.log.components(separatedBy: "GeoClue follows the device").count - 1 }
        let deadline = ContinuousClock.now + .seconds(seconds)
        while starts() < times, ContinuousClock.now < deadline { pass(client, 0.1) }
        return starts() == times
    }

    /// GeoClue2 on the system bus drives the regions: the daemon asks for
    /// positions once a region is monitored, gets `enter` when GeoClue moves
    /// the device in, follows GeoClue going away and coming back, and stops
    /// asking when nothing is monitored.
    @Test func geoclueDrivesRegionsAndComesBack() throws {
        let far = Self.north(3000)
        let system = try MockSystemBus(services: [Self.farGeoClue])
        defer { system.stop() }
        let (daemon, client) = try monitoringHome(on: system)
        let inside = Self.north(0)
        try system.moveDevice(latitude: inside.0, longitude: inside.1, accuracy: 15)
        #expect(client.waitForSignals(1))
        #expect(try regionEvents(client).map(\.event) == ["enter"])

        system.stopService(Self.farGeoClue)
        #expect(daemon.waitForLog(containing: "GeoClue left the system bus"))
        try system.startService(.geoclue(latitude: inside.0, longitude: inside.1, accuracy: 15))
        #expect(daemon.waitForLog(containing: "GeoClue is on the system bus"))
        #expect(waitForGeoClueStarts(2, daemon, client), "started again after GeoClue came back")
        try system.moveDevice(latitude: far.0, longitude: far.1, accuracy: 15)
        #expect(client.waitForSignals(2))
        #expect(try regionEvents(client).map(\.event) == ["enter", "exit"])

        try client.call("Location", "StopMonitoringRegion") { try $0.append("home") }
        #expect(daemon.waitForLog(containing: "nothing monitored: GeoClue stopped"))
        #expect(daemon.stop() == .status(0))
    }

    /// GeoClue usually runs only on demand: the bus starts it when asked, and
    /// it exits when unused. The daemon waited for it to appear on its own,
    /// so on such a system a monitored region never got a position. Now the
    /// daemon asks the bus to start it once something is monitored, and
    /// again when it leaves while still wanted.
    @Test func geoclueIsStartedByTheBusWhenNeeded() throws {
        let system = try MockSystemBus(activatable: [Self.farGeoClue])
        defer { system.stop() }
        let daemon = try daemon(environment: system.environment)
        let client = try app(daemon)
        pass(client, 0.5)
        #expect(try !system.wasActivated(Self.farGeoClue), "not started while nothing is monitored")
        try monitor(client, "home")
        #expect(waitForGeoClueStarts(1, daemon, client), "\(daemon.log.suffix(2000))")
        #expect(try system.wasActivated(Self.farGeoClue))
        pass(client, 1.3)
        let inside = Self.north(0)
        try system.moveDevice(latitude: inside.0, longitude: inside.1, accuracy: 15)
        #expect(client.waitForSignals(1), "\(daemon.log.suffix(2000))")
        #expect(try regionEvents(client).map(\.event) == ["enter"])

        // It leaves (10 s after its start, so that this is not a crash at start): started again.
        pass(client, 10)
        system.stopActivated(Self.farGeoClue)
        #expect(daemon.waitForLog(containing: "GeoClue left the system bus"))
        #expect(waitForGeoClueStarts(2, daemon, client), "\(daemon.log.suffix(2000))")
        #expect(daemon.stop() == .status(0))
    }

    /// GeoClue refuses the client's Start (its agent denies location until
    /// the user allows it): the setup is tried again after 5 s, then 10 s,
    /// and positions come once it is allowed. Before, nothing was tried again
    /// until GeoClue restarted, so regions met no position.
    @Test func aStartGeoClueRefusedIsTriedAgain() throws {
        let system = try MockSystemBus(services: [Self.farGeoClue])
        defer { system.stop() }
        try system.allowLocation(false)
        let daemon = try daemon(environment: system.environment)
        let client = try app(daemon)
        try monitor(client, "home")
        #expect(daemon.waitForLog(containing: "GeoClue: Start: "), "\(daemon.log.suffix(2000))")
        #expect(daemon.log.contains("trying again in 5 s"), "\(daemon.log.suffix(2000))")
        #expect(daemon.waitForLog(containing: "trying again in 10 s", timeout: .seconds(15)), "retried after 5 s: \(daemon.log.suffix(2000))")
        try system.allowLocation(true)
        #expect(waitForGeoClueStarts(1, daemon, client, within: 20), "retried after 10 s more: \(daemon.log.suffix(2000))")
        pass(client, 1.3)
        let inside = Self.north(0)
        try system.moveDevice(latitude: inside.0, longitude: inside.1, accuracy: 15)
        #expect(client.waitForSignals(1), "\(daemon.log.suffix(2000))")
        #expect(try regionEvents(client).map(\.event) == ["enter"])
        #expect(daemon.stop() == .status(0))
    }

    /// A system bus that restarts takes GeoClue's client with it. GeoClue on
    /// the new bus is followed again once the daemon is back on it; before,
    /// only once what was monitored changed, so a device that moved met no
    /// region.
    @Test func geoclueIsFollowedAgainAfterTheSystemBusRestarts() throws {
        let system = try MockSystemBus(services: [Self.farGeoClue], restartable: true)
        defer { system.stop() }
        let (daemon, client) = try monitoringHome(on: system)
        try system.crashAndRestart(with: [Self.farGeoClue])
        #expect(daemon.waitForLog(containing: "lost the system bus: no positions from GeoClue until it is back"), "\(daemon.log.suffix(2000))")
        #expect(daemon.waitForLog(containing: "the system bus is back: following GeoClue again"), "\(daemon.log.suffix(2000))")
        #expect(waitForGeoClueStarts(2, daemon, client), "\(daemon.log.suffix(2000))")
        let inside = Self.north(0)
        try system.moveDevice(latitude: inside.0, longitude: inside.1, accuracy: 15)
        #expect(client.waitForSignals(1), "\(daemon.log.suffix(2000))")
        #expect(try regionEvents(client).map(\.event) == ["enter"])
        #expect(daemon.stop() == .status(0))
    }
}
