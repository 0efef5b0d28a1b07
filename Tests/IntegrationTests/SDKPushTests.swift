import BackgroundTasks
import BgTaskTestKit
import Foundation
import SDBus
import Testing

/// The SDK's side of remote notifications, through the test app: its
/// notification handler gets each push decoded and completes it, and when
/// the daemon restarts the SDK checks in again by itself, so pushes keep
/// arriving without the app doing anything.
@Suite struct SDKPushTests {
    static let app = "org.example.Chat"

    func daemon() throws -> DaemonUnderTest {
        try DaemonUnderTest(settings: ["RemoteNotifications.SilentPerHour=100"], desktopEntries: [
            DesktopEntrySpec(id: Self.app, name: "Chat", modes: ["remote-notification"], exec: "/bin/false"),
        ])
    }

    func deliver(_ json: String, via sender: RawClient) throws -> String {
        try sender.call("RemoteNotifications", "DeliverPush", PushTests.push(json)).readString()
    }

    /// The daemon takes `"content-available": true` as 1 (it wakes the app
    /// for a silent push); the SDK read only the number, so the README's
    /// handler skipped the refresh the push woke the app for.
    @Test func contentAvailableReadsAsTheDaemonReadsIt() throws {
        for (json, expected) in [
            (#"{"aps":{"content-available":1}}"#, true), (#"{"aps":{"content-available":true}}"#, true),
            (#"{"aps":{"content-available":1.0}}"#, true), (#"{"aps":{"content-available":0}}"#, false),
            (#"{"aps":{"content-available":false}}"#, false), (#"{"aps":{}}"#, false),
        ] {
            let notification = try RemoteNotification(json: json)
            #expect(notification.contentAvailable == expected, "\(json)")
        }
    }

    @Test func handlerGetsThePushAndItsCompletionReachesTheDaemon() throws {
        let daemon = try daemon()
        let app = try daemon.startTestApp(["--app-id", Self.app, "--tasks", "0", "--push-result", "newData"])
        #expect(app.waitForEvent("ready") != nil, "\(app.lines) \(app.standardError)")
        let sender = try RawClient(daemon)

        let id = try deliver(#"{"aps":{"content-available":1},"thread":7}"#, via: sender)
        let received = app.waitForEvent("notification")
        #expect(received?["json"] as? String == #"{"aps":{"content-available":1},"thread":7}"#, "\(app.lines)")
        #expect(app.waitForEvent("notification_completed")?["result"] as? String == "newData", "\(app.lines)")
        #expect(try PushTests().held(sender).isEmpty, "completed: the daemon holds nothing more")
        #expect(daemon.waitForLog(containing: id), "the daemon's log names the push: \(daemon.log)")
        app.stop()
        #expect(daemon.stop() == .status(0))
    }

    @Test func afterADaemonCrashTheSDKChecksInAgainAndPushesKeepComing() throws {
        let daemon = try daemon()
        let app = try daemon.startTestApp(["--app-id", Self.app, "--tasks", "0", "--push-result", "noData"])
        #expect(app.waitForEvent("ready") != nil, "\(app.lines) \(app.standardError)")
        #expect(try daemon.crashAndRestart() == .signal(SIGKILL))

        let rechecked = app.waitForEvent("rechecked_in", timeout: .seconds(20))
        #expect(rechecked?["reason"] as? String == "user", "\(app.lines) \(app.standardError)")
        let sender = try RawClient(daemon)
        _ = try deliver(#"{"aps":{"alert":"still here?"}}"#, via: sender)
        #expect(app.waitForEvent("notification")?["json"] as? String == #"{"aps":{"alert":"still here?"}}"#,
                "the new daemon knows the app without it doing anything: \(app.lines)")
        #expect(app.waitForEvent("notification_completed")?["result"] as? String == "noData", "\(app.lines)")
        app.stop()
        #expect(daemon.stop() == .status(0))
    }
}
