import BgTaskTestKit
import Foundation
import Testing

/// `bgtaskctl` against the real daemon.
@Suite struct BgTaskCtlTests {
    @Test func statusAndTasksShowWhatTheDaemonHolds() throws {
        let daemon = try DaemonUnderTest()
        let app = try daemon.startTestApp(["--app-id", "org.example.Weather", "--tasks", "2", "--name", "forecast"])
        #expect(app.waitForEvent("ready") != nil, "\(app.lines) \(app.standardError)")
        _ = try daemon.waitForTasks { $0.hasPrefix("a(ussd) 2") }

        let table = try daemon.bgtaskctl(["tasks"])
        #expect(table.succeeded, "\(table)")
        let rows = table.standardOutput.split(separator: "\n")
        #expect(rows.first?.contains("OWNER") == true)
        #expect(rows.filter { $0.contains("org.example.Weather") && $0.contains("forecast") }.count == 2, "\(table)")

        let json = try daemon.bgtaskctl(["tasks", "--json"])
        let decoded = try JSONSerialization.jsonObject(with: Data(json.standardOutput.utf8)) as? [String: Any]
        let tasks = try #require(decoded?["tasks"] as? [[String: Any]])
        #expect(tasks.count == 2)
        #expect(tasks.allSatisfy { $0["owner"] as? String == "org.example.Weather" && $0["unlimited"] as? Bool == true })

        let status = try daemon.bgtaskctl(["status", "--json"])
        let state = try JSONSerialization.jsonObject(with: Data(status.standardOutput.utf8)) as? [String: Any]
        #expect(state?["task_count"] as? Int == 2)
        #expect(state?["version"] as? Int == 1)
        #expect(state?["pid"] as? Int == Int(daemon.process.pid))
        app.stop()
        #expect(daemon.stop() == .status(0))
    }

    /// `fetch simulate` answers once the app has its PerformFetch, and says
    /// why when it cannot get it (it used to print success for any launch).
    @Test func fetchSimulateReportsWhetherTheAppGotItsFetch() throws {
        let scratch = FileManager.default.temporaryDirectory.appendingPathComponent("bgtaskd-simulate-\(UUID())").path
        try FileManager.default.createDirectory(atPath: scratch, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: scratch) }
        try "x\n".write(toFile: scratch + "/source", atomically: true, encoding: .utf8)
        let example = BinaryLocator.path(of: "bgtaskd-example-fetch")
        let daemon = try DaemonUnderTest(settings: ["Fetch.WakeBudgetSec=5"], desktopEntries: [
            DesktopEntrySpec(id: "org.example.Good", modes: ["fetch"],
                             exec: "\(example) --source file://\(scratch)/source --cache \(scratch)/cache"),
            DesktopEntrySpec(id: "org.example.Missing", modes: ["fetch"], exec: "/nonexistent/weather --background"),
            DesktopEntrySpec(id: "org.example.Quits", modes: ["fetch"], exec: "/bin/true"),
        ])
        let good = try daemon.bgtaskctl(["fetch", "simulate", "org.example.Good"])
        #expect(good.succeeded && good.standardOutput.contains("it has its PerformFetch"), "\(good)")
        let missing = try daemon.bgtaskctl(["fetch", "simulate", "org.example.Missing"])
        #expect(missing.exit == .status(1), "\(missing)")
        #expect(missing.standardError.contains("cannot launch org.example.Missing") && missing.standardError.contains("/nonexistent/weather"),
                "\(missing)")
        let quits = try daemon.bgtaskctl(["fetch", "simulate", "org.example.Quits"])
        #expect(quits.exit == .status(1), "\(quits)")
        #expect(quits.standardError.contains("never checked in"), "\(quits)")
        #expect(daemon.stop() == .status(0))
    }

    /// The errors any mode's call may get come with the same advice, worded for the mode.
    @Test func modeErrorsComeWithAdviceForTheirMode() throws {
        let daemon = try DaemonUnderTest(desktopEntries: [DesktopEntrySpec(id: "org.example.Plain", modes: [], exec: "/bin/true")])
        let fetch = try daemon.bgtaskctl(["fetch", "simulate", "org.example.Plain"])
        #expect(fetch.standardError.contains("add fetch to X-BgTaskd-Modes="), "\(fetch)")
        let push = try daemon.bgtaskctl(["push", "org.example.Plain", "-n"])
        #expect(push.standardError.contains("add remote-notification to X-BgTaskd-Modes="), "\(push)")
        let unknown = try daemon.bgtaskctl(["push", "org.example.Nobody", "-n"])
        #expect(unknown.standardError.contains("the daemon finds apps by their desktop entries"), "\(unknown)")
        #expect(daemon.stop() == .status(0))
    }

    @Test func noDaemonIsAClearError() throws {
        let bus = try PrivateBus()
        let result = try CommandResult.run(BinaryLocator.path(of: "bgtaskctl"), ["--bus", bus.address, "status"])
        #expect(result.exit == .status(1))
        #expect(result.standardError.contains("bgtaskd is not running"), "\(result)")
        bus.stop()
    }
}
