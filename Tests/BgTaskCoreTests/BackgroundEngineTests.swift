import BgTaskCore
import BgTaskTestKit
import Testing

/// The engine's tasks, driven by a manual clock: no sleeps, no processes.
@Suite struct BackgroundEngineTests {
    let clock = ManualClock()
    var engine: BackgroundEngine<ManualClock>

    let alice = CallerIdentity(connection: ConnectionID(":1.10"), process: ProcessRef(pid: 100, serial: 1))
    let bob = CallerIdentity(connection: ConnectionID(":1.11"), process: ProcessRef(pid: 101, serial: 2))

    init() {
        engine = BackgroundEngine(
            policy: TaskPolicy(budget: .seconds(30), warning: .seconds(5), killGrace: .seconds(2), maxTasksPerConnection: 3),
            clock: clock)
    }

    /// Advances to the engine's next deadline and fires it.
    mutating func fireNext() -> [CoreAction] {
        guard let next = engine.nextDeadline() else { return [] }
        clock.advance(to: next)
        return engine.fireDueTimers()
    }

    @Test mutating func activeAppHasUnlimitedTimeAndNoTimer() throws {
        let begun = try engine.beginTask(named: "upload", caller: alice)
        #expect(begun.id != 0)
        #expect(begun.secondsRemaining == .greatestFiniteMagnitude)
        #expect(begun.actions == [.tasksChanged])
        #expect(engine.secondsRemaining(for: alice) == .greatestFiniteMagnitude)
        #expect(engine.nextDeadline() == nil)
    }

    @Test mutating func backgroundBudgetDrainsAndWarnsThenExpires() throws {
        let task = try engine.beginTask(named: "upload", caller: alice).id
        let start = clock.now
        _ = engine.setState(.background, caller: alice)
        #expect(engine.secondsRemaining(for: alice) == 30)
        clock.advance(by: .seconds(10))
        #expect(engine.secondsRemaining(for: alice) == 20)

        // The warning comes exactly WarningSec before the deadline.
        #expect(engine.nextDeadline() == start + .seconds(25))
        #expect(fireNext() == [.sendTaskExpiring(alice.connection, task: task, secondsLeft: 5)])

        // Then the deadline: TaskExpired, the task closes, SIGTERM.
        #expect(engine.nextDeadline() == start + .seconds(30))
        #expect(fireNext() == [
            .sendTaskExpired(alice.connection, task: task), .tasksChanged,
            .signalProcess(alice.process!, .terminate, app: .connection(alice.connection)),
        ])
        #expect(engine.taskCount == 0)

        // SIGKILL after the grace period (the shell sends it only if the process lives).
        #expect(engine.nextDeadline() == start + .seconds(32))
        #expect(fireNext() == [.signalProcess(alice.process!, .kill, app: .connection(alice.connection))])
        #expect(engine.nextDeadline() == nil)
    }

    @Test mutating func appThatEndsInTimeIsNeverTouched() throws {
        let task = try engine.beginTask(named: "save", caller: alice).id
        _ = engine.setState(.background, caller: alice)
        clock.advance(by: .seconds(29))
        #expect(engine.fireDueTimers() == [.sendTaskExpiring(alice.connection, task: task, secondsLeft: 1)])
        #expect(try engine.endTask(task, caller: alice.connection) == [.tasksChanged])
        #expect(engine.nextDeadline() == nil)
        clock.advance(by: .seconds(60))
        #expect(engine.fireDueTimers() == [])
    }

    @Test mutating func clockPausesWhileActiveAndKeepsUsedTime() throws {
        _ = try engine.beginTask(named: "sync", caller: alice)
        _ = engine.setState(.background, caller: alice)
        clock.advance(by: .seconds(12))
        _ = engine.setState(.active, caller: alice)
        #expect(engine.secondsRemaining(for: alice) == .greatestFiniteMagnitude)
        #expect(engine.nextDeadline() == nil)
        clock.advance(by: .seconds(100))
        _ = engine.setState(.background, caller: alice)
        // Paused, not reset: a task stayed open across the foreground stretch.
        #expect(engine.secondsRemaining(for: alice) == 18)
        #expect(engine.nextDeadline() == clock.now + .seconds(13))
    }

    @Test mutating func inactiveCountsAsForeground() throws {
        _ = try engine.beginTask(named: "sync", caller: alice)
        _ = engine.setState(.background, caller: alice)
        clock.advance(by: .seconds(3))
        _ = engine.setState(.inactive, caller: alice)
        clock.advance(by: .seconds(50))
        #expect(engine.secondsRemaining(for: alice) == .greatestFiniteMagnitude)
        #expect(engine.fireDueTimers() == [])
    }

    @Test mutating func foregroundWithNothingOpenGivesTheBudgetBack() throws {
        let task = try engine.beginTask(named: "sync", caller: alice).id
        _ = engine.setState(.background, caller: alice)
        clock.advance(by: .seconds(20))
        _ = try engine.endTask(task, caller: alice.connection)
        _ = engine.setState(.active, caller: alice)
        _ = engine.setState(.background, caller: alice)
        #expect(engine.secondsRemaining(for: alice) == 30)
    }

    @Test mutating func endingTheLastTaskInTheBackgroundDoesNotRefill() throws {
        let first = try engine.beginTask(named: "a", caller: alice).id
        _ = engine.setState(.background, caller: alice)
        clock.advance(by: .seconds(20))
        _ = try engine.endTask(first, caller: alice.connection)
        _ = try engine.beginTask(named: "b", caller: alice)
        #expect(engine.secondsRemaining(for: alice) == 10)
    }

    @Test mutating func tasksOfOneAppShareOneDeadline() throws {
        let app = "org.example.Weather"
        let one = CallerIdentity(connection: ConnectionID(":1.20"), process: ProcessRef(pid: 200, serial: 3))
        let two = CallerIdentity(connection: ConnectionID(":1.21"), process: ProcessRef(pid: 201, serial: 4))
        _ = try engine.checkIn(appID: app, caller: one)
        _ = try engine.checkIn(appID: app, caller: two)
        let a = try engine.beginTask(named: "a", caller: one).id
        _ = engine.setState(.background, caller: one)
        clock.advance(by: .seconds(10))
        // The second connection joins the same clock: 20 s left, not 30.
        let b = try engine.beginTask(named: "b", caller: two)
        #expect(b.secondsRemaining == 20)
        #expect(engine.secondsRemaining(for: two) == 20)

        #expect(fireNext() == [
            .sendTaskExpiring(one.connection, task: a, secondsLeft: 5),
            .sendTaskExpiring(two.connection, task: b.id, secondsLeft: 5),
        ])
        let key = AppKey.app(try AppID(validating: app))
        // Only the process that put the app in the background is tied to
        // the overstay; the other is told its task expired, not terminated.
        #expect(fireNext() == [
            .sendTaskExpired(one.connection, task: a),
            .sendTaskExpired(two.connection, task: b.id),
            .spareProcess(two.process!, app: key),
            .tasksChanged,
            .signalProcess(one.process!, .terminate, app: key),
        ])
        #expect(engine.tasksSnapshot().isEmpty)
    }

    @Test mutating func aTaskOpenedInsideTheWarningWindowIsWarnedAtOnce() throws {
        _ = try engine.beginTask(named: "a", caller: alice)
        _ = engine.setState(.background, caller: alice)
        _ = fireNext()  // the warning
        let late = try engine.beginTask(named: "late", caller: alice)
        #expect(late.actions == [.tasksChanged, .sendTaskExpiring(alice.connection, task: late.id, secondsLeft: 5)])
    }

    /// An app left in the background past its budget with no task open (Linux
    /// does not suspend it) is refused a task, not terminated the moment it
    /// asks: the task could only expire at once, before its expiration
    /// handler could end it. In the foreground it gets its time back.
    @Test mutating func aTaskAskedForWithNoTimeLeftIsRefusedAndTheAppLeftAlone() throws {
        _ = engine.setState(.background, caller: alice)
        clock.advance(by: .seconds(31))
        #expect(engine.secondsRemaining(for: alice) == 0)
        #expect(throws: CoreError.self) { try engine.beginTask(named: "late", caller: alice) }
        #expect(engine.taskCount == 0 && engine.nextDeadline() == nil)
        _ = engine.setState(.active, caller: alice)
        _ = engine.setState(.background, caller: alice)
        #expect(try engine.beginTask(named: "again", caller: alice).secondsRemaining == 30)
    }

    @Test mutating func aTaskAskedForAfterExpiryIsRefused() throws {
        _ = try engine.beginTask(named: "a", caller: alice)
        _ = engine.setState(.background, caller: alice)
        _ = fireNext()
        _ = fireNext()
        do {
            _ = try engine.beginTask(named: "again", caller: alice)
            Issue.record("a task was opened with no time left")
        } catch {
            #expect(error.code == .limitExceeded && error.message.contains("Tasks.BudgetSec"), "\(error)")
        }
        // The overstaying process still gets its SIGKILL.
        #expect(fireNext() == [.signalProcess(alice.process!, .kill, app: .connection(alice.connection))])
    }

    @Test mutating func warningLongerThanTheBudgetWarnsImmediately() throws {
        var engine = BackgroundEngine(policy: TaskPolicy(budget: .seconds(2), warning: .seconds(5)), clock: clock)
        let id = try engine.beginTask(named: "a", caller: alice).id
        _ = engine.setState(.background, caller: alice)
        let next = engine.nextDeadline()
        #expect(next != nil && next! <= clock.now)
        #expect(engine.fireDueTimers() == [.sendTaskExpiring(alice.connection, task: id, secondsLeft: 2)])
        #expect(engine.nextDeadline() == clock.now + .seconds(2))
    }

    @Test mutating func strangersCannotEndTasksAndUnknownIdsLookTheSame() throws {
        let id = try engine.beginTask(named: "mine", caller: alice).id
        let foreign = #expect(throws: CoreError.self) { try engine.endTask(id, caller: bob.connection) }
        let unknown = #expect(throws: CoreError.self) { try engine.endTask(9999, caller: bob.connection) }
        #expect(foreign?.code == .noSuchTask)
        #expect(unknown?.code == .noSuchTask)
        #expect(foreign?.message.contains("\(id)") == true)
        #expect(engine.taskCount == 1)
    }

    @Test mutating func idsAreNeverZeroNorReused() throws {
        var seen = Set<UInt32>()
        for _ in 0..<10 {
            let id = try engine.beginTask(named: "t", caller: alice).id
            #expect(id != 0)
            #expect(seen.insert(id).inserted)
            _ = try engine.endTask(id, caller: alice.connection)
        }
    }

    @Test mutating func perConnectionLimit() throws {
        for i in 0..<3 { _ = try engine.beginTask(named: "t\(i)", caller: alice) }
        let error = #expect(throws: CoreError.self) { try engine.beginTask(named: "one too many", caller: alice) }
        #expect(error?.code == .limitExceeded)
        // Another connection has its own allowance.
        _ = try engine.beginTask(named: "t", caller: bob)
    }

    @Test mutating func namesOverTheLimitAreRefused() throws {
        _ = try engine.beginTask(named: String(repeating: "é", count: 128), caller: alice)  // 256 bytes
        let error = #expect(throws: CoreError.self) {
            try engine.beginTask(named: String(repeating: "x", count: 257), caller: alice)
        }
        #expect(error?.code == .invalidArgs)
        #expect(error?.message.contains("257") == true)
    }

    @Test mutating func disconnectDropsTasksAndTimers() throws {
        _ = try engine.beginTask(named: "a", caller: alice)
        _ = try engine.beginTask(named: "b", caller: bob)
        _ = engine.setState(.background, caller: alice)
        #expect(engine.nextDeadline() != nil)
        #expect(engine.disconnect(alice.connection) == [.tasksChanged])
        #expect(engine.tasksSnapshot().map(\.name) == ["b"])
        #expect(engine.nextDeadline() == nil)
        #expect(engine.disconnect(alice.connection) == [])
    }

    @Test mutating func checkInRules() throws {
        _ = try engine.checkIn(appID: "org.example.Mail", caller: alice)
        _ = try engine.checkIn(appID: "org.example.Mail", caller: alice)  // again: fine
        let rebind = #expect(throws: CoreError.self) { try engine.checkIn(appID: "org.example.Other", caller: alice) }
        #expect(rebind?.code == .notPermitted)

        let invalid = #expect(throws: CoreError.self) { try engine.checkIn(appID: "not an id", caller: bob) }
        #expect(invalid?.code == .invalidArgs)

        let flatpak = CallerIdentity(
            connection: ConnectionID(":1.30"), appID: try AppID(validating: "org.example.Sandboxed"),
            appIDSource: .flatpak, isSandboxed: true)
        let claim = #expect(throws: CoreError.self) { try engine.checkIn(appID: "org.example.Mail", caller: flatpak) }
        #expect(claim?.code == .notPermitted)
        _ = try engine.checkIn(appID: "org.example.Sandboxed", caller: flatpak)

        let unnamedSandbox = CallerIdentity(connection: ConnectionID(":1.31"), isSandboxed: true)
        let unnamed = #expect(throws: CoreError.self) { try engine.checkIn(appID: "org.example.Any", caller: unnamedSandbox) }
        #expect(unnamed?.code == .notPermitted)
    }

    @Test mutating func checkInCarriesOpenTasksAndTheClockAlong() throws {
        _ = try engine.beginTask(named: "a", caller: alice)
        _ = engine.setState(.background, caller: alice)
        clock.advance(by: .seconds(10))
        let checkedIn = try engine.checkIn(appID: "org.example.Mail", caller: alice)
        #expect(checkedIn.actions == [.tasksChanged, .appCheckedIn(try AppID(validating: "org.example.Mail"), alice.connection, reason: "user")])
        #expect(checkedIn.reason == "user")
        #expect(checkedIn.pending == 0)
        #expect(engine.secondsRemaining(for: alice) == 20)
        #expect(engine.tasksSnapshot().first?.owner == "org.example.Mail")
    }

    /// A second CheckIn on the same connection made no action: its reply
    /// counted what waited for the app in the plugins, which nothing sent.
    @Test mutating func checkingInAgainTellsThePluginsToSendWhatWaits() throws {
        let mail = try AppID(validating: "org.example.Mail")
        _ = try engine.checkIn(appID: "org.example.Mail", caller: alice)
        let again = try engine.checkIn(appID: "org.example.Mail", caller: alice)
        #expect(again.actions == [.appCheckedInAgain(mail, alice.connection, reason: "user")])
    }

    @Test mutating func sleepPausesBackgroundClocks() throws {
        _ = try engine.beginTask(named: "a", caller: alice)
        _ = engine.setState(.background, caller: alice)
        clock.advance(by: .seconds(10))
        #expect(engine.setSleeping(true) == [.sleepingChanged(true)])
        #expect(engine.nextDeadline() == nil)
        clock.advance(by: .seconds(3600))
        #expect(engine.fireDueTimers() == [])
        #expect(engine.setSleeping(true) == [])
        _ = engine.setSleeping(false)
        #expect(engine.secondsRemaining(for: alice) == 20)
        #expect(engine.nextDeadline() == clock.now + .seconds(15))
    }

    @Test mutating func snapshotShowsOwnerAndRemainingTime() throws {
        let id = try engine.beginTask(named: "upload", caller: alice).id
        _ = engine.setState(.background, caller: alice)
        clock.advance(by: .milliseconds(1500))
        let snapshot = engine.tasksSnapshot()
        #expect(snapshot == [TaskInfo(id: id, owner: ":1.10", name: "upload", secondsRemaining: 28.5)])
    }
}
