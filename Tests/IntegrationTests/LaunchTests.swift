import BgTaskTestKit
import Foundation
import SDBus
import Testing

/// Apps launched for background events: failures reported and held back,
/// launched apps that never answer terminated.
@Suite struct LaunchTests {
    @Test func entryThatCannotStartIsReportedNotRetried() throws {
        let daemon = try DaemonUnderTest(desktopEntries: [
            DesktopEntrySpec(id: "org.example.Broken", modes: ["fetch"], exec: "/nonexistent/broken-app --fetch"),
        ])
        let admin = try RawClient(daemon)
        try admin.call("Fetch", "SimulateFetch") { try $0.append("org.example.Broken") }
        #expect(daemon.process.waitForStandardError(containing: "cannot launch org.example.Broken"), "\(daemon.log)")

        // Reported where a person looks (bgtaskctl apps)…
        let broken = try admin.applications().first { $0["app_id"] == .string("org.example.Broken") }
        guard case .string(let launchError) = broken?["launch_error"] else {
            Issue.record("no launch_error in \(String(describing: broken))")
            return
        }
        #expect(launchError.contains("/nonexistent/broken-app"))
        // …and held back instead of retried.
        do {
            try admin.call("Fetch", "SimulateFetch") { try $0.append("org.example.Broken") }
            Issue.record("a second launch right after a failure must be held back")
        } catch let error as BusError {
            #expect(error.message.contains("not launching org.example.Broken for another"), "\(error)")
            #expect(error.message.contains("/nonexistent/broken-app"), "\(error)")
        }
        #expect(daemon.stop() == .status(0))
    }

    @Test func launchedAppThatNeverAnswersIsTerminatedAfterTheBudget() throws {
        let daemon = try DaemonUnderTest(
            settings: ["Fetch.WakeBudgetSec=2", "Tasks.KillGraceSec=1"],
            desktopEntries: [DesktopEntrySpec(id: "org.example.Silent", modes: ["fetch"], exec: "/bin/sleep 60")])
        let admin = try RawClient(daemon)
        let started = ContinuousClock.now
        try admin.call("Fetch", "SimulateFetch") { try $0.append("org.example.Silent") }
        #expect(daemon.process.waitForStandardError(containing: "launched org.example.Silent for fetch"), "\(daemon.log)")
        #expect(daemon.process.waitForStandardError(containing: "org.example.Silent exited: killed by SIGTERM", timeout: .seconds(15)),
                "\(daemon.log)")
        #expect(ContinuousClock.now - started >= .milliseconds(1800), "not before its budget")
        #expect(daemon.log.contains("org.example.Silent did not complete its fetch wake in time"))
        let silent = try admin.applications().first { $0["app_id"] == .string("org.example.Silent") }
        #expect(silent?["fetch_offences"] == .uint64(1), "\(String(describing: silent))")
        #expect(daemon.stop() == .status(0))
    }
}
