import BgTaskTestKit
import Foundation
import Testing

/// Where a caller's app id comes from (docs/DESIGN.md §3), seen through the real daemon.
@Suite struct IdentityTests {
    /// A cgroup v2 directory named like a systemd app scope, when this machine lets us make one.
    static let cgroupRoot = "/sys/fs/cgroup/unified"
    static var canMakeScopes: Bool {
        geteuid() == 0 && FileManager.default.isWritableFile(atPath: cgroupRoot)
            && FileManager.default.fileExists(atPath: cgroupRoot + "/cgroup.procs")
    }

    /// Runs the test app inside `app-gnome-<id>-<n>.scope`, as a desktop launcher would.
    private func startInScope(_ daemon: DaemonUnderTest, appID: String, _ arguments: [String]) throws -> (ChildProcess, String) {
        let scope = "\(Self.cgroupRoot)/app-gnome-\(appID)-\(getpid())\(Int.random(in: 0..<1_000_000)).scope"
        try FileManager.default.createDirectory(atPath: scope, withIntermediateDirectories: false)
        let testapp = BinaryLocator.path(of: "bgtaskd-testapp")
        let quoted = ([testapp, "--bus", daemon.bus.address] + arguments).map { "'\($0)'" }.joined(separator: " ")
        let child = try ChildProcess("/bin/sh", ["-c", "echo $$ > \(scope)/cgroup.procs && exec \(quoted)"])
        return (child, scope)
    }

    @Test(.enabled(if: IdentityTests.canMakeScopes, "needs root and a writable cgroup v2 hierarchy"))
    func appIDComesFromTheSystemdUnit() throws {
        let daemon = try DaemonUnderTest()
        let (app, scope) = try startInScope(daemon, appID: "org.example.Scoped", ["--hold", "60"])
        defer {
            app.stop()
            app.waitForExit()
            rmdir(scope)  // an empty cgroup is removed with rmdir, never by deleting its files
        }
        #expect(app.waitForEvent("begun") != nil, "\(app.lines) \(app.standardError)")
        // Without any CheckIn, the task belongs to the app its unit names.
        let tasks = try daemon.waitForTasks { $0.contains("org.example.Scoped") }
        #expect(tasks.contains("\"org.example.Scoped\""), "\(tasks)")
        #expect(daemon.log.contains("app=org.example.Scoped"))
        #expect(daemon.stop() == .status(0))
    }

    @Test(.enabled(if: IdentityTests.canMakeScopes, "needs root and a writable cgroup v2 hierarchy"))
    func unitAppCannotCheckInAsAnotherApp() throws {
        let daemon = try DaemonUnderTest()
        let (app, scope) = try startInScope(daemon, appID: "org.example.Scoped", ["--app-id", "org.example.Impostor"])
        defer {
            app.stop()
            app.waitForExit()
            rmdir(scope)  // an empty cgroup is removed with rmdir, never by deleting its files
        }
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
