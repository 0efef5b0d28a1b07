import BgTaskTestKit
import Foundation
import Testing

/// Where a caller's app id comes from (docs/DESIGN.md §3), seen through the real daemon.
@Suite struct IdentityTests {
    static let cgroupRoot = ScopedApp.cgroupRoot
    static var canMakeScopes: Bool { ScopedApp.canMakeScopes }

    @Test(.enabled(if: IdentityTests.canMakeScopes, "needs root and a writable cgroup v2 hierarchy"))
    func appIDComesFromTheSystemdUnit() throws {
        let daemon = try DaemonUnderTest()
        let scoped = try ScopedApp(daemon, appID: "org.example.Scoped", ["--hold", "60"])
        let app = scoped.process
        defer { scoped.stop() }
        #expect(app.waitForEvent("begun") != nil, "\(app.lines) \(app.standardError)")
        // Without any CheckIn, the task belongs to the app its unit names.
        let tasks = try daemon.waitForTasks { $0.contains("org.example.Scoped") }
        #expect(tasks.contains("\"org.example.Scoped\""), "\(tasks)")
        #expect(daemon.waitForLog(containing: "app=org.example.Scoped"))
        #expect(daemon.stop() == .status(0))
    }

    @Test(.enabled(if: IdentityTests.canMakeScopes, "needs root and a writable cgroup v2 hierarchy"))
    func unitAppCannotCheckInAsAnotherApp() throws {
        let daemon = try DaemonUnderTest()
        let scoped = try ScopedApp(daemon, appID: "org.example.Scoped", ["--app-id", "org.example.Impostor"])
        let app = scoped.process
        defer { scoped.stop() }
        let error = try #require(app.waitForEvent("error"), "\(app.lines) \(app.standardError)")
        #expect(error["name"] as? String == "org.bgtaskd.BackgroundTasks1.Error.NotPermitted")
        #expect((error["message"] as? String ?? "").contains("org.example.Scoped"))
        #expect(daemon.stop() == .status(0))
    }

    @Test func unsandboxedCallerMayClaimAnID() throws {
        let daemon = try DaemonUnderTest()
        let app = try daemon.startTestApp(["--app-id", "org.example.Claimed", "--hold", "60"])
        #expect(app.waitForEvent("begun") != nil, "\(app.lines) \(app.standardError)")
        let tasks = try daemon.waitForTasks { $0.contains("org.example.Claimed") }
        #expect(tasks.contains("\"org.example.Claimed\""), "\(tasks)")
        app.stop()
        #expect(daemon.stop() == .status(0))
    }
}
