import BgTaskCore
import BgTaskTestKit
import Testing

/// Suspension (iOS's "suspended") and the backlog drained in turns after a
/// wake from sleep, with a manual clock.
@Suite struct SuspensionTests {
    let clock = ManualClock()
    var engine: BackgroundEngine<ManualClock>

    init() {
        engine = BackgroundEngine(
            policy: TaskPolicy(budget: .seconds(600), warning: .seconds(5), killGrace: .seconds(2),
                               maxConcurrentWakes: 2, chunk: .seconds(10)),
            clock: clock)
    }

    static func app(_ n: Int) -> AppID { try! AppID(validating: "org.example.App\(n)") }

    /// A caller whose app id the daemon verified (its process can be frozen).
    func verified(_ n: Int) -> CallerIdentity {
        CallerIdentity(connection: ConnectionID(":1.\(n)"), process: ProcessRef(pid: Int32(100 + n), serial: UInt64(n)),
                       appID: Self.app(n), appIDSource: .flatpak, isSandboxed: true)
    }

    /// Checks each caller in as its app, begins a task and goes to the background.
    mutating func backgroundWithATask(_ callers: [CallerIdentity]) throws {
        for caller in callers {
            _ = try engine.checkIn(appID: caller.appID!.rawValue, caller: caller)
            _ = try engine.beginTask(named: "t", caller: caller)
            _ = engine.setState(.background, caller: caller)
        }
    }

    func freezes(_ actions: [CoreAction]) -> [AppKey] {
        actions.compactMap { if case .freeze(let key, _) = $0 { key } else { nil } }
    }

    func thaws(_ actions: [CoreAction]) -> [AppKey] {
        actions.compactMap { if case .thaw(let key, _) = $0 { key } else { nil } }
    }

    func request(_ n: Int, _ token: String, budget: Duration = .seconds(30)) -> WakeRequest {
        WakeRequest(app: Self.app(n), reason: "fetch", plugin: "fetch", budget: budget, token: token)
    }

    /// An app the daemon launched for an event, checked in and done: it is
    /// suspended (its launched process frozen) and thawed before its next event.
    @Test mutating func aLaunchedAppWithNothingToDoIsSuspendedAndThawedBeforeItsNextEvent() throws {
        let key = AppKey.app(Self.app(1))
        #expect(try engine.requestWake(request(1, "t1")).contains(.launch(Self.app(1), reason: "fetch")))
        let process = ProcessRef(pid: 101, serial: 1)
        #expect(freezes(engine.launchStarted(Self.app(1), process: process)).isEmpty, "it has a wake to run")
        let launched = CallerIdentity(connection: ConnectionID(":1.1"), process: process, appID: Self.app(1), appIDSource: .launched)
        let checkIn = try engine.checkIn(appID: Self.app(1).rawValue, caller: launched)
        #expect(checkIn.pending == 1)
        // Completed: nothing left to do; suspended once it has had time to read the answer.
        let done = try engine.completeWake(token: "t1", caller: launched.connection)
        #expect(freezes(done).isEmpty, "not while the answer to its completion is on its way: \(done)")
        #expect(!engine.isSuspended(key))
        #expect(engine.nextDeadline() == clock.now + engine.policy.idleGrace)
        clock.advance(by: engine.policy.idleGrace)
        #expect(engine.fireDueTimers() == [.freeze(key, [process])])
        #expect(engine.isSuspended(key))
        // A wake thaws it first, then hands it the event.
        let actions = try engine.requestWake(request(1, "t2"))
        #expect(actions == [
            .thaw(key, [process]),
            .deliverWake(token: "t2", plugin: "fetch", app: Self.app(1), connection: launched.connection),
        ])
        // Coming to the foreground keeps it thawed; the foreground is never frozen.
        _ = try engine.completeWake(token: "t2", caller: launched.connection)
        clock.advance(by: engine.policy.idleGrace)
        #expect(engine.fireDueTimers() == [.freeze(key, [process])])
        #expect(thaws(engine.setState(.active, caller: launched)) == [key])
        #expect(!engine.isSuspended(key))
    }

    /// A process an earlier daemon launched, taken over after a crash: not
    /// frozen before its SDK has checked in again (frozen, it could not);
    /// then in the background and idle, so suspended after the grace. Its
    /// check-in is the launched instance's (told the launch reason), a copy
    /// the user starts is not; a wake thaws it; its exit ends the app.
    @Test mutating func aLaunchedProcessTakenOverAfterACrashIsHeldAsLaunched() throws {
        let key = AppKey.app(Self.app(1))
        let process = ProcessRef(pid: 101, serial: 1)
        #expect(freezes(engine.adoptLaunched(Self.app(1), process: process, reason: "location")).isEmpty)
        #expect(engine.adoptLaunched(Self.app(1), process: ProcessRef(pid: 102, serial: 2), reason: "fetch").isEmpty,
                "launched already")
        clock.advance(by: engine.policy.idleGrace * 10)
        #expect(freezes(engine.fireDueTimers()).isEmpty, "not before it has checked in again")
        let byHand = CallerIdentity(connection: ConnectionID(":1.2"), process: ProcessRef(pid: 103, serial: 3), appID: Self.app(1), appIDSource: .systemdUnit)
        #expect(try engine.checkIn(appID: Self.app(1).rawValue, caller: byHand).reason == "user")
        // Its SDK checks in again: in the background, told why it was launched; suspended when idle.
        let launched = CallerIdentity(connection: ConnectionID(":1.1"), process: process, appID: Self.app(1), appIDSource: .launched)
        #expect(try engine.checkIn(appID: Self.app(1).rawValue, caller: launched).reason == "location")
        clock.advance(by: engine.policy.idleGrace)
        #expect(engine.fireDueTimers() == [.freeze(key, [process])])
        #expect(engine.isSuspended(key))
        let wake = try engine.requestWake(request(1, "t1"))
        #expect(thaws(wake) == [key])
        _ = try engine.completeWake(token: "t1", caller: byHand.connection)
        _ = engine.disconnect(launched.connection)
        _ = engine.disconnect(byHand.connection)
        let exited = engine.launchedProcessExited(Self.app(1), process: process, status: "was killed by SIGKILL")
        #expect(exited.contains(.appGone(Self.app(1))), "\(exited)")
        #expect(!engine.isSuspended(key))
    }

    /// One taken over that never checks in again (no SDK, or one that does
    /// not see the daemon back) ran on unsuspended for good: after the
    /// adoption grace it is idle, so suspended; a wake thaws it for its check-in.
    @Test mutating func aLaunchedProcessTakenOverThatNeverChecksInIsSuspendedAfterTheGrace() throws {
        let key = AppKey.app(Self.app(1))
        let process = ProcessRef(pid: 101, serial: 1)
        _ = engine.adoptLaunched(Self.app(1), process: process, reason: "fetch")
        clock.advance(by: engine.policy.adoptionGrace - .milliseconds(1))
        #expect(freezes(engine.fireDueTimers()).isEmpty)
        clock.advance(by: .milliseconds(1))
        #expect(freezes(engine.fireDueTimers()).isEmpty, "the idle grace starts")
        clock.advance(by: engine.policy.idleGrace)
        #expect(engine.fireDueTimers() == [.freeze(key, [process])])
        #expect(engine.isSuspended(key))
        #expect(thaws(try engine.requestWake(request(1, "t1"))) == [key])
        let launched = CallerIdentity(connection: ConnectionID(":1.1"), process: process, appID: Self.app(1), appIDSource: .launched)
        let checkIn = try engine.checkIn(appID: Self.app(1).rawValue, caller: launched)
        #expect(checkIn.reason == "fetch")
        #expect(checkIn.actions.contains { if case .deliverWake(let token, _, _, _) = $0 { token == "t1" } else { false } }, "\(checkIn.actions)")
    }

    /// Refresh gone while wakes wait for the machine to wake: those of the
    /// plugins it governs fail back (no offence, no launch backoff); an app
    /// in the foreground keeps its own, and another plugin's wake stays.
    @Test mutating func wakesWaitingWhenRefreshGoesFailBackToTheirPlugins() throws {
        let foreground = CallerIdentity(connection: ConnectionID(":1.1"), process: ProcessRef(pid: 101, serial: 1))
        _ = try engine.checkIn(appID: Self.app(2).rawValue, caller: foreground)
        _ = engine.setSleeping(true)
        _ = try engine.requestWake(request(1, "t1"))
        _ = try engine.requestWake(WakeRequest(app: Self.app(1), reason: "transfer", plugin: "transfer", budget: .seconds(30), token: "t2"))
        _ = try engine.requestWake(request(2, "t3"))
        #expect(engine.appsWithWaitingWakes == [Self.app(1)], "the foreground app had its wake at once")
        let withdrawn = engine.withdrawWaitingWakes(of: Self.app(1), plugins: ["fetch"], reason: "Background App Refresh is denied")
        #expect(withdrawn.contains(.wakeFailed(token: "t1", plugin: "fetch", app: Self.app(1), reason: "Background App Refresh is denied")),
                "\(withdrawn)")
        #expect(!withdrawn.contains { if case .wakeFailed(let token, _, _, _) = $0 { token == "t2" } else { false } })
        #expect(engine.withdrawWaitingWakes(of: Self.app(2), plugins: ["fetch"], reason: "x").isEmpty)
        #expect(engine.launchBackoff(for: Self.app(1)) == nil)
        let woken = engine.setSleeping(false)
        #expect(woken.contains(.launch(Self.app(1), reason: "transfer")), "the other plugin's wake goes on: \(woken)")
    }

    /// A launch that goes on as the app its launcher script started (the
    /// script exited): forgetting the script's process thawed the cgroup
    /// while the app counted as suspended, and a SIGKILL pending for the
    /// script went nowhere (found in review). Both are the app's now.
    @Test mutating func aLaunchHandedOverKeepsItsFreezeAndItsPendingSIGKILL() throws {
        let key = AppKey.app(Self.app(1))
        let script = ProcessRef(pid: 101, serial: 1), app = ProcessRef(pid: 102, serial: 2)
        _ = try engine.requestWake(request(1, "t1"))
        _ = engine.launchStarted(Self.app(1), process: script)
        let started = CallerIdentity(connection: ConnectionID(":1.1"), process: app, appID: Self.app(1), appIDSource: .systemdUnit)
        _ = try engine.checkIn(appID: Self.app(1).rawValue, caller: started)
        #expect(engine.checkedInProcesses(Self.app(1), besides: script) == [app])
        #expect(engine.launchAwaitsCheckIn(Self.app(1), process: script), "checked in, but not from the script")
        _ = try engine.completeWake(token: "t1", caller: started.connection)
        clock.advance(by: engine.policy.idleGrace)
        #expect(engine.fireDueTimers() == [.freeze(key, [script])], "idle: only the process launched")

        engine.launchHandedOver(Self.app(1), from: script, to: app)
        #expect(!engine.launchAwaitsCheckIn(Self.app(1), process: app))
        #expect(engine.isSuspended(key))
        let next = try engine.requestWake(request(1, "t2", budget: .seconds(5)))
        #expect(next.first == .thaw(key, [app]), "\(next)")
        // Its wake runs out: SIGTERM; the launch is handed over again before SIGKILL, which follows it.
        clock.advance(by: .seconds(5))
        let expired = engine.fireDueTimers()
        #expect(expired.contains(.signalProcess(app, .terminate, app: key)), "\(expired)")
        let successor = ProcessRef(pid: 103, serial: 3)
        engine.launchHandedOver(Self.app(1), from: app, to: successor)
        clock.advance(by: engine.policy.killGrace)
        let killed = engine.fireDueTimers()
        #expect(killed.contains(.signalProcess(successor, .kill, app: key)), "\(killed)")
        #expect(!killed.contains(.signalProcess(app, .kill, app: key)), "\(killed)")
    }

    /// An instance the daemon launched, checked in and idle (frozen) was
    /// exempt, as if still being launched: its waiting wake was delivered
    /// at the wake though refresh had gone (found in review). One not yet
    /// checked in is on its way to its events and keeps them.
    @Test mutating func aLaunchedInstanceThatCheckedInIsNoException() throws {
        let key = AppKey.app(Self.app(1))
        let process = ProcessRef(pid: 101, serial: 1)
        _ = try engine.requestWake(request(1, "t1"))
        _ = engine.launchStarted(Self.app(1), process: process)
        #expect(engine.withdrawWaitingWakes(of: Self.app(1), plugins: ["fetch"], reason: "x").isEmpty, "not checked in yet")
        let launched = CallerIdentity(connection: ConnectionID(":1.1"), process: process, appID: Self.app(1), appIDSource: .launched)
        _ = try engine.checkIn(appID: Self.app(1).rawValue, caller: launched)
        _ = try engine.completeWake(token: "t1", caller: launched.connection)
        clock.advance(by: engine.policy.idleGrace)
        #expect(engine.fireDueTimers() == [.freeze(key, [process])])
        _ = engine.setSleeping(true)
        _ = try engine.requestWake(request(1, "t2"))
        let withdrawn = engine.withdrawWaitingWakes(of: Self.app(1), plugins: ["fetch"], reason: "refresh is denied")
        #expect(withdrawn.contains(.wakeFailed(token: "t2", plugin: "fetch", app: Self.app(1), reason: "refresh is denied")), "\(withdrawn)")
        let woken = engine.setSleeping(false)
        #expect(!woken.contains { if case .deliverWake = $0 { true } else { false } }, "\(woken)")
    }

    /// An app known only by its check-in (nothing the daemon could freeze)
    /// in the background still gets no event while the machine sleeps: the
    /// event waits for the wake and goes to it then, without a turn.
    @Test mutating func anEventForAnAppThatCannotBeFrozenWaitsForTheWake() throws {
        let caller = CallerIdentity(connection: ConnectionID(":1.1"), process: ProcessRef(pid: 101, serial: 1))
        _ = try engine.checkIn(appID: Self.app(1).rawValue, caller: caller)
        _ = engine.setState(.background, caller: caller)
        _ = engine.setSleeping(true)
        let asleep = try engine.requestWake(request(1, "t1"))
        #expect(!asleep.contains { if case .deliverWake = $0 { true } else { false } }, "\(asleep)")
        // A second connection checking in meanwhile is not handed it either.
        let second = CallerIdentity(connection: ConnectionID(":1.2"), process: ProcessRef(pid: 102, serial: 2))
        #expect(try engine.checkIn(appID: Self.app(1).rawValue, caller: second).pending == 0)
        let awake = engine.setSleeping(false)
        #expect(awake.contains(.deliverWake(token: "t1", plugin: "fetch", app: Self.app(1), connection: second.connection)), "\(awake)")
        #expect(!engine.isDraining, "it takes no turn: it could not be held back")

        // Brought to the foreground while an event waits for the wake: the event goes to it at once.
        _ = engine.setSleeping(true)
        _ = try engine.requestWake(request(1, "t2"))
        let opened = engine.setState(.active, caller: second)
        #expect(opened.contains(.deliverWake(token: "t2", plugin: "fetch", app: Self.app(1), connection: second.connection)), "\(opened)")
    }

    /// Work that comes during the grace ends it: the app is not frozen under
    /// its new event, and its grace starts again when that is done.
    @Test mutating func workDuringTheGraceKeepsTheAppRunning() throws {
        let key = AppKey.app(Self.app(1))
        _ = try engine.requestWake(request(1, "t1"))
        let process = ProcessRef(pid: 101, serial: 1)
        engine.launchStarted(Self.app(1), process: process)
        let launched = CallerIdentity(connection: ConnectionID(":1.1"), process: process, appID: Self.app(1), appIDSource: .launched)
        _ = try engine.checkIn(appID: Self.app(1).rawValue, caller: launched)
        _ = try engine.completeWake(token: "t1", caller: launched.connection)
        clock.advance(by: .milliseconds(500))
        let next = try engine.requestWake(request(1, "t2"))
        #expect(next == [.deliverWake(token: "t2", plugin: "fetch", app: Self.app(1), connection: launched.connection)])
        clock.advance(by: .milliseconds(600))
        #expect(freezes(engine.fireDueTimers()).isEmpty, "the first grace was cancelled")
        _ = try engine.completeWake(token: "t2", caller: launched.connection)
        clock.advance(by: .milliseconds(999))
        #expect(freezes(engine.fireDueTimers()).isEmpty)
        clock.advance(by: .milliseconds(1))
        #expect(engine.fireDueTimers() == [.freeze(key, [process])])
    }

    /// An app the user opened (here identified by its Flatpak) is left
    /// running in the background with nothing to do: frozen, it could not
    /// hear the user bring it back, and the daemon cannot see that itself.
    @Test mutating func anIdleAppTheUserOpenedIsNotFrozenOutsideSleep() throws {
        let caller = verified(1)
        let key = AppKey.app(Self.app(1))
        _ = try engine.checkIn(appID: Self.app(1).rawValue, caller: caller)
        let begun = try engine.beginTask(named: "upload", caller: caller)
        #expect(freezes(engine.setState(.background, caller: caller)).isEmpty)
        #expect(freezes(try engine.endTask(begun.id, caller: caller.connection)).isEmpty)
        #expect(!engine.isSuspended(key))
        // While the machine sleeps it is frozen like every background app.
        #expect(freezes(engine.setSleeping(true)) == [key])
        #expect(thaws(engine.setSleeping(false)) == [key], "idle: thawed at the wake, not held for the backlog")
        #expect(!engine.isDraining)
    }

    /// A frozen app whose process leaves the bus (it died, or closed its
    /// connection): the connection was the daemon's only tie to the process,
    /// so it is thawed now or never.
    @Test mutating func aFrozenProcessWhoseConnectionIsGoneIsThawed() throws {
        let caller = verified(1)
        let key = AppKey.app(Self.app(1))
        _ = try engine.checkIn(appID: Self.app(1).rawValue, caller: caller)
        _ = engine.setState(.background, caller: caller)
        #expect(freezes(engine.setSleeping(true)) == [key])
        let gone = engine.disconnect(caller.connection)
        #expect(gone.contains(.thaw(key, [caller.process!])), "\(gone)")
        #expect(!engine.isSuspended(key))
        #expect(engine.state(of: key) == nil, "nothing of the app is left")
    }

    @Test mutating func aClaimedIDIsNeverFrozenButItsClockStopsWhileTheMachineSleeps() throws {
        let claimed = CallerIdentity(connection: ConnectionID(":1.9"), process: ProcessRef(pid: 909, serial: 9))
        _ = try engine.checkIn(appID: "org.example.Claimed", caller: claimed)
        _ = try engine.beginTask(named: "t", caller: claimed)
        _ = engine.setState(.background, caller: claimed)
        clock.advance(by: .seconds(100))
        let sleep = engine.setSleeping(true)
        #expect(freezes(sleep).isEmpty, "the daemon cannot tie its process to the app")
        clock.advance(by: .seconds(3600))
        #expect(engine.secondsRemaining(for: claimed) == 500, "asleep, no time passes for it")
        _ = engine.setSleeping(false)
        clock.advance(by: .seconds(10))
        #expect(engine.secondsRemaining(for: claimed) == 490)
    }

    @Test mutating func sleepFreezesEveryBackgroundAppAndNeverAForegroundOne() throws {
        let background = verified(1), foreground = verified(2)
        for caller in [background, foreground] {
            _ = try engine.checkIn(appID: caller.appID!.rawValue, caller: caller)
            _ = try engine.beginTask(named: "t", caller: caller)
        }
        _ = engine.setState(.background, caller: background)
        clock.advance(by: .seconds(50))
        let sleep = engine.setSleeping(true)
        #expect(sleep.first == .sleepingChanged(true))
        #expect(freezes(sleep) == [.app(Self.app(1))])
        clock.advance(by: .seconds(7200))
        let wake = engine.setSleeping(false)
        #expect(thaws(wake) == [.app(Self.app(1))])
        #expect(engine.secondsRemaining(for: background) == 550, "its task kept the budget it had")
    }

    @Test mutating func theBacklogAfterAWakeRunsInTurnsOfAtMostTwoApps() throws {
        let callers = (1...5).map(verified)
        var tasks: [Int: UInt32] = [:]
        for (n, caller) in zip(1..., callers) {
            _ = try engine.checkIn(appID: caller.appID!.rawValue, caller: caller)
            tasks[n] = try engine.beginTask(named: "sync", caller: caller).id
            _ = engine.setState(.background, caller: caller)
        }
        _ = engine.setSleeping(true)
        clock.advance(by: .seconds(3600))

        var running: Set<AppKey> = []
        var most = 0
        // Apps thawed with work left (one that ended its task is idle and uses nothing).
        func apply(_ actions: [CoreAction]) {
            for action in actions {
                if case .thaw(let key, _) = action { running.insert(key) }
                if case .freeze(let key, _) = action { running.remove(key) }
            }
            running = running.filter { key in
                guard case .app(let id) = key, let n = Int(id.rawValue.dropFirst("org.example.App".count)) else { return false }
                return tasks[n] != nil
            }
            most = max(most, running.count)
        }
        let wake = engine.setSleeping(false)
        apply(wake)
        #expect(engine.isDraining)
        #expect(running == [.app(Self.app(1)), .app(Self.app(2))])
        #expect(engine.backlog.waiting == [.app(Self.app(3)), .app(Self.app(4)), .app(Self.app(5))])

        // The first turns end after 10 s: those two wait again, the next two run.
        clock.advance(by: .seconds(10))
        apply(engine.fireDueTimers())
        #expect(running == [.app(Self.app(3)), .app(Self.app(4))])
        #expect(engine.backlog.waiting == [.app(Self.app(5)), .app(Self.app(1)), .app(Self.app(2))])

        // An app that ends its work leaves at once, and the next starts without waiting for the turn to end.
        clock.advance(by: .seconds(3))
        apply(try engine.endTask(tasks.removeValue(forKey: 3)!, caller: callers[2].connection))
        #expect(running == [.app(Self.app(4)), .app(Self.app(5))])

        // Everyone finishes in turn; then the backlog is done.
        var rounds = 0
        while engine.isDraining, rounds < 20 {
            for key in running {
                guard case .app(let id) = key, let n = Int(id.rawValue.dropFirst("org.example.App".count)),
                      let task = tasks.removeValue(forKey: n) else { continue }
                apply(try engine.endTask(task, caller: callers[n - 1].connection))
                break
            }
            clock.advance(by: .seconds(10))
            apply(engine.fireDueTimers())
            rounds += 1
        }
        #expect(!engine.isDraining)
        #expect(tasks.isEmpty)
        #expect(most == 2, "never more than Scheduler.MaxConcurrentWakes at once")
        #expect(running.isEmpty)
    }

    /// Each backlog was built in app-id order: with wakes too short for a
    /// whole round, the first apps had every turn and the last none (an
    /// outside test: 40 short wakes gave App A 2.6 s, B 0.2 s, C nothing).
    /// Those served longest ago, or never, go first now.
    @Test mutating func aBacklogCutShortBySleepServesTheOthersFirstAtTheNextWake() throws {
        let callers = (1...3).map(verified)
        for caller in callers {
            _ = try engine.checkIn(appID: caller.appID!.rawValue, caller: caller)
            _ = try engine.beginTask(named: "sync", caller: caller)
            _ = engine.setState(.background, caller: caller)
        }
        _ = engine.setSleeping(true)
        _ = engine.setSleeping(false)
        #expect(engine.backlog.running == [.app(Self.app(1)), .app(Self.app(2))])
        clock.advance(by: .seconds(2))
        _ = engine.setSleeping(true)
        clock.advance(by: .seconds(60))
        _ = engine.setSleeping(false)
        #expect(engine.backlog.running == [.app(Self.app(3)), .app(Self.app(1))], "\(engine.backlog)")
        #expect(engine.backlog.waiting == [.app(Self.app(2))], "\(engine.backlog)")

    }

    /// The order of turns was kept in the app's record, which goes whenever
    /// nothing of the app runs: an app served last came back as never
    /// served, first in line (found in review).
    @Test mutating func anAppWhoseRecordWentKeepsItsPlaceInTheTurns() throws {
        engine = BackgroundEngine(
            policy: TaskPolicy(budget: .seconds(600), warning: .seconds(5), killGrace: .seconds(2), maxConcurrentWakes: 1),
            clock: clock)
        let (first, second) = (verified(1), verified(2))
        var tasks: [UInt32] = []
        for caller in [first, second] {
            _ = try engine.checkIn(appID: caller.appID!.rawValue, caller: caller)
            tasks.append(try engine.beginTask(named: "sync", caller: caller).id)
            _ = engine.setState(.background, caller: caller)
        }
        _ = engine.setSleeping(true)
        _ = engine.setSleeping(false)
        #expect(engine.backlog.running == [.app(Self.app(1))])
        clock.advance(by: .seconds(10))
        _ = engine.fireDueTimers()
        clock.advance(by: .seconds(10))
        _ = engine.fireDueTimers()
        #expect(engine.backlog.running == [.app(Self.app(1))], "App1 had the latest turn: \(engine.backlog)")
        // App2 is done; App1 goes away altogether (its record with it), and both come back with work.
        _ = try engine.endTask(tasks[1], caller: second.connection)
        _ = engine.disconnect(first.connection)
        #expect(!engine.isDraining)
        _ = try engine.checkIn(appID: first.appID!.rawValue, caller: first)
        _ = try engine.beginTask(named: "sync", caller: first)
        _ = engine.setState(.background, caller: first)
        _ = try engine.beginTask(named: "sync", caller: second)
        _ = engine.setSleeping(true)
        _ = engine.setSleeping(false)
        #expect(engine.backlog.running == [.app(Self.app(2))], "served longest ago: \(engine.backlog)")
    }

    /// While the machine sleeps nothing is delivered to a held app and
    /// nothing is launched: the events wait and the backlog takes them at the wake.
    @Test mutating func eventsWaitWhileTheMachineSleepsAndRunInTheBacklog() throws {
        let caller = verified(1)
        let key = AppKey.app(Self.app(1))
        _ = try engine.checkIn(appID: Self.app(1).rawValue, caller: caller)
        _ = engine.setState(.background, caller: caller)
        _ = engine.setSleeping(true)
        let held = try engine.requestWake(request(1, "t1"))
        #expect(!held.contains { if case .deliverWake = $0 { true } else { false } }, "\(held)")
        #expect(thaws(held).isEmpty)
        let notLaunched = try engine.requestWake(request(3, "t3"))
        #expect(!notLaunched.contains(.launch(Self.app(3), reason: "fetch")), "\(notLaunched)")
        // A check-in while asleep gets nothing either.
        #expect(try engine.checkIn(appID: Self.app(1).rawValue, caller: caller).pending == 0)

        let wake = engine.setSleeping(false)
        #expect(wake.contains(.thaw(key, [caller.process!])))
        #expect(wake.contains(.deliverWake(token: "t1", plugin: "fetch", app: Self.app(1), connection: caller.connection)))
        #expect(wake.contains(.launch(Self.app(3), reason: "fetch")), "\(wake)")
    }

    /// A launch whose process starts after the app's turn ended: the new
    /// process is frozen too, so no more than maxConcurrentWakes apps run.
    @Test mutating func aProcessThatStartsWhileItsAppIsHeldBackIsFrozen() throws {
        try backgroundWithATask([verified(1), verified(2), verified(4)])
        _ = engine.setSleeping(true)
        _ = try engine.requestWake(request(3, "t3", budget: .seconds(60)))
        _ = engine.setSleeping(false)  // App1 and App2 take the two turns; App3 and App4 wait
        clock.advance(by: .seconds(10))
        #expect(engine.fireDueTimers().contains(.launch(Self.app(3), reason: "fetch")), "App3's turn")
        clock.advance(by: .seconds(10))
        _ = engine.fireDueTimers()  // its turn ends before its process started
        #expect(engine.backlog.waiting.contains(.app(Self.app(3))))
        let process = ProcessRef(pid: 303, serial: 303)
        #expect(engine.launchStarted(Self.app(3), process: process) == [.freeze(.app(Self.app(3)), [process])])
    }

    @Test mutating func aWakeForAnAppNotRunningWaitsForItsTurnToLaunch() throws {
        let busy = [verified(1), verified(2)]
        try backgroundWithATask(busy)
        _ = engine.setSleeping(true)
        _ = engine.setSleeping(false)
        // Two turns are taken: App3 is not launched yet, and its budget does not run.
        #expect(try engine.requestWake(request(3, "t3", budget: .seconds(30))).contains(.launch(Self.app(3), reason: "fetch")) == false)
        #expect(engine.backlog.waiting == [.app(Self.app(3))])
        clock.advance(by: .seconds(10))
        let next = engine.fireDueTimers()
        #expect(next.contains(.launch(Self.app(3), reason: "fetch")), "its turn: launched now")
        #expect(!next.contains(.wakeExpired(token: "t3", plugin: "fetch", app: Self.app(3))))
        // Launched and checked in, it starts in the background with the whole budget: nothing drained while it waited.
        _ = engine.launchStarted(Self.app(3), process: ProcessRef(pid: 303, serial: 303))
        let launched = CallerIdentity(connection: ConnectionID(":1.33"), process: ProcessRef(pid: 303, serial: 303),
                                      appID: Self.app(3), appIDSource: .launched)
        let checkIn = try engine.checkIn(appID: Self.app(3).rawValue, caller: launched)
        #expect(checkIn.pending == 1)
        #expect(engine.secondsRemaining(for: launched) == 30)
    }

    @Test mutating func aWakeBudgetPausesWhileTheAppWaitsForItsNextTurn() throws {
        let callers = (1...4).map(verified)
        try backgroundWithATask(callers)
        _ = engine.setSleeping(true)
        _ = engine.setSleeping(false)
        // App1 has its turn; a 15 s wake would outlast the 10 s turn.
        _ = try engine.requestWake(request(1, "w1", budget: .seconds(15)))
        clock.advance(by: .seconds(10))
        let turnOver = engine.fireDueTimers()
        #expect(freezes(turnOver).contains(.app(Self.app(1))))
        #expect(engine.backlog.waiting.contains(.app(Self.app(1))))
        // A whole turn of waiting later it has not expired: its 5 s left waited with it.
        clock.advance(by: .seconds(10))
        let again = engine.fireDueTimers()
        #expect(thaws(again).contains(.app(Self.app(1))))
        #expect(!again.contains(.wakeExpired(token: "w1", plugin: "fetch", app: Self.app(1))))
        clock.advance(by: .seconds(4))
        #expect(!engine.fireDueTimers().contains(.wakeExpired(token: "w1", plugin: "fetch", app: Self.app(1))))
        clock.advance(by: .seconds(1))
        #expect(engine.fireDueTimers().contains(.wakeExpired(token: "w1", plugin: "fetch", app: Self.app(1))))
    }

    @Test mutating func aFrozenAppIsThawedForSIGTERMAndNotFrozenAgainBeforeSIGKILL() throws {
        let caller = verified(1)
        let key = AppKey.app(Self.app(1))
        _ = try engine.checkIn(appID: Self.app(1).rawValue, caller: caller)
        _ = engine.setState(.background, caller: caller)
        _ = try engine.requestWake(request(1, "t1", budget: .seconds(5)))
        clock.advance(by: .seconds(5))
        let expired = engine.fireDueTimers()
        // The wake ran out: SIGTERM, and the app (now without work) is not frozen meanwhile.
        #expect(expired.contains(.signalProcess(caller.process!, .terminate, app: key)))
        #expect(freezes(expired).isEmpty)
        #expect(!engine.isSuspended(key))
    }
}
