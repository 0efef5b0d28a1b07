import BgTaskTestKit
import Foundation
import SDBus
import Testing

/// Remote notifications through the real daemon and its plugin: bad input,
/// delivery to a running app, the silent budget and its piggyback, collapse,
/// expiration, alerts shown, untrusted callers, and durability across a crash.
@Suite struct PushTests {
    static let app = "org.example.Chat"
    static let prefix = "org.bgtaskd.BackgroundTasks1.Error."

    func daemon(_ settings: [String] = [], bus: PrivateBus? = nil) throws -> DaemonUnderTest {
        try DaemonUnderTest(settings: settings, bus: bus, desktopEntries: [
            DesktopEntrySpec(id: Self.app, name: "Chat", modes: ["remote-notification"], exec: "/bin/false"),
            DesktopEntrySpec(id: "org.example.Plain", modes: ["fetch"], exec: "/bin/false"),
        ])
    }

    /// A DeliverPush call's builder.
    static func push(_ json: String, app: String = PushTests.app, options: [String: BusValue] = [:]) -> (Message) throws -> Void {
        { message in
            try message.append(app)
            try message.append(json)
            try message.append(value: .dictionary(key: "s", value: "v", options.sorted { $0.key < $1.key }.map {
                .init(key: .string($0.key), value: .variant($0.value))
            }))
        }
    }

    /// A connection checked in as the app, listening for its pushes.
    func app(_ daemon: DaemonUnderTest) throws -> RawClient {
        let client = try RawClient(daemon)
        try client.listen(for: "NotificationReceived")
        try client.call("Manager", "CheckIn") { try $0.append(Self.app) }
        return client
    }

    func payloads(_ client: RawClient) throws -> [String] {
        try client.received.map { message in
            try message.rewind()
            _ = try message.readString()
            return try message.readString()
        }
    }

    /// The token and payload of the first push `client` received.
    func firstPush(_ client: RawClient) throws -> (token: String, json: String) {
        // Required, not indexed: a failure must end the test, not crash the run (and leave its daemon behind).
        let received = try #require(client.received.first)
        try received.rewind()
        return (try received.readString(), try received.readString())
    }

    func held(_ client: RawClient, app: String = PushTests.app) throws -> [[String: BusValue]] {
        let reply = try client.call("RemoteNotifications", "ListPushes") { try $0.append(app) }
        guard case .array(_, let pushes) = try reply.readValue() else { return [] }
        return pushes.map { push in
            guard case .dictionary(_, _, let entries) = push else { return [:] }
            var fields: [String: BusValue] = [:]
            for entry in entries { if case .string(let key) = entry.key { fields[key] = entry.value.unwrapped } }
            return fields
        }
    }

    /// A push with expiration 0 ("now or never") was kept when it could not
    /// reach the app now: sent while the machine slept it came after the
    /// wake, and after a failed launch it waited for the app's next start.
    @Test func aPushForNowOrNeverThatCannotGoNowIsDropped() throws {
        let daemon = try daemon()
        let sender = try RawClient(daemon)
        let silent = #"{"aps":{"content-available":1}}"#
        try sender.call("Manager", "SimulateSleep")
        #expect(sender.errorName("RemoteNotifications", "DeliverPush", Self.push(silent, options: ["expiration": .uint64(0)])) == nil)
        #expect(daemon.waitForLog(containing: "it had expiration 0 (now or never) and the machine sleeps"), "\(daemon.log)")
        #expect(try held(sender).isEmpty)
        try sender.call("Manager", "SimulateWake")
        // Awake, the app is launched for it; the launch fails (/bin/false), and the push goes.
        #expect(sender.errorName("RemoteNotifications", "DeliverPush", Self.push(silent, options: ["expiration": .uint64(0)])) == nil)
        #expect(daemon.waitForLog(containing: "it had expiration 0 (now or never) and its wake did not happen", timeout: .seconds(20)),
                "\(daemon.log)")
        #expect(try held(sender).isEmpty)
        #expect(daemon.stop() == .status(0))
    }

    @Test func badInputIsRefusedWithTheReason() throws {
        let daemon = try daemon(["RemoteNotifications.MaxPayloadBytes=4096"])
        let sender = try RawClient(daemon)
        let invalid = "org.freedesktop.DBus.Error.InvalidArgs"
        let deep = #"{"aps":{},"d":"# + String(repeating: "[", count: 40) + String(repeating: "]", count: 40) + "}"
        let cases: [(String, String)] = [
            ("not json", invalid), ("[1]", invalid), (#"{"x":1}"#, invalid), (#"{"aps":[]}"#, invalid),
            (deep, invalid), (#"{"aps":{"alert":"\ud800"}}"#, invalid),
            (#"{"aps":{},"pad":""# + String(repeating: "x", count: 5000) + #""}"#, Self.prefix + "PayloadTooLarge"),
        ]
        for (json, expected) in cases {
            #expect(sender.errorName("RemoteNotifications", "DeliverPush", Self.push(json)) == expected, "\(json.prefix(40))")
        }
        let good = #"{"aps":{"content-available":1}}"#
        #expect(sender.errorName("RemoteNotifications", "DeliverPush", Self.push(good, app: "org.example.Nobody")) == Self.prefix + "UnknownApplication")
        #expect(sender.errorName("RemoteNotifications", "DeliverPush", Self.push(good, app: "org.example.Plain")) == Self.prefix + "ModeNotDeclared")
        #expect(sender.errorName("RemoteNotifications", "DeliverPush", Self.push(good, app: "bad id")) == invalid)
        #expect(sender.errorName("RemoteNotifications", "DeliverPush", Self.push(good, options: ["priority": .string("10")])) == invalid)
        #expect(sender.errorName("RemoteNotifications", "DeliverPush", Self.push(good, options: ["priority": .uint32(7)])) == invalid)
        #expect(sender.errorName("RemoteNotifications", "DeliverPush", Self.push(good, options: ["expiration": .uint32(5)])) == invalid)
        #expect(sender.errorName("RemoteNotifications", "DeliverPush", Self.push(good, options: ["unknown": .string("dropped")])) == nil,
                "unknown options are dropped")
        #expect(sender.errorName("RemoteNotifications", "CompleteNotification") { try $0.append("nope"); try $0.append("newData") }
                == Self.prefix + "NoSuchToken")
        #expect(sender.errorName("RemoteNotifications", "CompleteNotification") { try $0.append("nope"); try $0.append("maybe") }
                == invalid)
        let badResult = #expect(throws: BusError.self) {
            try sender.call("RemoteNotifications", "CompleteNotification") { try $0.append("nope"); try $0.append("maybe") }
        }
        #expect(badResult?.message.hasPrefix("unknown notification result 'maybe'") == true, "\(String(describing: badResult))")
        #expect(daemon.stop() == .status(0))
    }

    /// `scripts/install-examples` followed at once by a push to one of its
    /// apps was answered UnknownApplication: the entry waited for the
    /// registry's debounce. A call naming the app finds it at once now.
    @Test func anAppInstalledAMomentAgoTakesAPushAtOnce() throws {
        let daemon = try daemon()
        let sender = try RawClient(daemon)
        try daemon.installDesktopEntry(DesktopEntrySpec(id: "org.example.Fresh", name: "Fresh", modes: ["remote-notification"], exec: "/bin/false"))
        let id = try sender.call("RemoteNotifications", "DeliverPush", Self.push(#"{"aps":{"alert":"hi"}}"#, app: "org.example.Fresh")).readString()
        #expect(id.hasPrefix("p"), "\(id)")
        let listed = try daemon.bgtaskctl(["apps"])
        #expect(listed.standardOutput.contains("org.example.Fresh"), "\(listed)")
        #expect(daemon.stop() == .status(0))
    }

    @Test func untrustedCallersMayNotDeliver() throws {
        let bus = try PrivateBus(allowOtherUsers: true)
        let daemon = try daemon(bus: bus)
        let result = try CommandResult.run("/usr/sbin/runuser", [
            "-u", "nobody", "--", "/usr/bin/gdbus", "call", "--address", bus.address, "--dest", "org.bgtaskd.BackgroundTasks1",
            "--object-path", "/org/bgtaskd/BackgroundTasks1",
            "--method", "org.bgtaskd.BackgroundTasks1.RemoteNotifications.DeliverPush", Self.app, #"{"aps":{"alert":"hi"}}"#, "{}",
        ])
        #expect(result.standardError.contains(Self.prefix + "NotPermitted"), "\(result)")
        // Trust is checked before the arguments are read: bad options from a stranger are not even looked at.
        let badOptions = try CommandResult.run("/usr/sbin/runuser", [
            "-u", "nobody", "--", "/usr/bin/gdbus", "call", "--address", bus.address, "--dest", "org.bgtaskd.BackgroundTasks1",
            "--object-path", "/org/bgtaskd/BackgroundTasks1",
            "--method", "org.bgtaskd.BackgroundTasks1.RemoteNotifications.DeliverPush", Self.app, "not json",
            "{'priority': <'ten'>}",
        ])
        #expect(badOptions.standardError.contains(Self.prefix + "NotPermitted"), "\(badOptions)")
        #expect(try held(try RawClient(daemon)).isEmpty)
        #expect(daemon.stop() == .status(0))
    }

    @Test func runningAppGetsItsPushAndCompletesItOnce() throws {
        let daemon = try daemon()
        let app = try app(daemon)
        let sender = try RawClient(daemon)
        let id = try sender.call("RemoteNotifications", "DeliverPush", Self.push(#"{"aps":{"content-available":1},"content-id":42}"#)).readString()
        #expect(id.hasPrefix("p"))
        #expect(app.waitForSignals(1))
        #expect(try payloads(app) == [#"{"aps":{"content-available":1},"content-id":42}"#])
        try app.received[0].rewind()
        let token = try app.received[0].readString()
        let stranger = try RawClient(daemon)
        try stranger.call("Manager", "CheckIn") { try $0.append("org.example.Plain") }
        #expect(stranger.errorName("RemoteNotifications", "CompleteNotification") { try $0.append(token); try $0.append("newData") }
                == Self.prefix + "NoSuchToken")
        // Another mode's completion does not spend it (it did: the push then stayed held for ever).
        #expect(app.errorName("Location", "CompleteEvent") { try $0.append(token) } == Self.prefix + "NoSuchToken")
        #expect(app.errorName("Transfers", "CompleteEvents") { try $0.append(token) } == Self.prefix + "NoSuchToken")
        try app.call("RemoteNotifications", "CompleteNotification") { try $0.append(token); try $0.append("newData") }
        #expect(app.errorName("RemoteNotifications", "CompleteNotification") { try $0.append(token); try $0.append("newData") }
                == Self.prefix + "NoSuchToken")
        #expect(try held(sender).isEmpty, "a completed push is gone")
        #expect(!daemon.log.contains("launched \(Self.app)"))
        #expect(daemon.stop() == .status(0))
    }

    @Test func silentBudgetHoldsTheRestUntilTheNextAlert() throws {
        let daemon = try daemon(["RemoteNotifications.SilentPerHour=2"])
        let app = try app(daemon)
        try app.call("Manager", "SetApplicationState") { try $0.append("background") }
        let sender = try RawClient(daemon)
        for i in 1...5 {
            try sender.call("RemoteNotifications", "DeliverPush", Self.push(#"{"aps":{"content-available":1},"n":\#(i)}"#))
        }
        #expect(app.waitForSignals(2))
        #expect(!app.waitForSignals(3, timeout: .milliseconds(500)), "only two silent wakes per hour")
        let waiting = try held(sender)
        #expect(waiting.filter { $0["state"] == .string("held") }.count == 3)
        try sender.call("RemoteNotifications", "DeliverPush", Self.push(#"{"aps":{"alert":"hello"}}"#))
        #expect(app.waitForSignals(6), "the alert and the three held pushes")
        let received = try payloads(app)
        for i in 3...5 { #expect(received.contains(#"{"aps":{"content-available":1},"n":\#(i)}"#)) }
        #expect(received.contains(#"{"aps":{"alert":"hello"}}"#))
        #expect(daemon.stop() == .status(0))
    }

    /// The hourly budget counts background wakes: an app open in the
    /// foreground got three silent pushes an hour and held the rest, which
    /// nothing then delivered while it stayed open. What was held while it
    /// was in the background goes when the user opens it.
    @Test func anAppInTheForegroundGetsEverySilentPushAndWhatWasHeldWhenOpened() throws {
        let daemon = try daemon(["RemoteNotifications.SilentPerHour=2"])
        let app = try app(daemon)
        let sender = try RawClient(daemon)
        try app.call("Manager", "SetApplicationState") { try $0.append("active") }
        for i in 1...5 {
            try sender.call("RemoteNotifications", "DeliverPush", Self.push(#"{"aps":{"content-available":1},"n":\#(i)}"#))
        }
        #expect(app.waitForSignals(5), "\(daemon.log.suffix(2000))")
        try app.call("Manager", "SetApplicationState") { try $0.append("background") }
        for i in 6...9 {
            try sender.call("RemoteNotifications", "DeliverPush", Self.push(#"{"aps":{"content-available":1},"n":\#(i)}"#))
        }
        #expect(app.waitForSignals(7))
        #expect(!app.waitForSignals(8, timeout: .milliseconds(500)), "in the background the budget holds")
        try app.call("Manager", "SetApplicationState") { try $0.append("active") }
        #expect(app.waitForSignals(9), "opened: the held ones go to it")
        #expect(Set(try payloads(app)).count == 9)
        #expect(daemon.stop() == .status(0))
    }

    @Test func refreshSwitchedOffHoldsSilentPushesAndAlertsUntilItIsOnAgain() throws {
        let daemon = try daemon()
        let app = try app(daemon)
        let sender = try RawClient(daemon)
        // Delivered while refresh is on (the plugin now knows the app).
        try sender.call("RemoteNotifications", "DeliverPush", Self.push(#"{"aps":{"content-available":1},"n":1}"#))
        #expect(app.waitForSignals(1))
        // Refresh governs background wakes: an app in the foreground is not held (see below).
        try app.call("Manager", "SetApplicationState") { try $0.append("background") }
        try sender.call("Manager", "SetBackgroundRefreshEnabled") { try $0.append(Self.app); try $0.append(false) }
        try sender.call("RemoteNotifications", "DeliverPush", Self.push(#"{"aps":{"content-available":1},"n":2}"#))
        try sender.call("RemoteNotifications", "DeliverPush", Self.push(#"{"aps":{"alert":"hi"},"n":3}"#))
        #expect(!app.waitForSignals(2, timeout: .milliseconds(500)), "no background wake while refresh is off")
        #expect(try held(sender).filter { $0["state"] == .string("held") }.count == 2)
        // Checking in again in the background (as the SDK does when the daemon
        // restarts) is no open by the user: still held. It delivered them all.
        try app.call("Manager", "CheckIn") { try $0.append(Self.app) }
        try app.call("Manager", "SetApplicationState") { try $0.append("background") }
        #expect(!app.waitForSignals(2, timeout: .milliseconds(500)), "no wake on a check-in in the background: \(daemon.log)")
        #expect(try held(sender).filter { $0["state"] == .string("held") }.count == 2)
        try sender.call("Manager", "SetBackgroundRefreshEnabled") { try $0.append(Self.app); try $0.append(true) }
        #expect(app.waitForSignals(3), "refresh on again: the held alert wakes the app at once, the silent push rides along")
        try sender.call("RemoteNotifications", "DeliverPush", Self.push(#"{"aps":{"alert":"again"},"n":4}"#))
        #expect(app.waitForSignals(4), "a new alert wakes the app")
        #expect(daemon.stop() == .status(0))
    }

    /// Refresh switched off held every push, even from an app the user had
    /// open in the foreground, which got them only when it checked in
    /// again. As on iOS, refresh governs background wakes only.
    @Test func anAppInTheForegroundGetsItsPushesWhileRefreshIsOff() throws {
        let daemon = try daemon()
        let app = try app(daemon)
        let sender = try RawClient(daemon)
        try app.call("Manager", "SetApplicationState") { try $0.append("active") }
        try sender.call("Manager", "SetBackgroundRefreshEnabled") { try $0.append(Self.app); try $0.append(false) }
        try sender.call("RemoteNotifications", "DeliverPush", Self.push(#"{"aps":{"alert":"hi"},"n":1}"#))
        #expect(app.waitForSignals(1), "\(daemon.log)")
        try app.call("Manager", "SetApplicationState") { try $0.append("background") }
        try sender.call("RemoteNotifications", "DeliverPush", Self.push(#"{"aps":{"alert":"later"},"n":2}"#))
        #expect(!app.waitForSignals(2, timeout: .milliseconds(500)), "in the background it is held")
        #expect(try held(sender).filter { $0["state"] == .string("held") }.count == 1)
        #expect(daemon.stop() == .status(0))
    }

    /// Which apps held an alert because refresh was off was known only in
    /// memory: after a restart, switching refresh on left the alert waiting
    /// for some unrelated wake.
    @Test func anAlertHeldForRefreshGoesWhenItIsOnAgainAfterARestart() throws {
        let daemon = try daemon()
        var sender = try RawClient(daemon)
        try sender.call("Manager", "SetBackgroundRefreshEnabled") { try $0.append(Self.app); try $0.append(false) }
        try sender.call("RemoteNotifications", "DeliverPush", Self.push(#"{"aps":{"alert":"hi"}}"#))
        #expect(try daemon.crashAndRestart() == .signal(SIGKILL))
        sender = try RawClient(daemon)
        #expect(try held(sender).map { $0["state"] } == [.string("held")])
        #expect(!daemon.log.contains("for remote-notification"), "not launched while refresh is off: \(daemon.log)")
        try sender.call("Manager", "SetBackgroundRefreshEnabled") { try $0.append(Self.app); try $0.append(true) }
        #expect(daemon.waitForLog(containing: "for remote-notification"), "launched for its alert at once: \(daemon.log)")
        #expect(daemon.stop() == .status(0))
    }

    /// After a restart the daemon learns of power saver only after the
    /// plugin has started: an alert held by it was not known as held for
    /// refresh, and waited past the end of power saver for some other wake.
    @Test func anAlertHeldByPowerSaverGoesWhenItEndsAfterARestart() throws {
        let system = try MockSystemBus(services: [.powerProfiles(profile: "power-saver")])
        defer { system.stop() }
        let daemon = try DaemonUnderTest(desktopEntries: [
            DesktopEntrySpec(id: Self.app, name: "Chat", modes: ["remote-notification"], exec: "/bin/false"),
        ], environment: system.environment)
        var sender = try RawClient(daemon)
        func status() throws -> String? {
            try sender.applications().first { $0["app_id"] == .string(Self.app) }?["refresh_status"].flatMap {
                if case .string(let text) = $0 { text } else { nil }
            }
        }
        #expect(try FetchTests().waitFor { try status() == "restricted" }, "\(daemon.log)")
        try sender.call("RemoteNotifications", "DeliverPush", Self.push(#"{"aps":{"alert":"hi"}}"#))
        #expect(try daemon.crashAndRestart() == .signal(SIGKILL))
        sender = try RawClient(daemon)
        #expect(try FetchTests().waitFor { try status() == "restricted" }, "\(daemon.log)")
        #expect(!daemon.log.contains("for remote-notification"), "not launched in power saver: \(daemon.log)")
        try system.setPowerProfile("balanced")
        #expect(daemon.waitForLog(containing: "for remote-notification"), "launched for its alert once power saver ends: \(daemon.log)")
        #expect(daemon.stop() == .status(0))
    }

    /// An alert for an app that cannot be launched made every held push due
    /// and stored each, failed to wake the app, held them again and stored
    /// each again: two writes per held push for every alert (90 ms a push
    /// with 1,000 held, other callers waiting meanwhile). A wake that cannot
    /// be had now writes nothing but the new push. Seen in the write-ahead
    /// log's growth, which the rewrites made about tenfold.
    @Test func anAlertForAnAppThatCannotBeLaunchedDoesNotRewriteItsHeldPushes() throws {
        let daemon = try daemon(["RemoteNotifications.SilentPerHour=0"])
        let sender = try RawClient(daemon)
        let padding = String(repeating: "x", count: 1000)
        for n in 0..<100 {
            try sender.call("RemoteNotifications", "DeliverPush", Self.push(#"{"aps":{"content-available":1},"n":\#(n),"pad":"\#(padding)"}"#))
        }
        // The first alert launches /bin/false, which exits without checking in: the wake fails, all wait.
        try sender.call("RemoteNotifications", "DeliverPush", Self.push(#"{"aps":{"alert":"first"}}"#))
        #expect(daemon.waitForLog(containing: "a push wake of \(Self.app) failed"), "\(daemon.log)")
        #expect(try held(sender).allSatisfy { $0["state"] == .string("held") })
        let wal = daemon.stateDirectory + "/bgtaskd.sqlite3-wal"
        func size() -> Int { ((try? FileManager.default.attributesOfItem(atPath: wal))?[.size] as? Int) ?? 0 }
        let before = size()
        #expect(before > 0)
        // Launches are backed off now: each wake fails at once.
        for n in 0..<10 {
            try sender.call("RemoteNotifications", "DeliverPush", Self.push(#"{"aps":{"alert":"again"},"n":\#(n)}"#))
        }
        let grown = size() - before
        #expect(grown < 400_000, "the log grew by \(grown) bytes for ten alerts: \(daemon.log.suffix(1500))")
        #expect(try held(sender).count == 111)
        // One warning says the app cannot be woken; the same refusal of each push after it is no news
        // (a sender of thousands of pushes wrote thousands of warnings).
        let warnings = daemon.log.split(separator: "\n").filter { $0.contains("warning") && $0.contains("cannot wake \(Self.app) for push") }
        #expect(warnings.count == 1, "\(warnings)")
        #expect(daemon.stop() == .status(0))
    }

    /// An alert held because its app could not be launched waited for some
    /// later wake after the app's desktop entry was fixed (found by an
    /// outside test). It goes when the entry changes.
    @Test func anAlertHeldForAFailedLaunchGoesWhenTheAppsEntryIsFixed() throws {
        let daemon = try daemon()
        let sender = try RawClient(daemon)
        try sender.call("RemoteNotifications", "DeliverPush", Self.push(#"{"aps":{"alert":"news"}}"#))
        #expect(daemon.waitForLog(containing: "a push wake of \(Self.app) failed"), "\(daemon.log)")
        let testapp = BinaryLocator.path(of: "bgtaskd-testapp")
        try daemon.installDesktopEntry(DesktopEntrySpec(
            id: Self.app, name: "Chat", modes: ["remote-notification"], exec: "\(testapp) --push-result newData --tasks 0 --hold 30"))
        #expect(daemon.waitForLog(containing: "launched \(Self.app)", timeout: .seconds(20)), "\(daemon.log)")
        #expect(daemon.waitForLog(containing: "completed push", timeout: .seconds(20)), "\(daemon.log.suffix(2000))")
        #expect(try held(sender).isEmpty)
        #expect(daemon.stop() == .status(0))
    }

    /// An alert held because its wake ran out (an offence) waits for the
    /// app's next wake: switching refresh off and on again is none.
    @Test func anAlertHeldAfterAMissedWakeWaitsForTheNextWake() throws {
        let daemon = try daemon(["RemoteNotifications.WakeBudgetSec=1"])
        let app = try app(daemon)
        let sender = try RawClient(daemon)
        try sender.call("RemoteNotifications", "DeliverPush", Self.push(#"{"aps":{"alert":"hi"}}"#))
        #expect(app.waitForSignals(1))
        #expect(daemon.waitForLog(containing: "offence counted"), "\(daemon.log)")
        for enabled in [false, true] {
            try sender.call("Manager", "SetBackgroundRefreshEnabled") { try $0.append(""); try $0.append(enabled) }
        }
        #expect(!app.waitForSignals(2, timeout: .seconds(1)), "not woken again by the switch")
        #expect(daemon.stop() == .status(0))
    }

    /// A push waiting its turn behind the sixteen on their way, which expired
    /// meanwhile, does not reach the app when its turn comes: it goes.
    @Test func aPushThatExpiredWaitingItsTurnIsNotWokenFor() throws {
        let daemon = try daemon()
        let app = try app(daemon)
        let sender = try RawClient(daemon)
        for index in 0..<16 { try sender.call("RemoteNotifications", "DeliverPush", Self.push(#"{"aps":{"alert":"n\#(index)"}}"#)) }
        let now = UInt64(Date().timeIntervalSince1970)
        let late = try sender.call("RemoteNotifications", "DeliverPush",
                                   Self.push(#"{"aps":{"alert":"late"}}"#, options: ["expiration": .uint64(now + 2)])).readString()
        #expect(app.waitForSignals(16))
        Thread.sleep(forTimeInterval: 3.5)
        let (token, _) = try firstPush(app)
        try app.call("RemoteNotifications", "CompleteNotification") { try $0.append(token); try $0.append("newData") }
        #expect(daemon.waitForLog(containing: "dropped push \(late) for \(Self.app): it expired before it reached the app"), "\(daemon.log)")
        #expect(!app.waitForSignals(17, timeout: .seconds(1)), "not delivered")
        #expect(daemon.stop() == .status(0))
    }

    /// An app that missed the pushes handed to it together was counted an
    /// offence for each, and sent a SIGTERM, with its log line, as each
    /// one's wake ran out (found by an outside test). One offence, one SIGTERM.
    @Test func pushesMissedTogetherAreOneOffenceAndOneSIGTERM() throws {
        // Alive through the grace after its SIGTERM, as an app that takes its time to quit.
        let daemon = try daemon(["RemoteNotifications.WakeBudgetSec=2", "Tasks.KillGraceSec=3"])
        let app = try daemon.startTestApp([
            "--app-id", Self.app, "--push-result", "never", "--background", "--tasks", "0", "--hold", "60", "--ignore-sigterm",
        ])
        defer { app.stop() }
        let pid = try #require(app.waitForEvent("ready")?["pid"] as? Int)
        let sender = try RawClient(daemon)
        for index in 1...5 {
            try sender.call("RemoteNotifications", "DeliverPush", Self.push(#"{"aps":{"alert":"n\#(index)"}}"#))
            Thread.sleep(forTimeInterval: 0.05)
        }
        #expect(app.waitForEvents("notification", count: 5).count == 5, "\(app.lines)")
        #expect(daemon.waitForLog(containing: "SIGKILL", timeout: .seconds(20)), "\(daemon.log)")
        let chat = try sender.applications().first { $0["app_id"] == .string(Self.app) }
        #expect(chat?["push_offences"] == .uint64(1), "\(String(describing: chat))")
        // bgtaskctl apps shows it among the NOTES, not only in --json.
        let apps = try daemon.bgtaskctl(["apps"])
        #expect(apps.standardOutput.contains("1 push offence"), "\(apps)")
        let terms = daemon.log.components(separatedBy: "overstayed its background time: SIGTERM pid=\(pid)").count - 1
        #expect(terms == 1, "\(daemon.log)")
        #expect(daemon.stop() == .status(0))
    }

    /// A push handed to an instance that crashed waited out its budget, was
    /// counted an offence, and reached the app's next instance only at some
    /// later wake. Now it goes to the next instance as it checks in.
    @Test func aPushWhoseInstanceCrashedGoesToTheNextOne() throws {
        let daemon = try daemon(["RemoteNotifications.WakeBudgetSec=3"])
        let sender = try RawClient(daemon)
        var crashed: RawClient? = try app(daemon)
        try sender.call("RemoteNotifications", "DeliverPush", Self.push(#"{"aps":{"content-available":1},"n":1}"#))
        #expect(crashed?.waitForSignals(1) == true)
        crashed = nil  // never completes it: gone
        Thread.sleep(forTimeInterval: 0.3)
        let next = try app(daemon)
        #expect(next.waitForSignals(1), "\(daemon.log)")
        let (token, json) = try firstPush(next)
        #expect(json.contains(#""n":1"#))
        try next.call("RemoteNotifications", "CompleteNotification") { try $0.append(token); try $0.append("newData") }
        Thread.sleep(forTimeInterval: 3.5)
        #expect(!daemon.log.contains("offence counted"), "\(daemon.log)")
        let chat = try sender.applications().first { $0["app_id"] == .string(Self.app) }
        #expect(chat?["push_offences"] == .uint64(0), "\(String(describing: chat))")
        #expect(daemon.stop() == .status(0))
    }

    /// Two instances run; the push goes to one, which goes without completing
    /// it. The other, still running, gets it at once. Before, it was held for
    /// "the next instance's CheckIn", which a running instance never makes:
    /// it waited for the next push to the app.
    @Test func aPushWhoseInstanceWentGoesToTheOneStillRunning() throws {
        let daemon = try daemon()
        let sender = try RawClient(daemon)
        let stays = try app(daemon)
        var goes: RawClient? = try app(daemon)
        try sender.call("RemoteNotifications", "DeliverPush", Self.push(#"{"aps":{"content-available":1},"n":1}"#))
        // The wake goes to one of them: the newest connection.
        #expect(goes?.waitForSignals(1, timeout: .seconds(5)) == true || stays.waitForSignals(1, timeout: .seconds(1)), "\(daemon.log)")
        if !stays.received.isEmpty {
            Issue.record("the push went to the older instance: this test needs it at the newer one")
            return
        }
        goes = nil
        #expect(stays.waitForSignals(1), "the running instance did not get the push: \(daemon.log)")
        let (token, json) = try firstPush(stays)
        #expect(json.contains(#""n":1"#))
        try stays.call("RemoteNotifications", "CompleteNotification") { try $0.append(token); try $0.append("newData") }
        #expect(try held(sender).isEmpty)
        #expect(daemon.stop() == .status(0))
    }

    /// An app that checked in with thousands of held pushes was handed a
    /// wake for each in one batch: the daemon stalled for seconds, and the
    /// budgets ran out meanwhile, each an offence. Sixteen go at a time now.
    @Test func heldPushesGoSixteenAtATimeAsTheyAreCompleted() throws {
        let daemon = try daemon(["RemoteNotifications.SilentPerHour=1000000"])
        let sender = try RawClient(daemon)
        try sender.call("Manager", "SetBackgroundRefreshEnabled") { try $0.append(Self.app); try $0.append(false) }
        let total = 100
        for n in 0..<total {
            try sender.call("RemoteNotifications", "DeliverPush", Self.push(#"{"aps":{"content-available":1},"n":\#(n)}"#))
        }
        try sender.call("Manager", "SetBackgroundRefreshEnabled") { try $0.append(Self.app); try $0.append(true) }
        let app = try app(daemon)
        var delivered: [Int] = []
        var handled = 0
        while delivered.count < total {
            #expect(app.waitForSignals(handled + 1), "\(delivered.count) of \(total) delivered: \(daemon.log.suffix(2000))")
            guard app.received.count > handled else { break }
            // Whatever else was coming has come by now.
            _ = app.waitForSignals(handled + 17, timeout: .milliseconds(200))
            #expect(app.received.count - handled <= 16, "\(app.received.count - handled) in flight")
            for message in app.received[handled...] {
                try message.rewind()
                let token = try message.readString()
                let json = try message.readString()
                delivered.append(Int(json.split(separator: ":").last?.dropLast() ?? "") ?? -1)
                try app.call("RemoteNotifications", "CompleteNotification") { try $0.append(token); try $0.append("newData") }
            }
            handled = app.received.count
        }
        #expect(delivered == Array(0..<total), "each once, oldest first")
        #expect(try held(sender).isEmpty)
        #expect(daemon.stop() == .status(0))
    }

    /// Silent pushes for an app that cannot be launched spent the hourly
    /// budget on wakes that never happened: once the app was fixed, its
    /// silent pushes waited up to an hour. The budget counts wakes.
    @Test func wakesThatFailSpendNoSilentBudget() throws {
        let daemon = try daemon(["RemoteNotifications.SilentPerHour=3"])
        let sender = try RawClient(daemon)
        // The app is not running: each push launches /bin/false, which exits without checking in.
        for n in 1...3 {
            try sender.call("RemoteNotifications", "DeliverPush", Self.push(#"{"aps":{"content-available":1},"n":\#(n)}"#))
        }
        #expect(daemon.waitForLog(containing: "a push wake of \(Self.app) failed", timeout: .seconds(20)), "\(daemon.log)")
        let deadline = ContinuousClock.now + .seconds(10)
        func allHeld() throws -> Bool { try held(sender).filter { $0["state"] == .string("held") }.count == 3 }
        while try !allHeld(), ContinuousClock.now < deadline { Thread.sleep(forTimeInterval: 0.1) }
        #expect(try allHeld(), "\(daemon.log.suffix(2000))")
        let state = try sender.applications().first { $0["app_id"] == .string(Self.app) } ?? [:]
        guard case .double(let budget)? = state["silent_budget"] else {
            Issue.record("no silent_budget in \(state)")
            return
        }
        #expect(budget > 2.9, "no wake happened, so no token is spent: \(budget)")
        #expect(daemon.stop() == .status(0))
    }

    @Test func countersAndTheSilentBudgetSurviveACrash() throws {
        let daemon = try daemon(["RemoteNotifications.SilentPerHour=2"])
        let app = try app(daemon)
        try app.call("Manager", "SetApplicationState") { try $0.append("background") }
        var sender = try RawClient(daemon)
        for i in 1...5 {
            try sender.call("RemoteNotifications", "DeliverPush", Self.push(#"{"aps":{"content-available":1},"n":\#(i)}"#))
        }
        #expect(app.waitForSignals(2))
        func state() throws -> [String: BusValue] { try sender.applications().first { $0["app_id"] == .string(Self.app) } ?? [:] }
        let before = try state()
        #expect(before["pushes_received"] == .uint64(5))
        #expect(try daemon.crashAndRestart() == .signal(SIGKILL))
        sender = try RawClient(daemon)
        let after = try state()
        #expect(after["pushes_received"] == .uint64(5), "\(after)")
        #expect(after["pushes_held"] == .uint64(3), "\(after)")
        guard case .double(let budget)? = after["silent_budget"] else {
            Issue.record("no silent_budget in \(after)")
            return
        }
        #expect(budget < 1, "the two silent wakes spent before the crash stay spent: \(budget)")
        #expect(!daemon.log.contains("JSONEncoder"), "records are written by hand")
        #expect(daemon.stop() == .status(0))
    }

    @Test func collapseAndExpiration() throws {
        let daemon = try daemon(["RemoteNotifications.SilentPerHour=0"])
        let sender = try RawClient(daemon)
        let silent = #"{"aps":{"content-available":1}}"#
        let now = UInt64(Date().timeIntervalSince1970)
        try sender.call("RemoteNotifications", "DeliverPush", Self.push(silent, options: ["collapse_id": .string("score")]))
        let newer = try sender.call("RemoteNotifications", "DeliverPush",
                                    Self.push(#"{"aps":{"content-available":1},"v":2}"#, options: ["collapse_id": .string("score")])).readString()
        try sender.call("RemoteNotifications", "DeliverPush", Self.push(silent, options: ["expiration": .uint64(now - 10)]))
        try sender.call("RemoteNotifications", "DeliverPush", Self.push(silent, options: ["expiration": .uint64(0)]))
        // Whole seconds: up to one of the margin is gone already, and a busy machine may take another.
        let soon = UInt64(Date().timeIntervalSince1970) + 5
        try sender.call("RemoteNotifications", "DeliverPush", Self.push(silent, options: ["expiration": .uint64(soon)]))
        var waiting = try held(sender)
        #expect(waiting.count == 2, "the collapsed one and the expired ones are gone: \(waiting)")
        #expect(waiting.contains { $0["push_id"] == .string(newer) })
        // The last expires while held.
        Thread.sleep(forTimeInterval: max(0, Double(soon) - Date().timeIntervalSince1970) + 1.5)
        waiting = try held(sender)
        #expect(waiting.map { $0["push_id"] } == [.string(newer)], "\(waiting)")
        #expect(daemon.waitForLog(containing: "it expired"))
        // The app checks in: CheckIn's pending counts the push held for it, which follows.
        let app = try RawClient(daemon)
        try app.listen(for: "NotificationReceived")
        let launch = try app.call("Manager", "CheckIn") { try $0.append(Self.app) }
        guard case .dictionary(_, _, let entries) = try launch.readValue() else { return #expect(Bool(false)) }
        #expect(entries.first { $0.key == .string("pending") }?.value.unwrapped == .uint32(1), "\(entries)")
        #expect(app.waitForSignals(1))
        #expect(daemon.stop() == .status(0))
    }

    /// Pushes on their way while the machine slept reached the app at the
    /// wake even when they had expired meanwhile, and both of two with one
    /// collapse id came (found by an outside test). The expired one and the
    /// older of the two go at the wake; the rest reach the app.
    @Test func pushesThatWentStaleOnTheirWayDoNotReachTheApp() throws {
        let daemon = try daemon()
        let app = try daemon.startTestApp(["--app-id", Self.app, "--push-result", "newData", "--background", "--tasks", "0", "--hold", "60"])
        defer { app.stop() }
        #expect(app.waitForEvent("ready") != nil)
        let sender = try RawClient(daemon)
        try sender.call("Manager", "SimulateSleep")
        let now = UInt64(Date().timeIntervalSince1970)
        let expiring = try sender.call("RemoteNotifications", "DeliverPush",
                                       Self.push(#"{"aps":{"alert":"soon gone"}}"#, options: ["expiration": .uint64(now + 3)])).readString()
        let older = try sender.call("RemoteNotifications", "DeliverPush",
                                    Self.push(#"{"aps":{"alert":"1-0"}}"#, options: ["collapse_id": .string("score")])).readString()
        try sender.call("RemoteNotifications", "DeliverPush", Self.push(#"{"aps":{"alert":"2-0"}}"#, options: ["collapse_id": .string("score")]))
        try sender.call("RemoteNotifications", "DeliverPush", Self.push(#"{"aps":{"alert":"plain"}}"#, options: ["expiration": .uint64(now + 600)]))
        // Past the expiration (whole seconds: up to 4 s from now).
        Thread.sleep(forTimeInterval: 4.5)
        #expect(app.events(named: "notification").isEmpty, "nothing reaches the app while the machine sleeps")
        try sender.call("Manager", "SimulateWake")
        let received = app.waitForEvents("notification_completed", count: 2).count
        #expect(received == 2, "\(app.lines)")
        #expect(daemon.waitForLog(containing: "dropped push \(expiring) for \(Self.app): it expired before it reached the app"), "\(daemon.log)")
        #expect(daemon.waitForLog(containing: "dropped push \(older) for \(Self.app): replaced by"), "\(daemon.log)")
        Thread.sleep(forTimeInterval: 0.5)
        let payloads = app.events(named: "notification").compactMap { $0["json"] as? String }
        #expect(payloads == [#"{"aps":{"alert":"2-0"}}"#, #"{"aps":{"alert":"plain"}}"#], "\(app.lines)")
        // Their wakes went with them: no offences, nothing left on its way.
        #expect(try held(sender).isEmpty)
        #expect(!daemon.log.contains("did not complete"), "\(daemon.log)")
        #expect(daemon.stop() == .status(0))
    }

    @Test func alertIsShownByTheNotificationService() throws {
        let daemon = try daemon()
        let notifications = try ChildProcess("/usr/bin/python3", ["-m", "dbusmock", "--session", "-t", "notification_daemon"],
                                             environment: daemon.environment)
        defer { notifications.stop() }
        let sender = try RawClient(daemon)
        #expect(try waitUntil { try daemon.busctl(["status", "org.freedesktop.Notifications"]).succeeded })
        // One that expired before it came is dropped, and not shown either.
        try sender.call("RemoteNotifications", "DeliverPush", Self.push(#"{"aps":{"alert":{"title":"Stale"}}}"#, options: ["expiration": .uint64(1)]))
        try sender.call("RemoteNotifications", "DeliverPush", Self.push(#"{"aps":{"alert":{"title":"Rain","body":"at five"}}}"#))
        var calls = ""
        #expect(try waitUntil {
            calls = try daemon.gdbus(["call", "--session", "--dest", "org.freedesktop.Notifications", "--object-path",
                                      "/org/freedesktop/Notifications", "--method", "org.freedesktop.DBus.Mock.GetCalls"]).standardOutput
            return calls.contains("Notify")
        }, "\(calls)")
        #expect(calls.contains("'Chat'") && calls.contains("'Rain'") && calls.contains("'at five'"), "\(calls)")
        #expect(!calls.contains("Stale"), "\(calls)")
        #expect(calls.contains("desktop-entry") && calls.contains(Self.app), "\(calls)")
        #expect(daemon.stop() == .status(0))
    }

    /// A notification service that is there but fails the call (here one
    /// that has no Notify method; one that crashes mid-call is alike) was
    /// logged as no notification service at all.
    @Test func anAlertTheServiceFailsIsNotLoggedAsNoService() throws {
        let daemon = try daemon()
        let sender = try RawClient(daemon)
        try sender.call("RemoteNotifications", "DeliverPush", Self.push(#"{"aps":{"alert":{"title":"First"}}}"#))
        #expect(daemon.waitForLog(containing: "(no notification service: "), "\(daemon.log)")
        let bare = try ChildProcess("/usr/bin/python3", ["-m", "dbusmock", "--session", "org.freedesktop.Notifications",
                                                         "/org/freedesktop/Notifications", "org.freedesktop.Notifications"],
                                    environment: daemon.environment)
        defer { bare.stop() }
        #expect(try waitUntil { try daemon.busctl(["status", "org.freedesktop.Notifications"]).succeeded })
        try sender.call("RemoteNotifications", "DeliverPush", Self.push(#"{"aps":{"alert":{"title":"Second"}}}"#))
        #expect(daemon.waitForLog(containing: "(the notification service did not show it: "), "\(daemon.log)")
        let second = daemon.log.split(separator: "\n").filter { $0.contains("Second") }
        #expect(!second.isEmpty && !second.contains { $0.contains("no notification service") }, "\(daemon.log)")
        #expect(daemon.stop() == .status(0))
    }

    /// A notification service that takes longer than the 10 s the daemon
    /// waits was logged as one that did not show the alert, though it may
    /// show it late.
    @Test func anAlertTheServiceIsSlowToAnswerIsNotLoggedAsNotShown() throws {
        let daemon = try daemon()
        let slow = try ChildProcess("/usr/bin/python3", ["-m", "dbusmock", "--session", "org.freedesktop.Notifications",
                                                         "/org/freedesktop/Notifications", "org.freedesktop.Notifications"],
                                    environment: daemon.environment)
        defer { slow.stop() }
        #expect(try waitUntil { try daemon.busctl(["status", "org.freedesktop.Notifications"]).succeeded })
        let added = try daemon.busctl(["call", "org.freedesktop.Notifications", "/org/freedesktop/Notifications",
                                       "org.freedesktop.DBus.Mock", "AddMethod", "sssss", "", "Notify", "susssasa{sv}i", "u",
                                       "import time; time.sleep(12); ret = 1"])
        #expect(added.succeeded, "\(added)")
        let sender = try RawClient(daemon)
        try sender.call("RemoteNotifications", "DeliverPush", Self.push(#"{"aps":{"alert":{"title":"Late"}}}"#))
        #expect(daemon.waitForLog(containing: "(the notification service did not answer within 10 s; it may still show it: ", timeout: .seconds(30)),
                "\(daemon.log)")
        #expect(!daemon.log.contains("did not show it"), "\(daemon.log)")
        #expect(daemon.stop() == .status(0))
    }

    /// SIGKILL in the middle of a stream of 500 pushes, then a restart: every
    /// acknowledged push is completed exactly once, none is lost.
    @Test func everyAcknowledgedPushSurvivesACrashAndIsCompletedOnce() throws {
        let daemon = try daemon(["RemoteNotifications.SilentPerHour=1000000"])
        var app = try app(daemon)
        var sender = try RawClient(daemon)
        var acknowledged: [Int: String] = [:]
        var completed: [Int: Int] = [:]
        var handled = 0

        func serve() {
            while (try? app.bus.processPending()) == true {}
            while handled < app.received.count {
                let message = app.received[handled]
                handled += 1
                guard (try? message.rewind()) != nil, let token = try? message.readString(), let json = try? message.readString(),
                      let n = Int(json.split(separator: ":").last?.dropLast() ?? "") else { continue }
                if app.errorName("RemoteNotifications", "CompleteNotification", { try $0.append(token); try $0.append("newData") }) == nil {
                    completed[n, default: 0] += 1
                }
            }
        }

        for n in 0..<500 {
            if n == 250 {
                #expect(try daemon.crashAndRestart() == .signal(SIGKILL))
                sender = try RawClient(daemon)
                app = try self.app(daemon)  // checks in with the new daemon
                handled = 0
            }
            if let id = try? sender.call("RemoteNotifications", "DeliverPush", Self.push(#"{"aps":{"content-available":1},"n":\#(n)}"#)).readString() {
                acknowledged[n] = id
            }
            serve()
        }
        let deadline = ContinuousClock.now + .seconds(20)
        while Set(completed.keys).isSuperset(of: acknowledged.keys) == false && ContinuousClock.now < deadline {
            _ = try? app.bus.wait(timeout: 50_000)
            serve()
        }
        #expect(acknowledged.count >= 495, "almost every push is acknowledged: \(acknowledged.count)")
        let lost = acknowledged.keys.filter { completed[$0] == nil }.sorted()
        #expect(lost.isEmpty, "acknowledged but never delivered: \(lost.prefix(10))")
        let twice = completed.filter { $0.value > 1 }.keys.sorted()
        #expect(twice.isEmpty, "completed more than once: \(twice.prefix(10))")
        #expect(try held(sender).isEmpty, "nothing is left behind")
        #expect(daemon.stop() == .status(0))
    }

    /// A bgtaskd that let a noncharacter into a payload stored a push it
    /// could never send: the app was killed at every wake, and ListPushes
    /// failed for every app. Such a record is dropped when the daemon starts.
    @Test func aStoredPushDBusCannotCarryIsDroppedAtStart() throws {
        let daemon = try daemon()
        let sender = try RawClient(daemon)
        // The app is not running: both wait, stored.
        for marker in ["KEEP", "BREAK"] {
            _ = try sender.call("RemoteNotifications", "DeliverPush", Self.push(#"{"aps":{"content-available":1},"m":"\#(marker)"}"#))
        }
        try daemon.crashAndRestart {
            let changed = try daemon.rewriteStoredRecords(
                plugin: "remote-notification", collection: "pushes", replacing: "BREAK", with: "'BR' || char(65534) || 'K'")
            #expect(changed == 1, "the stored push was rewritten")
        }
        let admin = try RawClient(daemon)
        let left = try held(admin)
        #expect(left.count == 1 && left.first?["payload_json"].map { "\($0)" }?.contains("KEEP") == true, "\(left)")
        #expect(daemon.waitForLog(containing: "U+FFFE, which D-Bus cannot carry"), "\(daemon.log)")
        #expect(daemon.stop() == .status(0))
    }

    /// A stored push whose sequence number is the largest there is (a
    /// damaged or edited database) made the next push's number overflow: the
    /// daemon stopped at the first push after every start.
    @Test func aStoredSequenceAtTheLargestNumberStopsNothing() throws {
        let daemon = try daemon()
        let sender = try RawClient(daemon)
        _ = try sender.call("RemoteNotifications", "DeliverPush", Self.push(#"{"aps":{"content-available":1},"m":"FIRST"}"#))
        try daemon.crashAndRestart {
            let changed = try daemon.rewriteStoredRecords(
                plugin: "remote-notification", collection: "pushes", replacing: "\"sequence\":1,", with: "'\"sequence\":18446744073709551615,'")
            #expect(changed == 1, "the stored push was rewritten")
        }
        let admin = try RawClient(daemon)
        _ = try admin.call("RemoteNotifications", "DeliverPush", Self.push(#"{"aps":{"content-available":1},"m":"SECOND"}"#))
        #expect(try held(admin).count == 2)
        #expect(daemon.stop() == .status(0))
    }

    func waitUntil(_ condition: () throws -> Bool) throws -> Bool {
        // Generous: what it waits for may be a python mock starting on a busy machine.
        let deadline = ContinuousClock.now + .seconds(30)
        while ContinuousClock.now < deadline {
            if try condition() { return true }
            Thread.sleep(forTimeInterval: 0.05)
        }
        return try condition()
    }
}
