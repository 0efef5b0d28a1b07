import BgTaskTestKit
import Foundation
import SDBus
import Testing

/// On a bus that admits several users, an app belongs to one uid: another
/// user can neither check in as it, nor hear its events, nor move its state.
@Suite struct CrossUserTests {
    static let app = "org.example.Weather"
    static let prefix = "org.bgtaskd.BackgroundTasks1.Error."

    /// `gdbus call` on the Manager as the user `nobody`.
    func asNobody(_ bus: PrivateBus, _ method: String, _ arguments: [String]) throws -> CommandResult {
        try CommandResult.run("/usr/sbin/runuser", [
            "-u", "nobody", "--", "/usr/bin/gdbus", "call", "--address", bus.address, "--dest", "org.bgtaskd.BackgroundTasks1",
            "--object-path", "/org/bgtaskd/BackgroundTasks1", "--method", "org.bgtaskd.BackgroundTasks1.Manager.\(method)",
        ] + arguments)
    }

    @Test func anotherUserCannotTakeOverARunningApp() throws {
        let bus = try PrivateBus(allowOtherUsers: true)
        let daemon = try DaemonUnderTest(bus: bus, desktopEntries: [
            DesktopEntrySpec(id: Self.app, name: "Weather", modes: ["remote-notification"], exec: "/bin/false"),
        ])
        let app = try RawClient(daemon)
        try app.listen(for: "NotificationReceived")
        try app.call("Manager", "CheckIn") { try $0.append(Self.app) }

        let claim = try asNobody(bus, "CheckIn", [Self.app])
        #expect(claim.standardError.contains(Self.prefix + "NotPermitted"), "\(claim)")
        #expect(claim.standardError.contains("belongs to uid"), "\(claim)")
        // The stranger's state change is its own connection's, not the app's.
        let state = try asNobody(bus, "SetApplicationState", ["background"])
        #expect(state.succeeded, "\(state)")

        // The user's app still gets its push, and is still in the foreground.
        let sender = try RawClient(daemon)
        _ = try sender.call("RemoteNotifications", "DeliverPush", PushTests.push(#"{"aps":{"content-available":1}}"#, app: Self.app))
        #expect(app.waitForSignals(1))
        let described = try sender.applications().first { $0["app_id"] == .string(Self.app) }
        #expect(described?["state"] == .string("active"))
        #expect(daemon.stop() == .status(0))
    }

    @Test func anotherUserCannotClaimTheUsersAppWhileItIsNotRunning() throws {
        let bus = try PrivateBus(allowOtherUsers: true)
        let daemon = try DaemonUnderTest(bus: bus, desktopEntries: [
            DesktopEntrySpec(id: Self.app, name: "Weather", modes: ["remote-notification"], exec: "/bin/false"),
        ])
        let claim = try asNobody(bus, "CheckIn", [Self.app])
        #expect(claim.standardError.contains(Self.prefix + "NotPermitted"), "\(claim)")
        // An id without a desktop entry belongs to whoever claims it first.
        let own = try asNobody(bus, "CheckIn", ["org.example.Unlisted"])
        #expect(own.succeeded, "\(own)")
        #expect(daemon.stop() == .status(0))
    }

    /// Another user that claimed an id before its desktop entry came loses
    /// it when the entry comes: the app is the user's from then on.
    @Test func anAppAnotherUserClaimedBeforeItsEntryCameIsTheUsersOnceItComes() throws {
        let bus = try PrivateBus(allowOtherUsers: true)
        let daemon = try DaemonUnderTest(bus: bus)
        let later = "org.example.Later"
        let script = """
            import dbus, sys, time
            bus = dbus.bus.BusConnection(sys.argv[1])
            manager = dbus.Interface(bus.get_object("org.bgtaskd.BackgroundTasks1", "/org/bgtaskd/BackgroundTasks1"),
                                     "org.bgtaskd.BackgroundTasks1.Manager")
            manager.CheckIn(sys.argv[2])
            print("claimed", flush=True)
            time.sleep(60)
            """
        let stranger = try ChildProcess("/usr/sbin/runuser", ["-u", "nobody", "--", "/usr/bin/python3", "-c", script, bus.address, later])
        defer { stranger.stop() }
        #expect(stranger.waitForLine { $0 == "claimed" } != nil, "\(stranger.standardError)")
        let refused = try RawClient(daemon).errorName("Manager", "CheckIn") { try $0.append(later) }
        #expect(refused == Self.prefix + "NotPermitted", "the first claimant holds an id without an entry")
        try daemon.installDesktopEntry(DesktopEntrySpec(id: later, name: "Later", modes: ["fetch"], exec: "/bin/false"))
        let deadline = ContinuousClock.now + .seconds(10)
        var error: String? = "not tried"
        while error != nil, ContinuousClock.now < deadline {
            error = try RawClient(daemon).errorName("Manager", "CheckIn") { try $0.append(later) }
            if error != nil { Thread.sleep(forTimeInterval: 0.1) }
        }
        #expect(error == nil, "\(daemon.log.suffix(2000))")
        #expect(daemon.stop() == .status(0))
    }
}
