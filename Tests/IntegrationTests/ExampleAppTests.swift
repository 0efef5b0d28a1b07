import BgTaskTestKit
import Foundation
import SDBus
import Testing

/// The example app, launched by the daemon through its desktop entry for a
/// simulated background fetch: it checks in (by itself, from its launch
/// environment), fetches a real file and completes; then, in the background
/// with nothing to do, it is suspended (frozen), and thawed for its next event.
@Suite struct ExampleAppTests {
    @Test func simulatedFetchLaunchesTheExampleAppWhichFetchesAndCompletes() throws {
        let scratch = FileManager.default.temporaryDirectory.appendingPathComponent("bgtaskd-example-\(UUID())").path
        try FileManager.default.createDirectory(atPath: scratch, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: scratch) }
        try "forecast: sunny\n".write(toFile: scratch + "/source", atomically: true, encoding: .utf8)
        let example = BinaryLocator.path(of: "bgtaskd-example-fetch")
        let daemon = try DaemonUnderTest(desktopEntries: [
            DesktopEntrySpec(id: "org.example.FetchDemo", modes: ["fetch"],
                             exec: "\(example) --source file://\(scratch)/source --cache \(scratch)/cache"),
        ])
        let admin = try RawClient(daemon)

        try admin.call("Fetch", "SimulateFetch") { try $0.append("org.example.FetchDemo") }
        #expect(daemon.process.waitForStandardError(containing: "completed its fetch: newData", timeout: .seconds(20)), "\(daemon.log)")
        #expect(daemon.waitForLog(containing: "launched org.example.FetchDemo for fetch"))
        #expect(daemon.log.contains("app=org.example.FetchDemo caller=") && daemon.log.contains("pending=1 reason=fetch"),
                "the launched app checked in with its launch reason and its pending event")
        #expect(try String(contentsOfFile: scratch + "/cache", encoding: .utf8) == "forecast: sunny\n")
        // Done, in the background with nothing to do: suspended (frozen), as iOS suspends it.
        #expect(daemon.process.waitForStandardError(containing: "froze org.example.FetchDemo"), "\(daemon.log)")
        let suspended = try admin.applications().first { $0["app_id"] == .string("org.example.FetchDemo") }
        #expect(suspended?["suspended"] == .bool(true), "\(String(describing: suspended))")

        // Again, with nothing new: the suspended app is thawed (not launched again) and says so.
        try admin.call("Fetch", "SimulateFetch") { try $0.append("org.example.FetchDemo") }
        #expect(daemon.process.waitForStandardError(containing: "completed its fetch: noData", timeout: .seconds(20)), "\(daemon.log)")
        #expect(daemon.waitForLog(containing: "thawed org.example.FetchDemo"), "\(daemon.log)")
        #expect(daemon.log.components(separatedBy: "launched org.example.FetchDemo for fetch").count == 2, "launched once")
        let demo = try admin.applications().first { $0["app_id"] == .string("org.example.FetchDemo") }
        #expect(demo?["fetch_last_result"] == .string("noData"), "\(String(describing: demo))")
        #expect(demo?["launch_error"] == nil, "\(String(describing: demo))")

        // A copy started by hand while the launched one lives is the user's,
        // not launched for the fetch (it was told "fetch" before).
        let byHand = try RawClient(daemon)
        let checkedIn = try byHand.call("Manager", "CheckIn") { try $0.append("org.example.FetchDemo") }
        #expect(try checkedIn.readOptions()["reason"] == .string("user"), "\(daemon.log)")
        #expect(daemon.waitForLog(containing: "pending=0 reason=user"), "\(daemon.log)")
        #expect(!daemon.log.contains("exited with code"), "the launched copy still runs: \(daemon.log)")
        #expect(daemon.stop() == .status(0))
    }

    @Test func pushLaunchesTheExampleAppWhichRefreshesAndCompletes() throws {
        let scratch = FileManager.default.temporaryDirectory.appendingPathComponent("bgtaskd-example-\(UUID())").path
        try FileManager.default.createDirectory(atPath: scratch, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: scratch) }
        try "headline: rain\n".write(toFile: scratch + "/source", atomically: true, encoding: .utf8)
        let example = BinaryLocator.path(of: "bgtaskd-example-fetch")
        let daemon = try DaemonUnderTest(desktopEntries: [
            DesktopEntrySpec(id: "org.example.NewsDemo", modes: ["fetch", "remote-notification"],
                             exec: "\(example) --source file://\(scratch)/source --cache \(scratch)/cache"),
        ])

        // Delivered as a push server would, with bgtaskctl: the app is not running, so it is launched.
        let sent = try daemon.bgtaskctl(["push", "org.example.NewsDemo", "-n", "-d", "story=17", "--json"])
        #expect(sent.succeeded, "\(sent)")
        let reply = try JSONSerialization.jsonObject(with: Data(sent.standardOutput.utf8)) as? [String: Any]
        let pushID = try #require(reply?["push_id"] as? String, "\(sent)")
        #expect(reply?["payload"] as? String == #"{"aps":{"content-available":1},"story":17}"#, "\(sent)")

        #expect(daemon.process.waitForStandardError(containing: "launched org.example.NewsDemo for remote-notification", timeout: .seconds(20)),
                "\(daemon.log)")
        #expect(daemon.process.waitForStandardError(containing: "froze org.example.NewsDemo", timeout: .seconds(20)), "\(daemon.log)")
        #expect(try String(contentsOfFile: scratch + "/cache", encoding: .utf8) == "headline: rain\n",
                "the push made the app refresh its copy")
        // Completed: the daemon holds nothing more for it, and says what came of it.
        let held = try daemon.bgtaskctl(["pushes", "org.example.NewsDemo", "--json"])
        #expect(held.succeeded && !held.standardOutput.contains(pushID), "\(held)")
        let admin = try RawClient(daemon)
        let demo = try admin.applications().first { $0["app_id"] == .string("org.example.NewsDemo") }
        #expect(demo?["pushes_delivered"] == .uint64(1), "\(String(describing: demo))")
        #expect(daemon.stop() == .status(0))
    }

    @Test func runningSDKAppReceivesPerformFetch() throws {
        let daemon = try DaemonUnderTest(desktopEntries: [
            DesktopEntrySpec(id: "org.example.Weather", modes: ["fetch"], exec: "/bin/false"),
        ])
        let app = try daemon.startTestApp(["--app-id", "org.example.Weather", "--tasks", "0", "--fetch-result", "newData"])
        #expect(app.waitForEvent("ready") != nil, "\(app.lines) \(app.standardError)")
        let admin = try RawClient(daemon)
        try admin.call("Fetch", "SimulateFetch") { try $0.append("org.example.Weather") }
        #expect(app.waitForEvent("perform_fetch") != nil, "\(app.lines)")
        #expect(app.waitForEvent("fetch_completed")?["result"] as? String == "newData")
        #expect(!daemon.log.contains("launched org.example.Weather"), "a running app is not launched again")
        app.stop()
        #expect(daemon.stop() == .status(0))
    }
}
