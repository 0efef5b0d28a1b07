import BgTaskTestKit
import Foundation
import SDBus
import Testing

/// Numbers from clients and remote senders at their extremes: every one is
/// saturated or refused, never trapped on, and the state they leave behind
/// starts again.
@Suite struct ExtremeValueTests {
    static let app = "org.example.Chat"
    static let prefix = "org.bgtaskd.BackgroundTasks1.Error."
    static let invalid = "org.freedesktop.DBus.Error.InvalidArgs"

    func daemon() throws -> DaemonUnderTest {
        try DaemonUnderTest(settings: ["RemoteNotifications.SilentPerHour=1000"], desktopEntries: [
            DesktopEntrySpec(id: Self.app, name: "Chat", modes: ["remote-notification", "fetch"], exec: "/bin/false"),
        ])
    }

    static func push(expiration: UInt64) -> (Message) throws -> Void {
        PushTests.push(#"{"aps":{"content-available":1}}"#, options: ["expiration": .uint64(expiration)])
    }

    /// An expiration whose µs overflow UInt64 once killed the daemon (SIGILL)
    /// in the plugin's timer, and at every start after it was stored.
    @Test func pushExpirationsAtTheirExtremesAreStoredAndSurviveARestart() throws {
        let daemon = try daemon()
        let sender = try RawClient(daemon)
        // Late enough to expire after the restart below even on a busy machine.
        let soon = UInt64(Date().timeIntervalSince1970) + 8
        // A short-lived push held first, so that its expiry rearms the timer from the stored state.
        _ = try sender.call("RemoteNotifications", "DeliverPush", Self.push(expiration: soon)).readString()
        for expiration: UInt64 in [18_446_744_073_710, UInt64(Int64.max), .max, 1, 4_000_000_000_000] {
            #expect(sender.errorName("RemoteNotifications", "DeliverPush", Self.push(expiration: expiration)) == nil,
                    "expiration \(expiration)")
        }
        #expect(daemon.process.isRunning, "\(daemon.log.suffix(2000))")
        // bgtaskctl shows and sends such values without trapping either.
        let listed = try daemon.bgtaskctl(["pushes", Self.app])
        #expect(listed.succeeded && listed.standardOutput.contains("never"), "\(listed)")
        let far = try daemon.bgtaskctl(["push", Self.app, "-n", "--expiration", "+\(UInt64.max)"])
        #expect(far.succeeded, "\(far)")
        try daemon.crashAndRestart()
        // Past the short push's expiry: the timer armed from the stored bound fires and drops it.
        #expect(daemon.process.waitForStandardError(containing: "it expired", timeout: .seconds(20)))
        let after = try RawClient(daemon)
        #expect(after.errorName("Manager", "GetBackgroundTimeRemaining") == nil)
        #expect(daemon.stop() == .status(0))
    }

    /// A huge `a{sv}` is refused as soon as it is seen, not decoded first.
    @Test func hugeOptionsAreRefusedEarly() throws {
        let daemon = try daemon()
        let sender = try RawClient(daemon)
        let many: [String: BusValue] = Dictionary(uniqueKeysWithValues: (0..<100_000).map { ("k\($0)", BusValue.string("v")) })
        let huge = PushTests.push(#"{"aps":{"content-available":1}}"#, options: many)
        #expect(sender.errorName("RemoteNotifications", "DeliverPush", huge) == Self.invalid)
        let longKey = PushTests.push(#"{"aps":{}}"#, options: [String(repeating: "k", count: 300): .uint32(1)])
        #expect(sender.errorName("RemoteNotifications", "DeliverPush", longKey) == Self.invalid)
        let bigArray = PushTests.push(#"{"aps":{}}"#, options: ["x": .array(element: "s", (0..<5000).map { .string("\($0)") })])
        #expect(sender.errorName("RemoteNotifications", "DeliverPush", bigArray) == Self.invalid)
        // A handful of unknown keys is still fine (dropped).
        let few = PushTests.push(#"{"aps":{}}"#, options: Dictionary(uniqueKeysWithValues: (0..<64).map { ("k\($0)", BusValue.bool(true)) }))
        #expect(sender.errorName("RemoteNotifications", "DeliverPush", few) == nil)
        #expect(daemon.process.isRunning)
        #expect(daemon.stop() == .status(0))
    }

    /// Strings holding Unicode noncharacters pass dbus-daemon (the D-Bus
    /// specification allows them) but sd-bus refuses to read them: the error
    /// says so, instead of "expected type 's', got 's'".
    @Test func unreadableStringsSayWhy() throws {
        let daemon = try daemon()
        let script = """
            import dbus, os, sys
            bus = dbus.bus.BusConnection(os.environ["DBUS_SESSION_BUS_ADDRESS"])
            obj = bus.get_object("org.bgtaskd.BackgroundTasks1", "/org/bgtaskd/BackgroundTasks1")
            calls = [
                ("Manager", "BeginBackgroundTask", ["task \\ufffe"]),
                ("Manager", "CheckIn", ["org.example.\\U0010ffff"]),
                ("RemoteNotifications", "DeliverPush", ["org.example.Chat", '{"aps":{},"x":"\\uffff"}', dbus.Dictionary({}, signature="sv")]),
            ]
            for interface, member, arguments in calls:
                try:
                    getattr(obj, member)(*arguments, dbus_interface="org.bgtaskd.BackgroundTasks1." + interface)
                    print(member, "accepted")
                except dbus.DBusException as error:
                    print(member, error.get_dbus_name(), error.get_dbus_message())
            """
        let result = try CommandResult.run("/usr/bin/python3", ["-c", script], environment: daemon.environment)
        #expect(result.succeeded, "\(result)")
        let lines = result.standardOutput.split(separator: "\n")
        #expect(lines.count == 3, "\(result)")
        for line in lines {
            #expect(line.contains(Self.invalid) && line.contains("Unicode noncharacter"), "\(line)")
            #expect(!line.contains("got 's'"), "\(line)")
        }
        #expect(daemon.stop() == .status(0))
    }

    /// The test app slept for any finite number of seconds it was given, and
    /// trapped on those no Duration holds (`--hold 1e20`): refused now.
    @Test func theTestAppRefusesDurationsItCannotSleep() throws {
        let app = BinaryLocator.path(of: "bgtaskd-testapp")
        for arguments in [["--hold", "1e20"], ["--end-after", "1e300"], ["--fetch-result", "newData", "--fetch-handler-delay", "1e300"]] {
            let result = try CommandResult.run(app, ["--tasks", "0"] + arguments, timeout: .seconds(30))
            #expect(result.exit == .status(64) && result.standardError.contains("from 0 to 1e9"), "\(arguments): \(result)")
        }
    }

    /// Fetch intervals and budgets from clients: saturated or refused.
    @Test func fetchIntervalsAtTheirExtremes() throws {
        let daemon = try daemon()
        let app = try RawClient(daemon)
        try app.call("Manager", "CheckIn") { try $0.append(Self.app) }
        let cases: [(Double, String?)] = [
            (0, nil), (-0.0, nil), (1, nil), (.greatestFiniteMagnitude, nil), (1e300, nil), (.infinity, nil),
            (1e299, nil), (.leastNonzeroMagnitude, nil), (-1, Self.invalid), (.nan, Self.invalid), (-.infinity, Self.invalid),
            // Just below "never": a custom interval no Int can hold (bgtaskctl apps once trapped on it, and at every start after).
            (9.999999999999999e299, nil),
        ]
        for (seconds, expected) in cases {
            #expect(app.errorName("Fetch", "SetMinimumFetchInterval") { try $0.append(seconds) } == expected, "\(seconds)")
            #expect(app.errorName("Fetch", "GetFetchRegistration") == nil, "after \(seconds)")
            #expect(app.errorName("Manager", "GetApplications") == nil, "after \(seconds)")
        }
        try daemon.crashAndRestart()
        let again = try RawClient(daemon)
        try again.call("Manager", "CheckIn") { try $0.append(Self.app) }
        #expect(again.errorName("Fetch", "GetFetchRegistration") == nil)
        #expect(again.errorName("Manager", "GetApplications") == nil)
        #expect(daemon.stop() == .status(0))
    }
}
