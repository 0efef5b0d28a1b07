import BgTaskCore
import BgTaskTestKit
import Testing

/// Wakes and launches in the engine, with a manual clock.
@Suite struct WakeTests {
    let clock = ManualClock()
    var engine: BackgroundEngine<ManualClock>
    let weather = try! AppID(validating: "org.example.Weather")
    let launched = ProcessRef(pid: 500, serial: 9)

    init() {
        engine = BackgroundEngine(
            policy: TaskPolicy(budget: .seconds(600), warning: .seconds(5), killGrace: .seconds(2)), clock: clock)
    }

    func request(_ token: String, budget: Duration = .seconds(30), reason: String = "fetch") -> WakeRequest {
        WakeRequest(app: weather, reason: reason, plugin: reason, budget: budget, token: token)
    }

    func caller(_ name: String, pid: Int32, appID: AppID? = nil) -> CallerIdentity {
        CallerIdentity(connection: ConnectionID(name), process: ProcessRef(pid: pid, serial: UInt64(pid)),
                       appID: appID, appIDSource: appID == nil ? nil : .launched)
    }

    @Test mutating func appThatIsNotRunningIsLaunchedOnceAndGetsItsEventsAfterCheckIn() throws {
        #expect(try engine.requestWake(request("t1")) == [.launch(weather, reason: "fetch")])
        // A second event while the launch is under way does not launch again.
        #expect(try engine.requestWake(request("t2", reason: "remote-notification")) == [])
        #expect(engine.isLaunching(weather))
        engine.launchStarted(weather, process: launched)

        let app = caller(":1.40", pid: 500)
        let result = try engine.checkIn(appID: weather.rawValue, caller: app)
        #expect(result.reason == "fetch")
        #expect(result.pending == 2)
        #expect(result.actions == [
            .appCheckedIn(weather, app.connection, reason: "fetch"),
            .deliverWake(token: "t1", plugin: "fetch", app: weather, connection: app.connection),
            .deliverWake(token: "t2", plugin: "remote-notification", app: weather, connection: app.connection),
        ])
        #expect(engine.isRunning(weather))
        // Checked in, it runs: no longer launching (GetApplications said so for its whole life).
        #expect(!engine.isLaunching(weather))
    }

    /// A launch into a cgroup of its own: a copy the user started, checking
    /// in before the launched instance did, was taken for it (the first
    /// check-in counts where nothing else ties a process to the launch), put
    /// in the background, handed the event and terminated when it did not
    /// complete it (found by an outside test). It is the user's now; the
    /// event waits for the launched instance, which the cgroup names.
    @Test mutating func aCopyOutsideTheLaunchsCgroupIsTheUsersEvenBeforeTheLaunchedOneChecksIn() throws {
        _ = try engine.requestWake(request("t1"))
        engine.launchStarted(weather, process: launched, inOwnGroup: true)
        let users = caller(":1.41", pid: 900)
        let copy = try engine.checkIn(appID: weather.rawValue, caller: users)
        #expect(copy.reason == "user" && copy.pending == 1, "the user's copy gets what waits, as an app the user opened")
        #expect(copy.actions.contains(.appStateChanged(weather, .active)) && engine.state(of: .app(weather)) == .active,
                "in the foreground, where nothing is terminated for a missed wake: \(copy.actions)")

        // A copy whose app id its sandbox names (registered under the app from
        // its first call) was left in the background (found in review).
        engine = BackgroundEngine(policy: TaskPolicy(budget: .seconds(600), warning: .seconds(5), killGrace: .seconds(2)), clock: clock)
        _ = try engine.requestWake(request("t3"))
        engine.launchStarted(weather, process: launched, inOwnGroup: true)
        let flatpak = CallerIdentity(connection: ConnectionID(":1.43"), process: ProcessRef(pid: 902, serial: 902),
                                     appID: weather, appIDSource: .flatpak)
        #expect(try engine.checkIn(appID: weather.rawValue, caller: flatpak).reason == "user")
        #expect(engine.state(of: .app(weather)) == .active)

        // Without a cgroup, the first to check in is still the launch's (a wrapper's
        // app), and the one after it, perhaps the launched app itself, does not
        // bring the app forward (found in review).
        engine = BackgroundEngine(policy: TaskPolicy(budget: .seconds(600), warning: .seconds(5), killGrace: .seconds(2)), clock: clock)
        _ = try engine.requestWake(request("t2"))
        engine.launchStarted(weather, process: launched)
        #expect(try engine.checkIn(appID: weather.rawValue, caller: caller(":1.42", pid: 901)).reason == "fetch")
        #expect(try engine.checkIn(appID: weather.rawValue, caller: caller(":1.44", pid: 903)).reason == "user")
        #expect(engine.state(of: .app(weather)) == .background)
    }

    /// An app left in the background past its budget is refused a task; a
    /// wake handed to it gives it the event's budget as background time, so
    /// a task begun for the event's work is granted and expires with the
    /// event, not at once. An app with more time left keeps it.
    @Test mutating func aWokenAppInTheBackgroundHasAtLeastTheEventsBudgetForItsTasks() throws {
        engine = BackgroundEngine(
            policy: TaskPolicy(budget: .seconds(60), warning: .seconds(5), killGrace: .seconds(2)), clock: clock)
        let app = caller(":1.40", pid: 700)
        _ = try engine.checkIn(appID: weather.rawValue, caller: app)
        _ = engine.setState(.background, caller: app)
        clock.advance(by: .seconds(61))
        #expect(throws: CoreError.self, "no time left") { try engine.beginTask(named: "late", caller: app) }

        #expect(try engine.requestWake(request("t1", budget: .seconds(30))).contains(
            .deliverWake(token: "t1", plugin: "fetch", app: weather, connection: app.connection)))
        let begun = try engine.beginTask(named: "fetch work", caller: app)
        #expect(begun.secondsRemaining == 30)
        clock.advance(by: .seconds(25))
        #expect(engine.fireDueTimers().contains(.sendTaskExpiring(app.connection, task: begun.id, secondsLeft: 5)))
        _ = try engine.endTask(begun.id, caller: app.connection)
        _ = try engine.completeWake(token: "t1", caller: app.connection)

        // 5 s left of the app's own time, more than a 2 s event's: kept.
        _ = try engine.requestWake(request("t2", budget: .seconds(2)))
        #expect(engine.secondsRemaining(for: app) == 5)
        _ = try engine.completeWake(token: "t2", caller: app.connection)

        // Back from the foreground it has its whole budget again, not the event's.
        _ = engine.setState(.active, caller: app)
        _ = engine.setState(.background, caller: app)
        #expect(engine.secondsRemaining(for: app) == 60)
    }

    /// The launched app's first call asks for its background time: it is the
    /// event's budget it will start with, not a foreground app's unlimited
    /// time, and the same once it has joined.
    @Test mutating func aLaunchedAppAskingItsTimeFirstIsToldTheEventsBudget() throws {
        _ = try engine.requestWake(request("t1", budget: .seconds(30)))
        engine.launchStarted(weather, process: launched)
        let app = caller(":1.40", pid: 500, appID: weather)
        #expect(engine.secondsRemaining(for: app) == 30)
        _ = try engine.beginTask(named: "work", caller: app)
        #expect(engine.secondsRemaining(for: app) == 30)
        #expect(engine.secondsRemaining(for: caller(":1.41", pid: 900)) == .greatestFiniteMagnitude, "a stranger is in the foreground")
    }

    /// A launch that failed because the daemon ran short (file descriptors,
    /// memory) drops the wakes it was for but does not hold the app's next
    /// launch back: the app did nothing wrong.
    @Test mutating func aLaunchTheDaemonCouldNotAffordIsNotHeldAgainstTheApp() throws {
        #expect(try engine.requestWake(request("t1")) == [.launch(weather, reason: "fetch")])
        let failed = engine.launchFailed(weather, error: "Too many open files (EMFILE)", holdBack: false)
        #expect(failed.contains { if case .wakeFailed(token: "t1", _, _, _) = $0 { true } else { false } }, "\(failed)")
        #expect(try engine.requestWake(request("t2")) == [.launch(weather, reason: "fetch")], "launched again at once")
        // Nor an exit without a check-in while callers were refused for want of descriptors.
        engine.launchStarted(weather, process: launched)
        _ = engine.launchedProcessExited(weather, process: launched, status: "exited with code 1", holdBack: false)
        #expect(try engine.requestWake(request("t3")) == [.launch(weather, reason: "fetch")], "launched again at once")
        // The app's own failure holds it back.
        _ = engine.launchFailed(weather, error: "No such file or directory (ENOENT)")
        #expect(throws: CoreError.self) { try engine.requestWake(request("t4")) }
    }

    /// The app completed in time, but the completion could not be stored
    /// and was undone: when the budget runs out the wake fails (its event
    /// waits for the next wake) without an offence or a SIGTERM.
    @Test mutating func aCompletionThatCouldNotBeStoredIsNoOffenceWhenTheBudgetRunsOut() throws {
        let app = caller(":1.40", pid: 700)
        _ = try engine.checkIn(appID: weather.rawValue, caller: app)
        _ = engine.setState(.background, caller: app)
        _ = try engine.requestWake(request("t1", budget: .seconds(30)))
        let point = try #require(engine.undoPoint(token: "t1"))
        _ = try engine.completeWake(token: "t1", caller: app.connection)
        _ = engine.undo(point)  // the batch's commit failed
        clock.advance(by: .seconds(30))
        let expired = engine.fireDueTimers()
        #expect(expired.contains { if case .wakeFailed(token: "t1", _, _, _) = $0 { true } else { false } }, "\(expired)")
        #expect(!expired.contains { if case .wakeExpired = $0 { true } else { false } }, "\(expired)")
        #expect(!expired.contains { if case .signalProcess = $0 { true } else { false } }, "\(expired)")
        // A wake that was never answered is still an offence.
        _ = try engine.requestWake(request("t2", budget: .seconds(30)))
        clock.advance(by: .seconds(30))
        #expect(engine.fireDueTimers().contains(.wakeExpired(token: "t2", plugin: "fetch", app: weather)))
    }

    /// A copy of the app started by hand while the launched one still ran
    /// was told, at its check-in, that it had been launched for the event.
    @Test mutating func aCopyStartedByHandWhileTheLaunchedOneRunsIsTheUsers() throws {
        _ = try engine.requestWake(request("t1"))
        engine.launchStarted(weather, process: launched)
        #expect(try engine.checkIn(appID: weather.rawValue, caller: caller(":1.40", pid: 500)).reason == "fetch")
        let byHand = caller(":1.41", pid: 900)
        let result = try engine.checkIn(appID: weather.rawValue, caller: byHand)
        #expect(result.reason == "user")
        #expect(result.actions.contains(.appCheckedIn(weather, byHand.connection, reason: "user")), "\(result.actions)")
        // The launched process on a connection of its own is still the launched instance.
        #expect(try engine.checkIn(appID: weather.rawValue, caller: caller(":1.42", pid: 500)).reason == "fetch")
    }

    /// The user opens the app while the launched instance runs, then quits:
    /// the launched instance is left, in the background, and so is the app.
    @Test mutating func theAppIsBackInTheBackgroundWhenTheUsersInstanceLeavesTheLaunchedOne() throws {
        _ = try engine.requestWake(request("t1"))
        engine.launchStarted(weather, process: launched)
        _ = try engine.checkIn(appID: weather.rawValue, caller: caller(":1.40", pid: 500))
        #expect(engine.state(of: .app(weather)) == .background)
        let byHand = caller(":1.41", pid: 900)
        _ = try engine.checkIn(appID: weather.rawValue, caller: byHand)
        _ = engine.setState(.active, caller: byHand)
        #expect(engine.state(of: .app(weather)) == .active)
        let actions = engine.disconnect(byHand.connection)
        #expect(actions.contains(.appStateChanged(weather, .background)), "\(actions)")
        #expect(engine.state(of: .app(weather)) == .background)
        #expect(engine.secondsRemaining(for: caller(":1.40", pid: 500)) < .greatestFiniteMagnitude)
    }

    /// The launched instance itself asked for the foreground (the user
    /// brought it up): a second process that checks in and leaves (a
    /// single-instance app handing over its activation) leaves it there.
    @Test mutating func theLaunchedInstanceInTheForegroundStaysThereWhenAnotherProcessLeaves() throws {
        _ = try engine.requestWake(request("t1"))
        engine.launchStarted(weather, process: launched)
        let instance = caller(":1.40", pid: 500)
        _ = try engine.checkIn(appID: weather.rawValue, caller: instance)
        _ = engine.setState(.active, caller: instance)
        let handover = caller(":1.41", pid: 900)
        _ = try engine.checkIn(appID: weather.rawValue, caller: handover)
        let actions = engine.disconnect(handover.connection)
        #expect(!actions.contains(.appStateChanged(weather, .background)), "\(actions)")
        #expect(engine.state(of: .app(weather)) == .active)
    }

    /// A launched wrapper whose child checks in: the child is the launched
    /// instance, a later copy started by hand is not.
    @Test mutating func theFirstProcessToCheckInForAWrapperIsTheLaunchedOne() throws {
        _ = try engine.requestWake(request("t1"))
        engine.launchStarted(weather, process: launched)
        #expect(try engine.checkIn(appID: weather.rawValue, caller: caller(":1.40", pid: 501)).reason == "fetch")
        #expect(try engine.checkIn(appID: weather.rawValue, caller: caller(":1.41", pid: 900)).reason == "user")
        // One the daemon knows it launched (its pid is a launched process's) always is.
        #expect(try engine.checkIn(appID: weather.rawValue, caller: caller(":1.43", pid: 902, appID: weather)).reason == "fetch")
    }

    /// A wake handed to an instance that then crashed waited out its budget
    /// and counted an offence, while a new instance got nothing.
    @Test mutating func aWakeWhoseConnectionClosesFailsAndNoneExpiresLater() throws {
        let first = caller(":1.50", pid: 700)
        let other = caller(":1.51", pid: 701)
        _ = try engine.checkIn(appID: weather.rawValue, caller: first)
        _ = try engine.checkIn(appID: weather.rawValue, caller: other)
        let actions = try engine.requestWake(request("t1"))
        #expect(actions.contains(.deliverWake(token: "t1", plugin: "fetch", app: weather, connection: other.connection)), "\(actions)")
        let gone = engine.disconnect(other.connection)
        #expect(gone.contains(.wakeFailed(token: "t1", plugin: "fetch", app: weather,
                                          reason: "the connection it was handed to closed before completing it")), "\(gone)")
        clock.advance(by: .seconds(60))
        #expect(!engine.fireDueTimers().contains { if case .wakeExpired = $0 { true } else { false } })
        // The instance still there is untouched; a wake not handed to the closed connection stays.
        let again = try engine.requestWake(request("t2"))
        #expect(again.contains(.deliverWake(token: "t2", plugin: "fetch", app: weather, connection: first.connection)), "\(again)")
    }

    @Test mutating func launchedAppStartsInTheBackgroundWithTheEventsBudget() throws {
        _ = try engine.requestWake(request("t1", budget: .seconds(30)))
        engine.launchStarted(weather, process: launched)
        clock.advance(by: .seconds(4))
        let app = caller(":1.40", pid: 500, appID: weather)
        let begun = try engine.beginTask(named: "download", caller: app)
        // Background, and what is left of the 30 s budget, not Tasks.BudgetSec.
        #expect(begun.secondsRemaining == 26)
        #expect(engine.state(of: .app(weather)) == .background)
    }

    /// A fetch's token completed through another mode's interface left the
    /// fetch plugin waiting for ever; now it is refused, and still good where it belongs.
    @Test mutating func aTokenCompletesOnlyThroughThePluginThatAskedForTheWake() throws {
        let app = caller(":1.42", pid: 601)
        _ = try engine.checkIn(appID: weather.rawValue, caller: app)
        _ = try engine.requestWake(request("t1"))
        let elsewhere = #expect(throws: CoreError.self) { try engine.completeWake(token: "t1", caller: app.connection, plugin: "location") }
        #expect(elsewhere?.code == .noSuchToken)
        #expect(try engine.completeWake(token: "t1", caller: app.connection, plugin: "fetch") == [
            .wakeCompleted(token: "t1", plugin: "fetch", app: weather),
        ])
    }

    @Test mutating func runningAppGetsTheEventAtOnce() throws {
        let app = caller(":1.41", pid: 600)
        _ = try engine.checkIn(appID: weather.rawValue, caller: app)
        #expect(try engine.requestWake(request("t1")) == [
            .deliverWake(token: "t1", plugin: "fetch", app: weather, connection: app.connection),
        ])
        #expect(try engine.completeWake(token: "t1", caller: app.connection) == [
            .wakeCompleted(token: "t1", plugin: "fetch", app: weather),
        ])
        // Spent.
        let again = #expect(throws: CoreError.self) { try engine.completeWake(token: "t1", caller: app.connection) }
        #expect(again?.code == .noSuchToken)
        #expect(engine.nextDeadline() == nil)
    }

    @Test mutating func eventsGoToTheLatestCheckedInConnection() throws {
        let first = caller(":1.41", pid: 600)
        let second = caller(":1.42", pid: 600)
        _ = try engine.checkIn(appID: weather.rawValue, caller: first)
        _ = try engine.checkIn(appID: weather.rawValue, caller: second)
        #expect(try engine.requestWake(request("t1")) == [
            .deliverWake(token: "t1", plugin: "fetch", app: weather, connection: second.connection),
        ])
        // Any connection of the app may complete it.
        _ = try engine.completeWake(token: "t1", caller: first.connection)
    }

    @Test mutating func foreignUnknownAndUndeliveredTokensAreNoSuchToken() throws {
        let app = caller(":1.41", pid: 600)
        let stranger = caller(":1.50", pid: 700)
        _ = try engine.checkIn(appID: weather.rawValue, caller: app)
        _ = try engine.checkIn(appID: "org.example.Other", caller: stranger)
        _ = try engine.requestWake(request("t1"))
        for (token, who) in [("t1", stranger.connection), ("nope", app.connection)] {
            let error = #expect(throws: CoreError.self) { try engine.completeWake(token: token, caller: who) }
            #expect(error?.code == .noSuchToken)
        }
        // Not yet delivered (the app is launching): nobody can complete it yet.
        var fresh = BackgroundEngine(policy: TaskPolicy(), clock: clock)
        _ = try fresh.requestWake(request("t9"))
        let early = #expect(throws: CoreError.self) { try fresh.completeWake(token: "t9", caller: app.connection) }
        #expect(early?.code == .noSuchToken)
    }

    @Test mutating func missedBudgetTerminatesTheAppAndReportsTheOffence() throws {
        _ = try engine.requestWake(request("t1", budget: .seconds(30)))
        engine.launchStarted(weather, process: launched)
        let app = caller(":1.40", pid: 501)
        _ = try engine.checkIn(appID: weather.rawValue, caller: app)
        #expect(engine.nextDeadline() == clock.now + .seconds(30))
        clock.advance(by: .seconds(30))
        #expect(engine.fireDueTimers() == [
            .wakeExpired(token: "t1", plugin: "fetch", app: weather),
            .signalProcess(app.process!, .terminate, app: .app(weather)),
            .signalProcess(launched, .terminate, app: .app(weather)),
        ])
        clock.advance(by: .seconds(2))
        #expect(engine.fireDueTimers() == [
            .signalProcess(app.process!, .kill, app: .app(weather)),
            .signalProcess(launched, .kill, app: .app(weather)),
        ])
    }

    /// Several wakes missed one after another (one per push handed over):
    /// each sent the process a SIGTERM of its own, and the log a line, while
    /// its SIGKILL was already pending (found by an outside test). One
    /// SIGTERM, one SIGKILL at the first one's time.
    @Test mutating func wakesMissedOneAfterAnotherTerminateTheProcessOnce() throws {
        _ = try engine.requestWake(request("t1", budget: .seconds(30)))
        _ = try engine.requestWake(request("t2", budget: .seconds(31)))
        engine.launchStarted(weather, process: launched)
        let app = CallerIdentity(connection: ConnectionID(":1.40"), process: launched, appID: weather, appIDSource: .launched)
        _ = try engine.checkIn(appID: weather.rawValue, caller: app)
        clock.advance(by: .seconds(30))
        #expect(engine.fireDueTimers() == [
            .wakeExpired(token: "t1", plugin: "fetch", app: weather),
            .signalProcess(launched, .terminate, app: .app(weather)),
        ])
        clock.advance(by: .seconds(1))
        #expect(engine.fireDueTimers() == [.wakeExpired(token: "t2", plugin: "fetch", app: weather)])
        clock.advance(by: .seconds(1))
        #expect(engine.fireDueTimers() == [.signalProcess(launched, .kill, app: .app(weather))])
    }

    @Test mutating func failedLaunchDropsTheWakesAndHoldsRetriesBack() throws {
        _ = try engine.requestWake(request("t1"))
        #expect(engine.launchFailed(weather, error: "no such file") == [
            .wakeFailed(token: "t1", plugin: "fetch", app: weather, reason: "no such file"),
        ])
        #expect(engine.nextDeadline() == nil)
        let held = #expect(throws: CoreError.self) { try engine.requestWake(request("t2")) }
        #expect(held?.message.contains("no such file") == true)
        #expect(engine.launchBackoff(for: weather)?.failures == 1)

        // After the first wait (60 s) it may try again; a second failure waits twice as long.
        clock.advance(by: .seconds(60))
        #expect(try engine.requestWake(request("t3")) == [.launch(weather, reason: "fetch")])
        _ = engine.launchFailed(weather, error: "no such file")
        #expect(engine.launchBackoff(for: weather)?.retryAt == clock.now + .seconds(120))

        // A changed desktop entry lifts the hold.
        engine.clearLaunchBackoff(weather)
        #expect(try engine.requestWake(request("t4")) == [.launch(weather, reason: "fetch")])
    }

    @Test mutating func processThatDiesBeforeCheckingInCountsAsFailedLaunch() throws {
        _ = try engine.requestWake(request("t1"))
        engine.launchStarted(weather, process: launched)
        #expect(engine.launchedProcessExited(weather, process: launched, status: "exited with status 1") == [
            // Failed, not expired: it did not overstay a budget (no offence), it went at once.
            .wakeFailed(token: "t1", plugin: "fetch", app: weather, reason: "it exited with status 1 without checking in"), .appGone(weather),
        ])
        #expect(engine.launchBackoff(for: weather)?.lastError == "it exited with status 1 without checking in")
        #expect(!engine.isLaunching(weather))
    }

    @Test mutating func checkingInClearsTheBackoff() throws {
        _ = try engine.requestWake(request("t1"))
        _ = engine.launchFailed(weather, error: "boom")
        clock.advance(by: .seconds(61))
        _ = try engine.requestWake(request("t2"))
        engine.launchStarted(weather, process: launched)
        _ = try engine.checkIn(appID: weather.rawValue, caller: caller(":1.40", pid: 500))
        #expect(engine.launchBackoff(for: weather) == nil)
    }

    @Test mutating func lastConnectionGoneIsAppGone() throws {
        let app = caller(":1.41", pid: 600)
        _ = try engine.checkIn(appID: weather.rawValue, caller: app)
        #expect(engine.setState(.background, caller: app) == [.appStateChanged(weather, .background)])
        #expect(engine.disconnect(app.connection) == [.appGone(weather)])
        #expect(!engine.isRunning(weather))
    }

    @Test mutating func wakeTokensAreOneShotPerRequest() throws {
        _ = try engine.requestWake(request("t1"))
        let reused = #expect(throws: CoreError.self) { try engine.requestWake(request("t1")) }
        #expect(reused?.code == .invalidArgs)
    }

    /// A plugin batch whose commit fails undoes the wakes and completions it asked for.
    @Test mutating func aWakeAndACompletionCanBeUndone() throws {
        let app = caller(":1.41", pid: 600)
        _ = try engine.checkIn(appID: weather.rawValue, caller: app)
        // A wake asked for, then undone: as if never asked for.
        let beforeWake = try #require(engine.undoPoint(token: "t1", app: weather))
        _ = try engine.requestWake(request("t1"))
        #expect(engine.nextDeadline() != nil)
        engine.undo(beforeWake)
        #expect(engine.nextDeadline() == nil)
        #expect(engine.pendingWakes(of: weather).isEmpty)
        #expect(throws: CoreError.self) { try engine.completeWake(token: "t1", caller: app.connection) }
        // A completion undone: the wake is pending again, with its deadline.
        _ = try engine.requestWake(request("t2", budget: .seconds(30)))
        let beforeCompletion = try #require(engine.undoPoint(token: "t2"))
        _ = try engine.completeWake(token: "t2", caller: app.connection)
        engine.undo(beforeCompletion)
        #expect(engine.pendingWakes(of: weather) == ["t2"])
        #expect(engine.nextDeadline() == clock.now + .seconds(30))
        #expect(try engine.completeWake(token: "t2", caller: app.connection) == [
            .wakeCompleted(token: "t2", plugin: "fetch", app: weather),
        ])
        // A wake for an app that was not running: undone, nothing is launched and no record remains.
        let stranger = try AppID(validating: "org.example.Stranger")
        let beforeLaunch = try #require(engine.undoPoint(token: "t3", app: stranger))
        #expect(try engine.requestWake(WakeRequest(app: stranger, reason: "fetch", plugin: "fetch", budget: .seconds(30), token: "t3"))
                == [.launch(stranger, reason: "fetch")])
        engine.undo(beforeLaunch)
        #expect(!engine.isLaunching(stranger))
        #expect(engine.nextDeadline() == nil)
    }
}

/// Regressions found by driving the daemon for real.
@Suite struct WakeRegressionTests {
    let clock = ManualClock()
    var engine = BackgroundEngine(policy: TaskPolicy(), clock: ManualClock())
    let weather = try! AppID(validating: "org.example.Weather")
    let launched = ProcessRef(pid: 500, serial: 9)

    init() {
        engine = BackgroundEngine(policy: TaskPolicy(), clock: clock)
    }

    /// Weather is launched for a fetch, checks in, completes it and closes
    /// its connection; its process still runs.
    mutating func launchCompleteAndLeave() throws {
        _ = try engine.requestWake(WakeRequest(app: weather, reason: "fetch", plugin: "fetch", budget: .seconds(30), token: "t1"))
        engine.launchStarted(weather, process: launched)
        let app = CallerIdentity(connection: ConnectionID(":1.40"), process: launched, appID: weather, appIDSource: .launched)
        _ = try engine.checkIn(appID: weather.rawValue, caller: app)
        _ = try engine.completeWake(token: "t1", caller: app.connection)
        _ = engine.disconnect(app.connection)
    }

    /// A launched app that checked in, completed and left: its connection's
    /// disconnect often arrives before its process's exit. That is a good
    /// launch, not a failed one (it used to hold the next launch back).
    @Test mutating func appThatCheckedInAndLeftBeforeExitingIsNotAFailedLaunch() throws {
        try launchCompleteAndLeave()
        #expect(engine.launchedProcessExited(weather, process: launched, status: "exited with code 0") == [.appGone(weather)])
        #expect(engine.launchBackoff(for: weather) == nil)
        #expect(try engine.requestWake(WakeRequest(app: weather, reason: "fetch", plugin: "fetch", budget: .seconds(30), token: "t2"))
                == [.launch(weather, reason: "fetch")])
    }

    /// A launched app that checked in and left its connection, whose process
    /// then ran on: a wake for it waits for a CheckIn. When the process exits,
    /// nobody would take that wake (it waited until its budget ran out, a
    /// SimulateFetch for as long): the app is launched again for it.
    @Test mutating func anAppThatExitsWithAWakeItNeverGotIsLaunchedAgain() throws {
        try launchCompleteAndLeave()
        let waiting = try engine.requestWake(WakeRequest(app: weather, reason: "push", plugin: "push", budget: .seconds(30), token: "t2"))
        #expect(!waiting.contains(.launch(weather, reason: "push")), "its process still runs: it may check in again")
        let exited = engine.launchedProcessExited(weather, process: launched, status: "exited with code 0")
        #expect(exited.contains(.launch(weather, reason: "push")), "\(exited)")
        #expect(!exited.contains(.appGone(weather)))
        #expect(engine.launchBackoff(for: weather) == nil)
    }

    /// An app in the foreground that misses a wake's budget has its miss
    /// counted, but is not terminated: nothing is in the foreground.
    @Test mutating func foregroundAppIsNotTerminatedForAMissedWake() throws {
        let app = CallerIdentity(connection: ConnectionID(":1.41"), process: ProcessRef(pid: 600, serial: 1))
        _ = try engine.checkIn(appID: weather.rawValue, caller: app)
        _ = try engine.requestWake(WakeRequest(app: weather, reason: "fetch", plugin: "fetch", budget: .seconds(30), token: "t1"))
        clock.advance(by: .seconds(30))
        #expect(engine.fireDueTimers() == [.wakeExpired(token: "t1", plugin: "fetch", app: weather)])
        #expect(engine.nextDeadline() == nil)
    }
}
