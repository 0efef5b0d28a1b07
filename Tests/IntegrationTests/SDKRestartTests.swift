import BackgroundTasks
import BgTaskTestKit
import Foundation
import Synchronization
import Testing

/// The state the SDK tells a restarted daemon is the app's latest, and never
/// one that undoes the app's own call; what it restores reaches the daemon
/// it is for. Played against a stand-in daemon that answers `CheckIn` late,
/// so that the app's call lands in the window.
@Suite struct SDKRestartTests {
    static let app = "org.example.Restart"
    static let fixture = BinaryLocator.packageRoot() + "/Tests/IntegrationTests/Fixtures/slow-checkin-daemon.py"

    func standIn(on bus: PrivateBus, checkInDelay: Double) throws -> ChildProcess {
        let daemon = try ChildProcess("/usr/bin/python3", [Self.fixture, "--address", bus.address, "--checkin-delay", String(checkInDelay)])
        #expect(daemon.waitForLine { $0 == "ready" } != nil, "\(daemon.standardError)")
        return daemon
    }

    /// Counts the manager's re-check-ins (``BackgroundTaskManager/onReconnect``).
    final class Reconnects: Sendable {
        private let count = Mutex(0)

        init(_ manager: BackgroundTaskManager) {
            manager.onReconnect = { [self] _, _ in count.withLock { $0 += 1 } }
        }

        /// Waits until there was one.
        func wait() -> Bool {
            let deadline = ContinuousClock.now + .seconds(20)
            while ContinuousClock.now < deadline {
                if count.withLock({ $0 }) > 0 { return true }
                Thread.sleep(forTimeInterval: 0.01)
            }
            return false
        }
    }

    /// An app checked in with a first stand-in and put in the background;
    /// that stand-in is gone.
    func backgroundAppWhoseDaemonWent(on bus: PrivateBus) async throws -> (BackgroundTaskManager, Reconnects) {
        let first = try standIn(on: bus, checkInDelay: 0)
        let manager = try await BackgroundTaskManager.connect(bus: .address(bus.address), appID: Self.app)
        let reconnects = Reconnects(manager)
        try await manager.setApplicationState(.background)
        _ = first.stop()
        return (manager, reconnects)
    }

    /// Makes a call the stand-in answers at once and waits until its line is
    /// read: every call the SDK sent before it is then in `daemon.lines`
    /// (the lines come through a pipe that may lag behind the answer).
    func mark(_ manager: BackgroundTaskManager, _ daemon: ChildProcess) async throws {
        _ = try await manager.backgroundTimeRemaining
        #expect(daemon.waitForLine { $0 == "call GetBackgroundTimeRemaining" } != nil, "\(daemon.lines)")
    }

    /// The states the stand-in was told, in order.
    func states(_ daemon: ChildProcess) -> [String] {
        daemon.lines.compactMap { $0.hasPrefix("call SetApplicationState ") ? String($0.dropFirst(25)) : nil }
    }

    /// The app set `active` while the re-check-in waited for its answer; the
    /// SDK then sent the `background` it had read before, behind it: an app
    /// the user brought to the foreground as the daemon came back was held
    /// in the background and killed at its deadline.
    @Test func aStateTheAppSetsDuringTheReCheckInIsNotUndone() async throws {
        let bus = try PrivateBus()
        defer { bus.stop() }
        let (manager, reconnects) = try await backgroundAppWhoseDaemonWent(on: bus)
        defer { manager.close() }

        let second = try standIn(on: bus, checkInDelay: 1)
        defer { _ = second.stop() }
        #expect(second.waitForLine { $0 == "call CheckIn \(Self.app)" } != nil, "\(second.lines)")
        try await manager.setApplicationState(.active)
        #expect(reconnects.wait(), "\(second.lines)")
        // What the SDK sends on the reply goes out before this.
        try await mark(manager, second)
        #expect(states(second) == ["active"], "\(second.lines)")
    }

    /// A state set while the daemon is down fails, but it is what the app
    /// wants: the restarted daemon is told it, not the one before.
    @Test func aStateSetWhileTheDaemonIsDownIsWhatTheRestartedOneIsTold() async throws {
        let bus = try PrivateBus()
        defer { bus.stop() }
        let (manager, reconnects) = try await backgroundAppWhoseDaemonWent(on: bus)
        defer { manager.close() }
        await #expect(throws: BackgroundTasksError.self) { try await manager.setApplicationState(.active) }

        let second = try standIn(on: bus, checkInDelay: 0)
        defer { _ = second.stop() }
        #expect(reconnects.wait(), "\(second.lines)")
        try await mark(manager, second)
        #expect(states(second) == ["active"], "\(second.lines)")
    }

    /// The SDK's restore went to the daemon's well-known name: for a daemon
    /// that was gone again by the time the bus routed it, it reached the
    /// next daemon, which got two rounds of check-ins and begins (refused
    /// past `Tasks.MaxPerConnection`), and ends of the first round's ids
    /// (found in review). Each round goes to the daemon it is for.
    @Test func theRestoreForADaemonThatWentAgainDoesNotReachTheNext() async throws {
        let bus = try PrivateBus()
        defer { bus.stop() }
        let first = try standIn(on: bus, checkInDelay: 0)
        let manager = try await BackgroundTaskManager.connect(bus: .address(bus.address), appID: Self.app)
        defer { manager.close() }
        _ = try await manager.beginBackgroundTask(name: "upload")
        // The first re-check-in's callback holds the SDK's thread while two
        // more daemons come and one goes: their owner changes wait behind it.
        let held = Mutex(0), release = Mutex(false)
        manager.onReconnect = { _, _ in
            guard held.withLock({ $0 += 1; return $0 }) == 1 else { return }
            while !release.withLock({ $0 }) { Thread.sleep(forTimeInterval: 0.01) }
        }
        _ = first.stop()
        let second = try standIn(on: bus, checkInDelay: 0)
        let deadline = ContinuousClock.now + .seconds(20)
        while held.withLock({ $0 }) == 0, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(10)) }
        #expect(held.withLock { $0 } == 1, "\(second.lines)")
        _ = second.stop()
        let third = try standIn(on: bus, checkInDelay: 0)
        _ = third.stop()
        let fourth = try standIn(on: bus, checkInDelay: 0)
        defer { _ = fourth.stop() }
        release.withLock { $0 = true }

        while held.withLock({ $0 }) < 2, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(10)) }
        #expect(held.withLock { $0 } == 2, "\(fourth.lines)")
        try await mark(manager, fourth)
        let calls = fourth.lines.filter { $0.hasPrefix("call ") && !$0.hasPrefix("call GetBackgroundTimeRemaining") }
        #expect(calls == ["call CheckIn \(Self.app)", "call BeginBackgroundTask upload"], "\(fourth.lines)")
    }

    /// The open tasks are begun again right behind the re-check-in, not
    /// after its answer: a daemon that took the app over as one it had
    /// launched would suspend it as idle in between.
    @Test func openTasksAreBegunAgainBeforeTheCheckInIsAnswered() async throws {
        let bus = try PrivateBus()
        defer { bus.stop() }
        let first = try standIn(on: bus, checkInDelay: 0)
        let manager = try await BackgroundTaskManager.connect(bus: .address(bus.address), appID: Self.app)
        defer { manager.close() }
        let reconnects = Reconnects(manager)
        _ = try await manager.beginBackgroundTask(name: "upload")
        _ = first.stop()

        let second = try standIn(on: bus, checkInDelay: 1)
        defer { _ = second.stop() }
        #expect(reconnects.wait(), "\(second.lines)")
        // The stand-in's lines reach the test through a pipe of their own,
        // which may lag behind the answer the SDK already has.
        #expect(second.waitForLine { $0 == "replied CheckIn" } != nil, "\(second.lines)")
        let order = second.lines.filter { $0.hasPrefix("call CheckIn") || $0.hasPrefix("call BeginBackgroundTask") || $0 == "replied CheckIn" }
        #expect(order == ["call CheckIn \(Self.app)", "call BeginBackgroundTask upload", "replied CheckIn"], "\(second.lines)")
    }
}
