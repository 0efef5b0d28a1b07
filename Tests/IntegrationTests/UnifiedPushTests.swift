import BgTaskTestKit
import Foundation
import SDBus
import Testing

/// bgtaskd as a UnifiedPush connector for its apps, against a mock
/// distributor (`Fixtures/mock-unifiedpush-distributor.py`) on the test's
/// own bus: registration, endpoints, messages becoming pushes, who may call
/// the connector, a distributor that restarts, speaks only version 1, or is
/// absent, and endpoints surviving a crash.
@Suite struct UnifiedPushTests {
    static let app = "org.example.Chat"
    static let distributorName = "org.unifiedpush.Distributor.mock"

    /// The mock distributor on `bus` (`--v1-only`: no Distributor2).
    func distributor(
        on bus: PrivateBus, v1Only: Bool = false, brokenRegister: Bool = false, refuseRegister: Bool = false, more: [String] = []
    ) throws -> ChildProcess {
        let script = BinaryLocator.packageRoot() + "/Tests/IntegrationTests/Fixtures/mock-unifiedpush-distributor.py"
        let process = try ChildProcess("/usr/bin/python3", [script, "--address", bus.address]
            + (v1Only ? ["--v1-only"] : []) + (brokenRegister ? ["--broken-register"] : [])
            + (refuseRegister ? ["--refuse-register"] : []) + more)
        #expect(process.waitForLine { $0 == "ready" } != nil, "the mock distributor did not start: \(process.standardError)")
        return process
    }

    /// A private bus with the mock distributor and a daemon whose app it has
    /// registered; both stop with it.
    final class Registered {
        let bus: PrivateBus
        let mock: ChildProcess
        let daemon: DaemonUnderTest
        let token: String

        init(_ suite: UnifiedPushTests, allowOtherUsers: Bool = false) throws {
            bus = try PrivateBus(allowOtherUsers: allowOtherUsers)
            mock = try suite.distributor(on: bus)
            daemon = try suite.daemon(bus: bus)
            let bus = bus
            #expect(try suite.eventually { try suite.registrations(bus).count == 1 }, "\(daemon.log)")
            token = try #require(try suite.registrations(bus).first?.key)
        }

        deinit {
            _ = mock.stop()
            bus.stop()
        }
    }

    func daemon(bus: PrivateBus, stateDirectory: String? = nil, settings: [String] = []) throws -> DaemonUnderTest {
        // More silent pushes than the default 3 an hour: most messages here arrive wrapped in one.
        try DaemonUnderTest(settings: ["RemoteNotifications.SilentPerHour=20"] + settings, bus: bus, stateDirectory: stateDirectory, desktopEntries: [
            DesktopEntrySpec(id: Self.app, name: "Chat", modes: ["remote-notification"], exec: "/bin/false"),
            DesktopEntrySpec(id: "org.example.Plain", modes: ["fetch"], exec: "/bin/false"),
        ])
    }

    /// A Register call that failed (an error, a timeout, a distributor that
    /// went away) was logged as the distributor refusing the app.
    @Test func aRegistrationThatFailsIsNotCalledARefusal() throws {
        let bus = try PrivateBus()
        defer { bus.stop() }
        let mock = try distributor(on: bus, v1Only: true, brokenRegister: true)
        defer { mock.stop() }
        let daemon = try daemon(bus: bus)
        #expect(daemon.waitForLog(containing: "could not register \(Self.app) with the UnifiedPush distributor"), "\(daemon.log)")
        #expect(!daemon.log.contains("refused \(Self.app)"), "\(daemon.log)")
        #expect(daemon.stop() == .status(0))
    }

    /// Every app's Register went out at once: on a bus that lets a
    /// connection wait for 24 replies (dbus-daemon's max_replies_per_connection;
    /// 128 on some), 40 apps left 16 refused with LimitsExceeded and without
    /// an endpoint until apps or the distributor changed.
    @Test func manyAppsRegisterOnABusThatLimitsPendingReplies() throws {
        let bus = try PrivateBus(maximumRepliesPerConnection: 24)
        defer { bus.stop() }
        let mock = try distributor(on: bus)
        defer { mock.stop() }
        let apps = (0..<40).map { "org.example.Chat\($0)" }
        let daemon = try DaemonUnderTest(bus: bus, desktopEntries: apps.map {
            DesktopEntrySpec(id: $0, name: "Chat", modes: ["remote-notification"], exec: "/bin/false")
        })
        #expect(try eventually { try registrations(bus).count == apps.count }, "\((try? registrations(bus).count) ?? 0) registered: \(daemon.log)")
        #expect(!daemon.log.contains("could not register"), "\(daemon.log)")
        #expect(daemon.stop() == .status(0))
    }

    /// The mock's control interface.
    func control(_ bus: PrivateBus, _ member: String, _ build: (Message) throws -> Void = { _ in }) throws -> Message {
        let connection = try Bus.open(.address(bus.address))
        let message = try connection.newMethodCall(
            destination: Self.distributorName, path: "/org/unifiedpush/Distributor", interface: "org.bgtaskd.test.MockDistributor",
            member: member)
        try build(message)
        return try connection.call(message, timeout: 10_000_000)
    }

    /// The mock's registrations: token → (service, description, version).
    func registrations(_ bus: PrivateBus) throws -> [String: (service: String, description: String, version: UInt32)] {
        guard case .array(_, let entries) = try control(bus, "Registrations").readValue() else { return [:] }
        var result: [String: (String, String, UInt32)] = [:]
        for entry in entries {
            guard case .dictionary(_, _, let fields) = entry else { continue }
            var values: [String: BusValue] = [:]
            for field in fields { if case .string(let key) = field.key { values[key] = field.value.unwrapped } }
            guard case .string(let token)? = values["token"], case .string(let service)? = values["service"],
                  case .string(let description)? = values["description"], case .uint32(let version)? = values["version"] else { continue }
            result[token] = (service, description, version)
        }
        return result
    }

    /// Asks the mock to call the connector; "" or the connector's error name.
    func send(_ bus: PrivateBus, _ member: String, token: String, _ build: (Message) throws -> Void = { _ in }) throws -> String {
        try control(bus, member) { message in
            try message.append(token)
            try build(message)
        }.readString()
    }

    func message(_ bytes: [UInt8], id: String = "m1") -> (Message) throws -> Void {
        { message in
            try message.append(value: .array(element: "y", bytes.map { .byte($0) }))
            try message.append(id)
        }
    }

    func endpoint(_ daemon: DaemonUnderTest) throws -> String? {
        let apps = try RawClient(daemon).applications()
        guard case .string(let endpoint)? = apps.first(where: { $0["app_id"] == .string(Self.app) })?["push_endpoint"] else { return nil }
        return endpoint
    }

    func eventually(_ condition: () throws -> Bool) throws -> Bool {
        let deadline = ContinuousClock.now + .seconds(10)
        while ContinuousClock.now < deadline {
            if try condition() { return true }
            Thread.sleep(forTimeInterval: 0.05)
        }
        return try condition()
    }

    /// The app checked in, listening for its pushes (as PushTests's).
    func app(_ daemon: DaemonUnderTest) throws -> RawClient { try PushTests().app(daemon) }

    func payloads(_ client: RawClient) throws -> [String] { try PushTests().payloads(client) }

    @Test func appsAreRegisteredAndMessagesBecomePushes() throws {
        let bus = try PrivateBus()
        defer { bus.stop() }
        let mock = try distributor(on: bus)
        defer { _ = mock.stop() }
        let daemon = try daemon(bus: bus)
        // Registered under bgtaskd's name with its own token, by the app's name; the endpoint follows.
        #expect(try eventually { try registrations(bus).count == 1 }, "\(daemon.log)")
        let (token, registration) = try #require(try registrations(bus).first)
        #expect(registration.service == "org.bgtaskd.BackgroundTasks1" && registration.description == "Chat" && registration.version == 2)
        #expect(token.count == 32)
        #expect(try eventually { try endpoint(daemon) == "https://push.example/" + token }, "\(daemon.log)")
        let table = try daemon.bgtaskctl(["apps"])
        #expect(table.standardOutput.contains("PUSH ENDPOINT") && table.standardOutput.contains("https://push.example/" + token), "\(table)")

        let chat = try app(daemon)
        // The app asks for its endpoint, and hears when it changes.
        #expect(try chat.call("RemoteNotifications", "GetEndpoint") { try $0.append("") }.readString() == "https://push.example/" + token)
        #expect(try chat.call("RemoteNotifications", "GetEndpoint") { try $0.append(Self.app) }.readString() == "https://push.example/" + token)
        // A trusted caller names the app; an app it does not know has none; a bad id is refused.
        #expect(try RawClient(daemon).call("RemoteNotifications", "GetEndpoint") { try $0.append(Self.app) }.readString() == "https://push.example/" + token)
        #expect(try RawClient(daemon).call("RemoteNotifications", "GetEndpoint") { try $0.append("org.example.Other") }.readString() == "")
        #expect(try RawClient(daemon).errorName("RemoteNotifications", "GetEndpoint") { try $0.append("no/such id") } == "org.freedesktop.DBus.Error.InvalidArgs")
        try chat.listen(for: "EndpointChanged")
        // A line break in an endpoint was taken, to be shown as a forged line.
        #expect(try send(bus, "SendEndpoint", token: token) { try $0.append("https://push.example/x\nforged") } == "org.freedesktop.DBus.Error.InvalidArgs")
        #expect(try send(bus, "SendEndpoint", token: token) { try $0.append("https://push.example/new") } == "")
        #expect(try eventually { _ = chat.waitForSignals(1, timeout: .milliseconds(50)); return chat.received.contains { $0.member == "EndpointChanged" } })
        // Without a checked-in app, "" names nobody.
        #expect(try RawClient(daemon).errorName("RemoteNotifications", "GetEndpoint") { try $0.append("") } == "org.bgtaskd.BackgroundTasks1.Error.NotPermitted")
        chat.clearReceived()
        // Opaque bytes travel base64-encoded in a silent push; a JSON push is itself.
        #expect(try send(bus, "SendMessage", token: token, message(Array("hello".utf8))) == "")
        #expect(chat.waitForSignals(1), "\(daemon.log)")
        let wrapped = try #require(try payloads(chat).first)
        #expect(wrapped.contains(#""content-available":1"#) && wrapped.contains(Data("hello".utf8).base64EncodedString()) && wrapped.contains(#""id":"m1""#), "\(wrapped)")
        let json = #"{"aps":{"alert":{"title":"Ana","body":"Lunch?"}},"room":7}"#
        #expect(try send(bus, "SendMessage", token: token, message(Array(json.utf8), id: "m2")) == "")
        #expect(chat.waitForSignals(2))
        #expect(try payloads(chat).last == json)
        // JSON that no DeliverPush would take goes wrapped: an "aps" that is no object, and a
        // noncharacter sd-bus cannot send (passed on as is, it stayed undeliverable and cost
        // the app a kill at every wake, and ListPushes failed for every app).
        for (index, odd) in [#"{"aps":"text"}"#, "{\"aps\":{\"content-available\":1},\"x\":\"\u{FFFE}\"}"].enumerated() {
            #expect(try send(bus, "SendMessage", token: token, message(Array(odd.utf8), id: "odd\(index)")) == "")
            #expect(chat.waitForSignals(3 + index), "\(daemon.log)")
            let carried = try #require(try payloads(chat).last)
            #expect(carried.contains(Data(odd.utf8).base64EncodedString()) && carried.contains(#""id":"odd\#(index)""#), "\(carried)")
        }
        _ = try RawClient(daemon).call("RemoteNotifications", "ListPushes") { try $0.append("") }
        // The protocol's largest message goes through; one byte more, none, or an unknown token is refused.
        #expect(try send(bus, "SendMessage", token: token, message([UInt8](repeating: 0xFE, count: 4096))) == "")
        #expect(chat.waitForSignals(5))
        #expect(try send(bus, "SendMessage", token: token, message([UInt8](repeating: 1, count: 4097))) == "org.freedesktop.DBus.Error.InvalidArgs")
        #expect(try send(bus, "SendMessage", token: token, message([])) == "org.freedesktop.DBus.Error.InvalidArgs")
        #expect(try send(bus, "SendMessage", token: "nobody", message([1])) == "no such token")
        // An id too long to carry is refused as such (it was refused as a payload over RemoteNotifications.MaxPayloadBytes).
        #expect(try send(bus, "SendMessage", token: token, message([1], id: String(repeating: "i", count: 257))) == "org.freedesktop.DBus.Error.InvalidArgs")
        #expect(try send(bus, "SendMessage", token: token, message([1], id: String(repeating: "\u{1}", count: 256))) == "")
        // Unregistered: the endpoint is gone.
        #expect(try send(bus, "SendUnregistered", token: token) == "")
        #expect(try eventually { try endpoint(daemon) == nil })
        // The app's entry goes: bgtaskd unregisters it from the distributor.
        #expect(try eventually { try registrations(bus).isEmpty == false }, "registered again after Unregistered")
        try FileManager.default.removeItem(atPath: daemon.home + "/data/applications/\(Self.app).desktop")
        #expect(try eventually { try registrations(bus).isEmpty }, "\(daemon.log)")
        #expect(daemon.stop() == .status(0))
    }

    /// The SDK: `remoteNotificationEndpoint()` and `onRemoteNotificationEndpointChanged`, through the test app.
    @Test func theSDKHandsTheAppItsEndpoint() throws {
        let bus = try PrivateBus()
        defer { bus.stop() }
        let mock = try distributor(on: bus)
        defer { _ = mock.stop() }
        let daemon = try daemon(bus: bus)
        #expect(try eventually { try endpoint(daemon) != nil }, "\(daemon.log)")
        let token = try #require(try registrations(bus).first?.key)
        let app = try daemon.startTestApp(["--app-id", Self.app, "--tasks", "0", "--push-endpoint", "--push-result", "newData"])
        defer { app.stop() }
        #expect(app.waitForEvent("push_endpoint")?["endpoint"] as? String == "https://push.example/" + token, "\(app.lines) \(app.standardError)")
        #expect(try send(bus, "SendEndpoint", token: token) { try $0.append("https://push.example/rotated") } == "")
        #expect(app.waitForEvent("push_endpoint_changed")?["endpoint"] as? String == "https://push.example/rotated", "\(app.lines)")
        #expect(try send(bus, "SendMessage", token: token, message(Array("ping".utf8))) == "")
        #expect((app.waitForEvent("notification")?["json"] as? String)?.contains(Data("ping".utf8).base64EncodedString()) == true, "\(app.lines)")
        #expect(try send(bus, "SendUnregistered", token: token) == "")
        #expect(app.waitForEvents("push_endpoint_changed", count: 2).last?["endpoint"] as? String == "", "\(app.lines)")
        #expect(daemon.stop() == .status(0))
    }

    @Test func onlyTheDistributorMayCallTheConnector() throws {
        let setup = try Registered(self)
        let (bus, daemon, token) = (setup.bus, setup.daemon, setup.token)
        #expect(try eventually { try endpoint(daemon) == "https://push.example/" + token })
        let stranger = try Bus.open(.address(bus.address))
        for (interface, build) in [
            ("org.unifiedpush.Connector2", { (m: Message) throws in
                try m.append(value: .dictionary(key: "s", value: "v", [
                    .init(key: .string("token"), value: .variant(.string(token))),
                    .init(key: .string("endpoint"), value: .variant(.string("https://evil.example/"))),
                ])) }),
            ("org.unifiedpush.Connector1", { (m: Message) throws in try m.append(token); try m.append("https://evil.example/") }),
        ] {
            let call = try stranger.newMethodCall(
                destination: "org.bgtaskd.BackgroundTasks1", path: "/org/unifiedpush/Connector", interface: interface, member: "NewEndpoint")
            try build(call)
            #expect(throws: BusError.self) { try stranger.call(call, timeout: 10_000_000) }
        }
        #expect(try endpoint(daemon) == "https://push.example/" + token, "a stranger cannot change the endpoint")
        #expect(setup.daemon.stop() == .status(0))  // setup lives to here
    }

    /// Only the latest connection of an app heard EndpointChanged: when a
    /// second instance quit, the first, still running, never heard it.
    @Test func everyInstanceOfTheAppHearsOfANewEndpoint() throws {
        let setup = try Registered(self)
        let (bus, daemon, token) = (setup.bus, setup.daemon, setup.token)
        let first = try app(daemon)
        try first.listen(for: "EndpointChanged")
        var second: RawClient? = try app(daemon)
        _ = second
        second = nil  // the later instance quits; the first runs on
        #expect(try send(bus, "SendEndpoint", token: token) { try $0.append("https://push.example/moved") } == "")
        #expect(try eventually { _ = first.waitForSignals(1, timeout: .milliseconds(50)); return first.received.contains { $0.member == "EndpointChanged" } },
                "\(daemon.log)")
        #expect(setup.daemon.stop() == .status(0))  // setup lives to here
    }

    /// GetApplications gave any caller every app's endpoint, which is all
    /// it takes to push to that app; GetEndpoint already refused them.
    @Test func anotherUserSeesNoAppsEndpoint() throws {
        let setup = try Registered(self, allowOtherUsers: true)
        let (bus, daemon) = (setup.bus, setup.daemon)
        #expect(try eventually { try endpoint(daemon)?.hasPrefix("https://push.example/") == true }, "\(daemon.log)")
        let stranger = try CommandResult.run("/usr/sbin/runuser", [
            "-u", "nobody", "--", "/usr/bin/gdbus", "call", "--address", bus.address, "--dest", "org.bgtaskd.BackgroundTasks1",
            "--object-path", "/org/bgtaskd/BackgroundTasks1", "--method", "org.bgtaskd.BackgroundTasks1.Manager.GetApplications",
        ])
        #expect(stranger.succeeded && stranger.standardOutput.contains(Self.app), "\(stranger)")
        #expect(!stranger.standardOutput.contains("push.example") && !stranger.standardOutput.contains("push_endpoint"), "\(stranger)")
        #expect(setup.daemon.stop() == .status(0))  // setup lives to here
    }

    @Test func aRestartedDistributorIsRegisteredWithAgainAndEndpointsSurviveACrash() throws {
        let bus = try PrivateBus()
        defer { bus.stop() }
        var mock = try distributor(on: bus)
        let daemon = try daemon(bus: bus)
        #expect(try eventually { try registrations(bus).count == 1 })
        let token = try #require(try registrations(bus).first?.key)
        #expect(try eventually { try endpoint(daemon) != nil })
        _ = mock.stop()
        #expect(daemon.process.waitForStandardError(containing: "left the bus"), "\(daemon.log)")
        // A distributor that speaks only version 1 takes over: the same token, registered again.
        mock = try distributor(on: bus, v1Only: true)
        defer { _ = mock.stop() }
        #expect(try eventually { try registrations(bus)[token]?.version == 1 }, "\(daemon.log)")
        // Its endpoint comes through Connector1.
        #expect(try eventually { try endpoint(daemon) == "https://push.example/\(token)?v1" }, "\(daemon.log)")
        let chat = try app(daemon)
        #expect(try send(bus, "SendMessage", token: token, message(Array("v1".utf8))) == "")
        #expect(chat.waitForSignals(1), "\(daemon.log)")
        #expect(try daemon.crashAndRestart() == .signal(SIGKILL))
        #expect(try endpoint(daemon) != nil, "the endpoint is kept across a crash")
        #expect(try eventually { try registrations(bus)[token] != nil }, "registered again at start, with the same token")
        #expect(daemon.stop() == .status(0))
    }

    /// A distributor that took over and refused the app left its old
    /// endpoint listed, and the app was not told: its server went on
    /// pushing to an endpoint nobody delivers from (the old distributor's
    /// messages are not taken any more). Now the endpoint goes, the app
    /// hears `EndpointChanged` with none, and the registration's token is
    /// kept for the next distributor.
    @Test func aDistributorThatRefusesTheAppTakesItsOldEndpointAway() throws {
        let bus = try PrivateBus()
        defer { bus.stop() }
        var mock = try distributor(on: bus)
        let daemon = try daemon(bus: bus)
        #expect(try eventually { try endpoint(daemon) != nil }, "\(daemon.log)")
        let chat = try app(daemon)
        try chat.listen(for: "EndpointChanged")
        _ = mock.stop()
        #expect(daemon.process.waitForStandardError(containing: "left the bus"), "\(daemon.log)")
        mock = try distributor(on: bus, refuseRegister: true)
        defer { _ = mock.stop() }
        #expect(daemon.waitForLog(containing: "UnifiedPush distributor refused \(Self.app): the mock refuses"), "\(daemon.log)")
        #expect(try eventually { try endpoint(daemon) == nil }, "\(daemon.log)")
        #expect(try chat.call("RemoteNotifications", "GetEndpoint") { try $0.append("") }.readString() == "")
        #expect(chat.waitForSignals(1), "\(daemon.log)")
        #expect(chat.received.first?.member == "EndpointChanged")
        #expect(try chat.received.first?.readString() == "")
        #expect(try daemon.crashAndRestart() == .signal(SIGKILL))
        #expect(try endpoint(daemon) == nil, "gone for good, not only from memory")
        #expect(daemon.stop() == .status(0))
    }

    /// A distributor replaced while its answer to Register was on its way
    /// refused the app after the new one had given it an endpoint: the late
    /// refusal, of a distributor no longer in charge, took the new endpoint
    /// away. Answers of a replaced distributor count for nothing now.
    @Test func aReplacedDistributorsLateRefusalLeavesTheNewEndpoint() throws {
        let bus = try PrivateBus()
        defer { bus.stop() }
        let slow = try distributor(on: bus, refuseRegister: true, more: ["--answer-after", "3", "--replaceable"])
        defer { _ = slow.stop() }
        let daemon = try daemon(bus: bus)
        #expect(daemon.waitForLog(containing: "registering apps"), "\(daemon.log)")
        let current = try distributor(on: bus, more: ["--replace"])
        defer { _ = current.stop() }
        #expect(try eventually { try endpoint(daemon) != nil }, "\(daemon.log)")
        // Past the replaced one's answer, 3 s after the Register it got.
        Thread.sleep(forTimeInterval: 4)
        #expect(try endpoint(daemon) != nil, "\(daemon.log)")
        #expect(!daemon.log.contains("refused \(Self.app)"), "\(daemon.log)")
        #expect(daemon.stop() == .status(0))
    }

    @Test func withoutADistributorAppsGetNoEndpoint() throws {
        let bus = try PrivateBus()
        defer { bus.stop() }
        let daemon = try daemon(bus: bus)
        #expect(daemon.process.waitForStandardError(containing: "no UnifiedPush distributor on the session bus"), "\(daemon.log)")
        #expect(try endpoint(daemon) == nil)
        // One appears later: the app is registered then.
        let mock = try distributor(on: bus)
        defer { _ = mock.stop() }
        #expect(try eventually { try registrations(bus).count == 1 }, "\(daemon.log)")
        #expect(try eventually { try endpoint(daemon) != nil })
        #expect(daemon.stop() == .status(0))
    }

    /// A message passed on as itself skipped RemoteNotifications.MaxPayloadBytes,
    /// which DeliverPush applies: an operator's limit did not hold for pushes
    /// from the network. Now a message longer than it is refused.
    @Test func messagesHoldToTheConfiguredPayloadLimit() throws {
        let bus = try PrivateBus()
        defer { bus.stop() }
        let mock = try distributor(on: bus)
        defer { _ = mock.stop() }
        let daemon = try daemon(bus: bus, settings: ["RemoteNotifications.MaxPayloadBytes=100"])
        #expect(try eventually { try registrations(bus).count == 1 }, "\(daemon.log)")
        let token = try #require(try registrations(bus).first?.key)
        let chat = try app(daemon)
        let big = #"{"aps":{"alert":"big"},"pad":""# + String(repeating: "x", count: 150) + #""}"#
        #expect(try send(bus, "SendMessage", token: token, message(Array(big.utf8))) == "org.bgtaskd.BackgroundTasks1.Error.PayloadTooLarge")
        #expect(try send(bus, "SendMessage", token: token, message([UInt8](repeating: 7, count: 101))) == "org.bgtaskd.BackgroundTasks1.Error.PayloadTooLarge")
        // Within it: as itself, or wrapped (the wrapping is bgtaskd's own, and may pass the limit).
        let small = #"{"aps":{"alert":"hi"}}"#
        #expect(try send(bus, "SendMessage", token: token, message(Array(small.utf8))) == "")
        #expect(try send(bus, "SendMessage", token: token, message([UInt8](repeating: 7, count: 100))) == "")
        #expect(chat.waitForSignals(2), "\(daemon.log)")
        #expect(try payloads(chat).first == small)
        #expect(daemon.stop() == .status(0))
    }

    /// An app the distributor unregistered (the user removed it there) was
    /// registered again by any change to the apps or to refresh, undoing the
    /// user's choice. It stays unregistered until a distributor appears again.
    @Test func anAppTheDistributorUnregisteredStaysSoUntilADistributorAppears() throws {
        let bus = try PrivateBus()
        defer { bus.stop() }
        var mock = try distributor(on: bus)
        let daemon = try daemon(bus: bus)
        #expect(try eventually { try registrations(bus).count == 1 }, "\(daemon.log)")
        let token = try #require(try registrations(bus).first?.key)
        #expect(try eventually { try endpoint(daemon) != nil })
        #expect(try send(bus, "SendUnregistered", token: token) == "")
        #expect(try eventually { try endpoint(daemon) == nil })
        // What the distributor sends for the token afterwards was taken as a push and an endpoint.
        #expect(try send(bus, "SendMessage", token: token, message(Array(#"{"aps":{"alert":"late"}}"#.utf8))) == "org.freedesktop.DBus.Error.InvalidArgs")
        #expect(try send(bus, "SendEndpoint", token: token) { try $0.append("https://push.example/late") } == "org.freedesktop.DBus.Error.InvalidArgs")
        #expect(try endpoint(daemon) == nil)
        // Changes that ask for registrations again: refresh, and a new app.
        let sender = try RawClient(daemon)
        try sender.call("Manager", "SetBackgroundRefreshEnabled") { try $0.append("org.example.Plain"); try $0.append(false) }
        try daemon.installDesktopEntry(DesktopEntrySpec(id: "org.example.Mail", name: "Mail", modes: ["remote-notification"], exec: "/bin/false"))
        #expect(try eventually { try registrations(bus).count == 2 }, "the new app is registered: \(daemon.log)")
        Thread.sleep(forTimeInterval: 0.5)
        #expect(try endpoint(daemon) == nil, "not registered again: \(daemon.log)")
        // A distributor that appears registers everyone.
        _ = mock.stop()
        #expect(daemon.process.waitForStandardError(containing: "left the bus"), "\(daemon.log)")
        mock = try distributor(on: bus)
        defer { _ = mock.stop() }
        #expect(try eventually { try endpoint(daemon) != nil }, "\(daemon.log)")
        #expect(daemon.stop() == .status(0))
    }
}
