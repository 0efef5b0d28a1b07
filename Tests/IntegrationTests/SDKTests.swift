import BackgroundTasks
import BgTaskTestKit
import Foundation
import Synchronization
import Testing

/// The Swift SDK against the real daemon, in this process. Deadlines are kept
/// far away: an expiry here would terminate the test runner itself (that path
/// is tested with child processes in EnforcementTests).
@Suite struct SDKTests {
    @Test func beginEndAndRemainingTime() async throws {
        let daemon = try DaemonUnderTest(settings: ["Tasks.BudgetSec=120"])
        let manager = try await BackgroundTaskManager.connect(bus: .address(daemon.bus.address))
        let id = try await manager.beginBackgroundTask(name: "upload")
        #expect(id != .invalid)
        #expect(try await manager.backgroundTimeRemaining == BackgroundTaskManager.unlimitedTime)
        try await manager.setApplicationState(.background)
        let remaining = try await manager.backgroundTimeRemaining
        #expect(remaining > 100 && remaining <= 120)
        #expect(try daemon.property("Tasks").contains("\"upload\""))
        try await manager.endBackgroundTask(id)
        #expect(try daemon.waitForTasks { $0 == "a(ussd) 0" } == "a(ussd) 0")
        let again = await #expect(throws: BackgroundTasksError.self) { try await manager.endBackgroundTask(id) }
        #expect(again?.code == .noSuchTask)
        // "No task" ends nothing, as on iOS (before: NoSuchTask from the daemon).
        try await manager.endBackgroundTask(.invalid)
        manager.close()
        #expect(daemon.stop() == .status(0))
    }

    /// A crash of the daemon lost the app's open tasks: ending one answered
    /// `.noSuchTask`, its expiration handler never ran, and a launched app
    /// was suspended as idle in the middle of its work. The SDK begins them
    /// again in the restarted daemon, under the ids the app holds: ending
    /// one ends the new daemon's task, and its warning names the app's id.
    @Test func openTasksAreBegunAgainAfterTheDaemonRestarts() async throws {
        let daemon = try DaemonUnderTest(settings: ["Tasks.BudgetSec=120", "Tasks.WarningSec=119"])
        let manager = try await BackgroundTaskManager.connect(bus: .address(daemon.bus.address), appID: "org.example.Keeper")
        let reconnects = SDKRestartTests.Reconnects(manager)
        let warned = Mutex<[BackgroundTaskIdentifier]>([])
        let handled = Mutex(0)
        manager.onTaskExpiring = { id, _ in warned.withLock { $0.append(id) } }
        let upload = try await manager.beginBackgroundTask(name: "upload") { handled.withLock { $0 += 1 } }
        let save = try await manager.beginBackgroundTask(name: "save")
        _ = try daemon.crashAndRestart()
        #expect(reconnects.wait())
        let tasks = try daemon.waitForTasks { $0.contains("\"upload\"") && $0.contains("\"save\"") }
        #expect(tasks.contains("\"upload\"") && tasks.contains("\"save\""), "\(tasks) \(daemon.log.suffix(1500))")
        for id in [upload, save] { #expect(!tasks.contains(" \(id.rawValue) \"org.example.Keeper\""), "new ids in the new daemon: \(tasks)") }

        try await manager.endBackgroundTask(save)
        #expect(!(try daemon.waitForTasks { !$0.contains("\"save\"") }).contains("\"save\""))
        // In the background the warning comes a second later: for the app's id, with its handler.
        try await manager.setApplicationState(.background)
        let deadline = ContinuousClock.now + .seconds(10)
        while handled.withLock({ $0 }) == 0, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(20)) }
        #expect(handled.withLock { $0 } == 1 && warned.withLock { $0 } == [upload], "\(warned.withLock { $0 })")
        try await manager.endBackgroundTask(upload)
        #expect(try daemon.waitForTasks { $0 == "a(ussd) 0" } == "a(ussd) 0")
        manager.close()
        #expect(daemon.stop() == .status(0))
    }

    /// A daemon without a mode's plugin answers its calls UnknownMethod,
    /// which the SDK passed on as `.other`, though its docs promise
    /// `.daemonUnavailable` for that case.
    @Test func aModeWhosePluginIsNotLoadedIsDaemonUnavailable() async throws {
        let empty = NSTemporaryDirectory() + "bgtaskd-no-plugins-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        try FileManager.default.createDirectory(atPath: empty, withIntermediateDirectories: false, attributes: [.posixPermissions: 0o700])
        defer { try? FileManager.default.removeItem(atPath: empty) }
        let daemon = try DaemonUnderTest(arguments: ["--plugin-dir", empty])
        let manager = try await BackgroundTaskManager.connect(bus: .address(daemon.bus.address))
        let fetch = await #expect(throws: BackgroundTasksError.self) { try await manager.setMinimumBackgroundFetchInterval(3600) }
        #expect(fetch?.code == .daemonUnavailable, "\(String(describing: fetch))")
        let regions = await #expect(throws: BackgroundTasksError.self) { _ = try await manager.monitoredRegions() }
        #expect(regions?.code == .daemonUnavailable, "\(String(describing: regions))")
        manager.close()
        #expect(daemon.stop() == .status(0))
    }

    /// A string with a NUL went to sd-bus as a C string, cut short without a
    /// word: "org.example.Weather\0x" checked in as org.example.Weather, and
    /// a task named "a\0b" was "a". A noncharacter failed as `.other`
    /// (EINVAL). Both are `.invalidArgument` now, saying why.
    @Test func stringsTheBusCannotCarryAreRefusedNotCut() async throws {
        let daemon = try DaemonUnderTest(desktopEntries: [DesktopEntrySpec(id: "org.example.Weather", modes: ["fetch"], exec: "/bin/false")])
        let manager = try await BackgroundTaskManager.connect(bus: .address(daemon.bus.address))
        let checkIn = await #expect(throws: BackgroundTasksError.self) { _ = try await manager.checkIn(appID: "org.example.Weather\u{0}x") }
        #expect(checkIn?.code == .invalidArgument && checkIn?.message.contains("U+0000") == true, "\(String(describing: checkIn))")
        for name in ["a\u{0}b", "a\u{FFFE}b"] {
            let begin = await #expect(throws: BackgroundTasksError.self) { _ = try await manager.beginBackgroundTask(name: name) }
            #expect(begin?.code == .invalidArgument && begin?.message.contains("D-Bus strings cannot carry") == true, "\(String(describing: begin))")
        }
        #expect(try daemon.property("Tasks") == "a(ussd) 0")
        manager.close()
        #expect(daemon.stop() == .status(0))
    }

    /// A TCP bus with nobody listening failed at the first match, as
    /// `.disconnected` with "Transport endpoint is not connected"; the docs
    /// promise `.daemonUnavailable` when there is no bus.
    @Test func aBusThatIsNotThereIsDaemonUnavailable() async throws {
        let error = await #expect(throws: BackgroundTasksError.self) {
            _ = try await BackgroundTaskManager.connect(bus: .address("tcp:host=127.0.0.1,port=1"))
        }
        #expect(error?.code == .daemonUnavailable, "\(String(describing: error))")
        #expect(error?.message.contains("tcp:host=127.0.0.1,port=1") == true, "\(String(describing: error))")
    }

    /// A socket that accepts and never answers held connect() for sd-bus's
    /// 90 s authentication timeout (no call's timeout runs meanwhile). It
    /// gives up with the SDK's call timeout now.
    @Test func aBusThatNeverAnswersFailsTheConnectingInTime() async throws {
        let path = NSTemporaryDirectory() + "bgtaskd-silent-\(getpid())-\(UInt32.random(in: 0...UInt32.max)).sock"
        let silent = try ChildProcess("/usr/bin/python3", ["-c", """
            import socket, sys, time
            s = socket.socket(socket.AF_UNIX); s.bind(sys.argv[1]); s.listen(8)
            print("ready", flush=True)
            held = []
            while True:
                held.append(s.accept()[0])
            """, path])
        defer {
            _ = silent.stop()
            unlink(path)
        }
        #expect(silent.waitForLine { $0 == "ready" } != nil, "\(silent.standardError)")
        let error = await #expect(throws: BackgroundTasksError.self) {
            _ = try await BackgroundTaskManager.connect(bus: .address("unix:path=" + path))
        }
        // Told by the SDK's own timeout, not sd-bus's (no elapsed time is checked: under a full
        // parallel run the awaiting test may wait long for a thread once the error is there).
        #expect(error?.code == .daemonUnavailable, "\(String(describing: error))")
        #expect(error?.message.contains("no answer within 10 s") == true, "\(String(describing: error))")
    }

    @Test func strangerCannotEndMyTask() async throws {
        let daemon = try DaemonUnderTest()
        let mine = try await BackgroundTaskManager.connect(bus: .address(daemon.bus.address))
        let stranger = try await BackgroundTaskManager.connect(bus: .address(daemon.bus.address))
        let id = try await mine.beginBackgroundTask(name: "mine")
        let error = await #expect(throws: BackgroundTasksError.self) { try await stranger.endBackgroundTask(id) }
        #expect(error?.code == .noSuchTask)
        #expect(error?.name == "org.bgtaskd.BackgroundTasks1.Error.NoSuchTask")
        try await mine.endBackgroundTask(id)
        mine.close()
        stranger.close()
        #expect(daemon.stop() == .status(0))
    }

    @Test func expirationHandlerRunsOnTaskExpiring() async throws {
        // Warned 0.5 s into the background, with 29.5 s still left: ending in the handler is in time.
        let daemon = try DaemonUnderTest(settings: ["Tasks.BudgetSec=30", "Tasks.WarningSec=29.5"])
        let manager = try await BackgroundTaskManager.connect(bus: .address(daemon.bus.address))
        let (warnings, continuation) = AsyncStream.makeStream(of: Void.self)
        let id = try await manager.beginBackgroundTask(name: "sync") { continuation.yield() }
        try await manager.setApplicationState(.background)
        var iterator = warnings.makeAsyncIterator()
        await iterator.next()
        try await manager.endBackgroundTask(id)
        #expect(try daemon.waitForTasks { $0 == "a(ussd) 0" } == "a(ussd) 0")
        manager.close()
        #expect(daemon.stop() == .status(0))
        #expect(!daemon.log.contains("SIGTERM"))
    }

    @Test func withBackgroundTaskCancelsTheBodyOnExpiring() async throws {
        let daemon = try DaemonUnderTest(settings: ["Tasks.BudgetSec=30", "Tasks.WarningSec=29.5"])
        let manager = try await BackgroundTaskManager.connect(bus: .address(daemon.bus.address))
        try await manager.setApplicationState(.background)
        let cancelled = Mutex(false)
        await #expect(throws: CancellationError.self) {
            try await manager.withBackgroundTask(name: "long") {
                do {
                    try await Task.sleep(for: .seconds(60))
                } catch {
                    cancelled.withLock { $0 = true }
                    throw error
                }
            }
        }
        #expect(cancelled.withLock { $0 })
        #expect(try daemon.waitForTasks { $0 == "a(ussd) 0" } == "a(ussd) 0", "the task was ended for us")
        manager.close()
        #expect(daemon.stop() == .status(0))
    }

    @Test func checkInReportsTheLaunch() async throws {
        let daemon = try DaemonUnderTest()
        let manager = try await BackgroundTaskManager.connect(bus: .address(daemon.bus.address), appID: "org.example.Weather")
        #expect(manager.launch?.reason == .user)
        #expect(manager.launch?.pending == 0)
        let id = try await manager.beginBackgroundTask(name: "forecast")
        #expect(try daemon.property("Tasks").contains("\"org.example.Weather\""))
        let error = await #expect(throws: BackgroundTasksError.self) { try await manager.checkIn(appID: "org.example.Other") }
        #expect(error?.code == .notPermitted)
        try await manager.endBackgroundTask(id)
        manager.close()
        #expect(daemon.stop() == .status(0))
    }

    @Test func noDaemonIsDaemonUnavailable() async throws {
        let bus = try PrivateBus()
        let error = await #expect(throws: BackgroundTasksError.self) {
            let manager = try await BackgroundTaskManager.connect(bus: .address(bus.address))
            _ = try await manager.beginBackgroundTask(name: "x")
        }
        #expect(error?.code == .daemonUnavailable)
        bus.stop()
    }
}
