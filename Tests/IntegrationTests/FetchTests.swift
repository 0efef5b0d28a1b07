import BgTaskTestKit
import Foundation
import SDBus
import Testing

/// The fetch mode through the real daemon and its plugin: registrations,
/// refresh settings, errors, PerformFetch to a running app, persistence.
@Suite struct FetchTests {
    static let app = "org.example.Weather"

    /// A daemon with one app that declares fetch and one that declares nothing.
    func daemon(_ settings: [String] = [], environment: [String: String] = [:]) throws -> DaemonUnderTest {
        try DaemonUnderTest(settings: settings, desktopEntries: [
            DesktopEntrySpec(id: Self.app, modes: ["fetch"], exec: "/bin/true"),
            DesktopEntrySpec(id: "org.example.Plain", modes: [], exec: "/bin/true"),
        ], environment: environment)
    }

    /// A connection checked in as `app`.
    func client(_ daemon: DaemonUnderTest, as app: String = FetchTests.app) throws -> RawClient {
        let client = try RawClient(daemon)
        try client.call("Manager", "CheckIn") { try $0.append(app) }
        return client
    }

    func registration(_ client: RawClient) throws -> (policy: String, seconds: Double, next: UInt64) {
        let reply = try client.call("Fetch", "GetFetchRegistration")
        return (try reply.readString(), try reply.readDouble(), try reply.readUInt64())
    }

    static var nowMicroseconds: UInt64 { UInt64(Date().timeIntervalSince1970 * 1_000_000) }

    @Test func pluginIsLoadedAndListed() throws {
        let daemon = try daemon()
        #expect(try daemon.property("Plugins") == #"a(ssu) 4 "fetch" "1.0.0" 1 "location" "1.0.0" 1 "remote-notification" "1.0.0" 1 "transfer" "1.0.0" 1"#)
        #expect(daemon.waitForLog(containing: "loaded plugin fetch 1.0.0"))
        #expect(daemon.stop() == .status(0))
    }

    @Test func registrationFollowsTheIntervalWithItsFloor() throws {
        let daemon = try daemon(["Fetch.MinimumIntervalSec=900"])
        let client = try client(daemon)
        var current = try registration(client)
        #expect(current.policy == "never" && current.seconds == .infinity && current.next == 0)

        try client.call("Fetch", "SetMinimumFetchInterval") { try $0.append(0.0) }
        let before = Self.nowMicroseconds
        current = try registration(client)
        #expect(current.policy == "minimum" && current.seconds == 900)
        #expect(current.next > before + 890_000_000 && current.next < before + 910_000_000)
        // The log said "minimum (0.0 s)": the number asked for, not the interval in force.
        #expect(daemon.waitForLog(containing: "asked for fetch interval minimum (0.0 s asked, 900.0 s in force)"), "\(daemon.log)")

        try client.call("Fetch", "SetMinimumFetchInterval") { try $0.append(60.0) }
        current = try registration(client)
        #expect(current.policy == "custom" && current.seconds == 900, "custom intervals are floored too")

        try client.call("Fetch", "SetMinimumFetchInterval") { try $0.append(7200.0) }
        #expect(try registration(client).seconds == 7200)

        try client.call("Fetch", "SetMinimumFetchInterval") { try $0.append(Double.infinity) }
        #expect(try registration(client).policy == "never")
        #expect(daemon.stop() == .status(0))
    }

    @Test func badInputIsRefused() throws {
        let daemon = try daemon()
        let anonymous = try RawClient(daemon)
        let weather = try client(daemon)
        let plain = try client(daemon, as: "org.example.Plain")
        let nameless = try client(daemon, as: "org.example.NoEntry")
        let prefix = "org.bgtaskd.BackgroundTasks1.Error."

        #expect(anonymous.errorName("Fetch", "SetMinimumFetchInterval") { try $0.append(0.0) } == prefix + "UnknownApplication")
        #expect(nameless.errorName("Fetch", "SetMinimumFetchInterval") { try $0.append(0.0) } == prefix + "UnknownApplication")
        #expect(plain.errorName("Fetch", "SetMinimumFetchInterval") { try $0.append(0.0) } == prefix + "ModeNotDeclared")
        #expect(weather.errorName("Fetch", "SetMinimumFetchInterval") { try $0.append(-1.0) } == "org.freedesktop.DBus.Error.InvalidArgs")
        #expect(weather.errorName("Fetch", "SetMinimumFetchInterval") { try $0.append(Double.nan) } == "org.freedesktop.DBus.Error.InvalidArgs")
        #expect(weather.errorName("Fetch", "CompleteFetch") { try $0.append("nope"); try $0.append("newData") } == prefix + "NoSuchToken")
        #expect(weather.errorName("Fetch", "CompleteFetch") { try $0.append("nope"); try $0.append("maybe") } == "org.freedesktop.DBus.Error.InvalidArgs")
        #expect(anonymous.errorName("Fetch", "SimulateFetch") { try $0.append("org.example.NoEntry") } == prefix + "UnknownApplication")
        #expect(anonymous.errorName("Fetch", "SimulateFetch") { try $0.append("org.example.Plain") } == prefix + "ModeNotDeclared")
        #expect(anonymous.errorName("Fetch", "SimulateFetch") { try $0.append("not an id") } == "org.freedesktop.DBus.Error.InvalidArgs")
        #expect(anonymous.errorName("Manager", "SetBackgroundRefreshEnabled") { try $0.append("bad id!"); try $0.append(false) }
                == "org.freedesktop.DBus.Error.InvalidArgs")
        #expect(anonymous.errorName("Manager", "SetBackgroundRefreshEnabled") { try $0.append("org.example.NoEntry"); try $0.append(false) }
                == prefix + "UnknownApplication")
        #expect(daemon.stop() == .status(0))
    }

    @Test func runningAppReceivesPerformFetchAndCompletes() throws {
        let daemon = try daemon()
        let app = try client(daemon)
        try app.listen(for: "PerformFetch")
        let admin = try RawClient(daemon)
        try admin.call("Fetch", "SimulateFetch") { try $0.append(Self.app) }
        #expect(app.waitForSignals(1), "PerformFetch did not arrive")
        let token = try #require(try app.received.first?.readString())
        #expect(token.count == 32)
        // Another app cannot complete it; the owner can, once.
        let stranger = try client(daemon, as: "org.example.Plain")
        #expect(stranger.errorName("Fetch", "CompleteFetch") { try $0.append(token); try $0.append("newData") }
                == "org.bgtaskd.BackgroundTasks1.Error.NoSuchToken")
        try app.call("Fetch", "CompleteFetch") { try $0.append(token); try $0.append("newData") }
        #expect(app.errorName("Fetch", "CompleteFetch") { try $0.append(token); try $0.append("newData") }
                == "org.bgtaskd.BackgroundTasks1.Error.NoSuchToken")
        #expect(!daemon.log.contains("launched org.example.Weather"), "a running app is not launched again")
        #expect(daemon.waitForLog(containing: "completed its fetch: newData"))
        #expect(daemon.stop() == .status(0))
    }

    /// fetch_last_usec was the start of the latest wake even while it was
    /// under way, paired with the result of the fetch before it.
    @Test func theLastFetchsTimeIsThatOfItsResult() throws {
        let daemon = try daemon()
        let app = try client(daemon)
        try app.listen(for: "PerformFetch")
        let admin = try RawClient(daemon)
        func last() throws -> (String?, UInt64?) {
            let weather = try admin.applications().first { $0["app_id"] == .string(Self.app) }
            let result: String? = if case .string(let text)? = weather?["fetch_last_result"] { text } else { nil }
            let at: UInt64? = if case .uint64(let usec)? = weather?["fetch_last_usec"] { usec } else { nil }
            return (result, at)
        }
        try admin.call("Fetch", "SimulateFetch") { try $0.append(Self.app) }
        #expect(app.waitForSignals(1))
        let first = try #require(try app.received.first?.readString())
        #expect(try last().1 == nil, "no fetch has a result yet")
        try app.call("Fetch", "CompleteFetch") { try $0.append(first); try $0.append("newData") }
        let (result, completedAt) = try last()
        #expect(result == "newData" && completedAt != nil)
        Thread.sleep(forTimeInterval: 0.05)
        try admin.call("Fetch", "SimulateFetch") { try $0.append(Self.app) }
        #expect(app.waitForSignals(2))
        #expect(try last() == ("newData", completedAt), "the wake under way changes neither")
        #expect(daemon.stop() == .status(0))
    }

    /// A fetch asked for while the machine sleeps begins at the wake; it was
    /// timed from the request, so LAST FETCH said "8h ago" after a night
    /// for a fetch that had just run, and the interval counted from then.
    @Test func aFetchAskedForDuringSleepIsTimedFromTheWake() throws {
        let daemon = try daemon()
        // In the background, so that the sleep freezes it and its fetch waits for the wake.
        let app = try daemon.startTestApp(["--app-id", Self.app, "--fetch-result", "newData", "--background"])
        #expect(app.waitForEvent("state") != nil, "\(app.lines) \(app.standardError)")
        let admin = try RawClient(daemon)
        try admin.call("Manager", "SimulateSleep")
        try admin.call("Fetch", "SimulateFetch") { try $0.append(Self.app) }
        Thread.sleep(forTimeInterval: 2)
        let wokeAt = UInt64(Date().timeIntervalSince1970 * 1_000_000)
        try admin.call("Manager", "SimulateWake")
        #expect(app.waitForEvent("fetch_completed") != nil, "\(app.lines) \(daemon.log.suffix(2000))")
        let weather = try admin.applications().first { $0["app_id"] == .string(Self.app) }
        guard case .uint64(let at)? = weather?["fetch_last_usec"] else {
            Issue.record("no fetch_last_usec in \(String(describing: weather))")
            return
        }
        #expect(at + 100_000 >= wokeAt, "began \(Double(Int64(wokeAt) - Int64(at)) / 1e6) s before the wake")
        _ = app.stop()
        #expect(daemon.stop() == .status(0))
    }

    @Test func refreshSwitchedOffIsDenied() throws {
        let daemon = try daemon()
        let app = try client(daemon)
        let admin = try RawClient(daemon)
        #expect(try app.call("Manager", "GetBackgroundRefreshStatus").readString() == "available")
        try app.call("Fetch", "SetMinimumFetchInterval") { try $0.append(0.0) }
        #expect(try registration(app).next > 0)
        // Allowed while on (the plugin now knows the app), refused once off.
        #expect(admin.errorName("Fetch", "SimulateFetch") { try $0.append(Self.app) } == nil)
        try admin.call("Manager", "SetBackgroundRefreshEnabled") { try $0.append(Self.app); try $0.append(false) }
        #expect(try app.call("Manager", "GetBackgroundRefreshStatus").readString() == "denied")
        #expect(admin.errorName("Fetch", "SimulateFetch") { try $0.append(Self.app) } == "org.bgtaskd.BackgroundTasks1.Error.RefreshDisabled")
        // Held out of the schedule: no next fetch, as GetFetchRegistration documents.
        #expect(try waitFor { try registration(app).next == 0 })
        try admin.call("Manager", "SetBackgroundRefreshEnabled") { try $0.append(Self.app); try $0.append(true) }
        #expect(try waitFor { try registration(app).next > 0 })
        try admin.call("Manager", "SetBackgroundRefreshEnabled") { try $0.append(""); try $0.append(false) }
        #expect(try app.call("Manager", "GetBackgroundRefreshStatus").readString() == "denied", "the global switch wins")
        #expect(daemon.stop() == .status(0))
    }

    @Test func lowBatteryAndPowerSaverRestrictRefresh() throws {
        let system = try MockSystemBus(services: [.upower(onBattery: true, percentage: 15)])
        let daemon = try daemon(environment: system.environment)
        let app = try client(daemon)
        #expect(try waitFor { try app.call("Manager", "GetBackgroundRefreshStatus").readString() == "restricted" })
        let admin = try RawClient(daemon)
        #expect(admin.errorName("Fetch", "SimulateFetch") { try $0.append(Self.app) } == "org.bgtaskd.BackgroundTasks1.Error.RefreshDisabled")
        // bgtaskctl's hint names the power state, not a switch to turn on.
        let simulate = try daemon.bgtaskctl(["fetch", "simulate", Self.app])
        #expect(!simulate.succeeded && simulate.standardError.contains("restricted by the power state")
                && !simulate.standardError.contains("refresh enable"), "\(simulate)")
        try system.setOnBattery(false, percentage: 15)
        #expect(try waitFor { try app.call("Manager", "GetBackgroundRefreshStatus").readString() == "available" })
        #expect(daemon.stop() == .status(0))
        system.stop()
    }

    @Test func registrationsAndSettingsSurviveACrash() throws {
        let daemon = try daemon()
        do {
            let app = try client(daemon)
            try app.call("Fetch", "SetMinimumFetchInterval") { try $0.append(3600.0) }
            let admin = try RawClient(daemon)
            try admin.call("Manager", "SetBackgroundRefreshEnabled") { try $0.append(""); try $0.append(false) }
        }
        let before = try registration(try client(daemon))
        #expect(try daemon.crashAndRestart() == .signal(SIGKILL))
        let after = try registration(try client(daemon))
        #expect(after.policy == "custom" && after.seconds == 3600)
        #expect(after.next == before.next, "the planned fetch is remembered, not recomputed from the restart")
        #expect(try client(daemon).call("Manager", "GetBackgroundRefreshStatus").readString() == "denied")
        #expect(daemon.stop() == .status(0))
    }

    @Test func thePlanIsExplainedAndWhatIsLearnedSurvivesACrash() throws {
        let daemon = try daemon()
        do {
            // Registered while in the foreground, then to the background: an open the planner learns from.
            let app = try client(daemon)
            try app.call("Fetch", "SetMinimumFetchInterval") { try $0.append(0.0) }
            try app.call("Manager", "SetApplicationState") { try $0.append("background") }
            let apps = try daemon.bgtaskctl(["apps", "--json"])
            #expect(apps.succeeded && apps.standardOutput.contains(#""fetch_plan""#), "\(apps)")
            #expect(apps.standardOutput.contains("still learning when it is opened; a fetch every "), "\(apps)")
            let table = try daemon.bgtaskctl(["apps"])
            #expect(table.standardOutput.contains("WHY") && table.standardOutput.contains("still learning"), "\(table)")
        }
        #expect(try daemon.crashAndRestart() == .signal(SIGKILL))
        #expect(daemon.process.waitForStandardError(containing: "(1 with usage learned)"), "\(daemon.log)")
        #expect(daemon.stop() == .status(0))
    }

    /// An app the user starts checks in in the foreground, with no change of
    /// state: the planner hears that open, and does not fetch while it lasts.
    /// Before, only a later change to the foreground counted, so a registered
    /// app that the user started and quit was never seen opened.
    @Test func anAppTheUserStartsIsSeenOpen() throws {
        let daemon = try daemon()
        do {
            let app = try client(daemon)
            try app.call("Fetch", "SetMinimumFetchInterval") { try $0.append(0.0) }
            try app.call("Manager", "SetApplicationState") { try $0.append("background") }
        }
        // It quit: its connection left. Started again by the user:
        func plan() throws -> String { try daemon.bgtaskctl(["apps", "--json"]).standardOutput }
        #expect(try waitFor { try !plan().contains(#""fetch_plan":"in the foreground""#) }, "\((try? plan()) ?? "")")
        let again = try client(daemon)
        #expect(try waitFor { try plan().contains(#""fetch_plan":"in the foreground""#) }, "\((try? plan()) ?? "")")
        try again.call("Manager", "SetApplicationState") { try $0.append("background") }
        #expect(try waitFor { try !plan().contains(#""fetch_plan":"in the foreground""#) }, "\((try? plan()) ?? "")")
        #expect(daemon.stop() == .status(0))
    }

    /// A push is a wake the machine makes anyway: an app well into its
    /// spacing is fetched with it instead of waking the machine again later.
    @Test func appsFetchAlongWithAPush() throws {
        let daemon = try DaemonUnderTest(settings: ["Fetch.MinimumIntervalSec=1", "Fetch.MaximumSpacingSec=20"], desktopEntries: [
            DesktopEntrySpec(id: Self.app, modes: ["fetch"], exec: "/bin/true"),
            DesktopEntrySpec(id: "org.example.Chat", modes: ["remote-notification"], exec: "/bin/true"),
        ])
        let weather = try client(daemon)
        try weather.listen(for: "PerformFetch")
        try weather.call("Fetch", "SetMinimumFetchInterval") { try $0.append(0.0) }
        try weather.call("Manager", "SetApplicationState") { try $0.append("background") }
        let chat = try client(daemon, as: "org.example.Chat")
        try chat.listen(for: "NotificationReceived")
        // A fetch now: the next is due at most 20 s later.
        try RawClient(daemon).call("Fetch", "SimulateFetch") { try $0.append(Self.app) }
        #expect(weather.waitForSignals(1), "PerformFetch did not arrive")
        try weather.call("Fetch", "CompleteFetch") { try $0.append(try weather.received[0].readString()); try $0.append("newData") }
        let fetched = ContinuousClock.now
        let apps = try daemon.bgtaskctl(["apps", "--json"]).standardOutput
        let planned = try #require(apps.firstMatch(of: /"fetch_next_usec":(\d+)/).flatMap { UInt64($0.1) }, "\(apps)")
        #expect(planned > Self.nowMicroseconds + 10_000_000, "planned about 20 s after the fetch: \(apps)")
        // Two thirds of the way there, a push wakes Chat: Weather goes with it.
        Thread.sleep(forTimeInterval: 14 - Double((ContinuousClock.now - fetched).components.seconds))
        try RawClient(daemon).call("RemoteNotifications", "DeliverPush") { message in
            try message.append("org.example.Chat")
            try message.append(#"{"aps":{"content-available":1}}"#)
            try message.append(value: .dictionary(key: "s", value: "v", []))
        }
        #expect(chat.waitForSignals(1), "the push did not arrive")
        #expect(weather.waitForSignals(2, timeout: .seconds(4)), "Weather was not fetched with the push: \(daemon.log)")
        #expect(ContinuousClock.now < fetched + .seconds(19), "fetched with the push, not when it fell due")
        #expect(daemon.stop() == .status(0))
    }

    /// A push brings its app up to date only once the app completes it. One
    /// whose instance went without completing it took nothing in: the app's
    /// fetch stays where it was planned. Before, a push handed over put the
    /// next fetch a whole spacing later, however it ended.
    @Test func aPushTheAppDidNotCompleteDoesNotPutItsFetchOff() throws {
        let daemon = try DaemonUnderTest(settings: ["Fetch.MinimumIntervalSec=1", "Fetch.MaximumSpacingSec=60"], desktopEntries: [
            DesktopEntrySpec(id: Self.app, modes: ["fetch", "remote-notification"], exec: "/bin/true"),
        ])
        let control = try RawClient(daemon)
        func nextFetch() throws -> UInt64 {
            let entry = try control.applications().first { $0["app_id"] == .string(Self.app) }
            guard case .uint64(let next)? = entry?["fetch_next_usec"] else { throw BusError(name: "test", message: "no fetch planned: \(String(describing: entry))") }
            return next
        }
        func push() throws {
            try control.call("RemoteNotifications", "DeliverPush") { message in
                try message.append(Self.app)
                try message.append(#"{"aps":{"content-available":1}}"#)
                try message.append(value: .dictionary(key: "s", value: "v", []))
            }
        }
        var weather: RawClient? = try client(daemon)
        try weather?.listen(for: "PerformFetch")
        try weather?.call("Fetch", "SetMinimumFetchInterval") { try $0.append(0.0) }
        try weather?.call("Manager", "SetApplicationState") { try $0.append("background") }
        try control.call("Fetch", "SimulateFetch") { try $0.append(Self.app) }
        #expect(weather?.waitForSignals(1) == true, "PerformFetch did not arrive")
        let fetchToken = try #require(weather?.received.first).readString()
        try weather?.call("Fetch", "CompleteFetch") { try $0.append(fetchToken); try $0.append("newData") }
        let planned = try nextFetch()

        // A push 3 s later, which the app never completes: it goes.
        Thread.sleep(forTimeInterval: 3)
        weather?.clearReceived()
        try weather?.listen(for: "NotificationReceived")
        try push()
        #expect(weather?.waitForSignals(1) == true, "the push did not arrive")
        // The fetch mode hears of the hand-over a loop turn after the push went out.
        #expect(try waitFor { try nextFetch() > planned + 2_000_000 }, "handed over, the push counts until it ends: \(daemon.log)")
        weather = nil
        #expect(try waitFor { try nextFetch() < planned + 1_000_000 }, "\((try? nextFetch()) ?? 0) against \(planned): \(daemon.log)")

        // That a completed push still counts is the planner's (AdaptivePlannerTests.aPushNotTakenInLeavesTheAppAsItWas):
        // here an instance's open, which counts too, moves the plan as much under load.
        #expect(daemon.stop() == .status(0))
    }

    /// Polls `condition` for up to 10 s.
    func waitFor(_ condition: () throws -> Bool) throws -> Bool {
        let deadline = ContinuousClock.now + .seconds(10)
        while ContinuousClock.now < deadline {
            if try condition() { return true }
            Thread.sleep(forTimeInterval: 0.05)
        }
        return try condition()
    }
}
