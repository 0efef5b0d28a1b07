import BgTaskTestKit
import Foundation
import Glibc
import Testing

/// Sleep and wake through the real daemon: logind's delay lock (mocked on a
/// private system bus), background apps frozen in their own cgroups, and the
/// backlog after a wake drained in turns.
@Suite struct SleepTests {
    static let hasDBusMock = FileManager.default.fileExists(atPath: "/usr/lib/python3/dist-packages/dbusmock")

    /// Polls `condition` every 20 ms until it holds or `timeout` passes.
    @discardableResult
    private func eventually(_ timeout: Duration = .seconds(10), _ condition: () throws -> Bool) rethrows -> Bool {
        let deadline = ContinuousClock.now + timeout
        while try !condition() {
            if ContinuousClock.now >= deadline { return false }
            Thread.sleep(forTimeInterval: 0.02)
        }
        return true
    }

    private func ourLocks(_ system: MockSystemBus) throws -> Int {
        try system.inhibitors().filter { $0.who == "bgtaskd" && $0.what == "sleep" && $0.mode == "delay" }.count
    }

    /// `busctl --expect-reply=no call … SimulateSleep` (or dbus-send without
    /// --print-reply) exits at once: the daemon cannot identify a caller that
    /// left, refuses the call, and the refusal went to nobody and into no log.
    @Test func aCallNobodyWaitsForIsNotDroppedSilently() throws {
        let daemon = try DaemonUnderTest()
        let sent = try daemon.busctl(["--expect-reply=no", "call", "org.bgtaskd.BackgroundTasks1", "/org/bgtaskd/BackgroundTasks1",
                                      "org.bgtaskd.BackgroundTasks1.Manager", "SimulateSleep"])
        #expect(sent.succeeded, "\(sent)")
        // Either it ran (the caller was identified in time) or the log says why not.
        #expect(try eventually {
            try daemon.property("Sleeping").contains("true") || daemon.log.contains("Manager.SimulateSleep from :1.")
        }, "\(daemon.log)")
        if !daemon.log.contains("SimulateSleep from") { return }
        #expect(daemon.log.contains("not run: the caller could not be identified"), "\(daemon.log)")
        #expect(daemon.stop() == .status(0))
    }

    // MARK: logind

    /// logind's PrepareForSleep(true) during a simulated sleep released its
    /// lock at once ("nothing more to do"): what was stored while the
    /// simulated sleep held (a push) was not made durable before the real one.
    @Test(.enabled(if: SleepTests.hasDBusMock, "needs python3-dbusmock"))
    func aRealSleepDuringASimulatedOneWritesTheStateToDisk() throws {
        let system = try MockSystemBus(services: [.logind(inhibitDelayMaxUSec: 3_000_000)])
        defer { system.stop() }
        let daemon = try DaemonUnderTest(desktopEntries: [
            DesktopEntrySpec(id: "org.example.Chat", modes: ["remote-notification"], exec: "/bin/false"),
        ], environment: system.environment)
        #expect(try eventually { try ourLocks(system) == 1 }, "\(daemon.log)")
        #expect(try daemon.callManager("SimulateSleep").succeeded)
        let pushed = try daemon.bgtaskctl(["push", "org.example.Chat", "-n"])
        #expect(pushed.succeeded, "\(pushed)")
        let database = daemon.stateDirectory + "/bgtaskd.sqlite3"
        func modified() throws -> Date? { try FileManager.default.attributesOfItem(atPath: database)[.modificationDate] as? Date }
        let before = try modified()
        Thread.sleep(forTimeInterval: 0.05)
        try system.emitPrepareForSleep(true)
        #expect(try eventually { try ourLocks(system) == 0 }, "released for the sleep: \(daemon.log)")
        #expect(try modified() != before, "the push stored while asleep was not copied into the database: \(daemon.log)")
        #expect(daemon.stop() == .status(0))
    }

    @Test(.enabled(if: SleepTests.hasDBusMock, "needs python3-dbusmock"))
    func logindDelayLockIsHeldWhileAwakeReleasedForSleepAndTakenAgainAfterResume() throws {
        let system = try MockSystemBus(services: [.logind(inhibitDelayMaxUSec: 3_000_000)])
        defer { system.stop() }
        let daemon = try DaemonUnderTest(environment: system.environment)

        #expect(try eventually { try ourLocks(system) == 1 }, "\(daemon.log)")
        #expect(daemon.process.waitForStandardError(containing: "logind waits up to 3000 ms"), "\(daemon.log)")

        try system.emitPrepareForSleep(true)
        #expect(try eventually { try ourLocks(system) == 0 }, "released for the sleep: \(daemon.log)")
        #expect(daemon.process.waitForStandardError(containing: "released logind's sleep delay lock"), "\(daemon.log)")
        #expect(try daemon.property("Sleeping").contains("true"))
        // logind's sleep ends only by logind's word.
        let refused = try daemon.gdbusCall("SimulateWake")
        #expect(refused.standardError.contains("Error.NotPermitted"), "\(refused)")
        // A second PrepareForSleep(true) without a false between: logged, nothing else.
        try system.emitPrepareForSleep(true)
        #expect(daemon.process.waitForStandardError(containing: "while already asleep"), "\(daemon.log)")

        try system.emitPrepareForSleep(false)
        #expect(try eventually { try ourLocks(system) == 1 }, "taken again after the resume: \(daemon.log)")
        #expect(try eventually { try daemon.property("Sleeping").contains("false") })
        // A resume without a sleep: logged, and still one lock.
        try system.emitPrepareForSleep(false)
        #expect(daemon.process.waitForStandardError(containing: "PrepareForSleep(false) without a sleep"), "\(daemon.log)")
        Thread.sleep(forTimeInterval: 0.2)
        #expect(try ourLocks(system) == 1)
        // A resume during a simulated sleep ends it, and the log says what woke it
        // (it said "SimulateWake", which nobody had called).
        _ = try daemon.callManager("SimulateSleep")
        try system.emitPrepareForSleep(false)
        #expect(try eventually { try daemon.property("Sleeping").contains("false") }, "\(daemon.log)")
        #expect(daemon.process.waitForStandardError(containing: "awake (logind: PrepareForSleep(false), which ends the simulated sleep too)"),
                "\(daemon.log)")
        #expect(!daemon.log.contains("awake (SimulateWake)"), "\(daemon.log)")
        // Nothing ran in the background: no drain is announced (one was, after every wake).
        #expect(!daemon.log.contains("draining the backlog"), "\(daemon.log)")
        #expect(daemon.process.isRunning)
        #expect(daemon.stop() == .status(0))
    }

    /// The system bus crashing (its daemon killed: no NameOwnerChanged goes
    /// out) while the machine slept by logind's word left it asleep for good:
    /// apps frozen, SimulateWake refused, and neither logind nor UPower
    /// followed again when the bus was back. It counts as logind leaving now,
    /// and the daemon connects again.
    @Test(.enabled(if: SleepTests.hasDBusMock, "needs python3-dbusmock"))
    func aSystemBusThatCrashesEndsItsSleepAndIsFollowedAgain() throws {
        let system = try MockSystemBus(services: [.logind()], restartable: true)
        defer { system.stop() }
        let daemon = try DaemonUnderTest(environment: system.environment)
        #expect(try eventually { try ourLocks(system) == 1 }, "\(daemon.log)")
        try system.emitPrepareForSleep(true)
        #expect(try eventually { try daemon.property("Sleeping").contains("true") })
        try system.crashAndRestart(with: [.logind(), .upower(onBattery: true, percentage: 10)])
        #expect(try eventually { try daemon.property("Sleeping").contains("false") }, "\(daemon.log)")
        #expect(try eventually(.seconds(20)) { try ourLocks(system) == 1 }, "following logind again: \(daemon.log)")
        #expect(daemon.process.waitForStandardError(containing: "the system bus is back: following power sources again", timeout: .seconds(20)),
                "\(daemon.log)")
        let status = try RawClient(daemon)
        #expect(try eventually { try status.call("Manager", "GetBackgroundRefreshStatus").readString() == "restricted" },
                "the new UPower says the battery is low: \(daemon.log)")
        // A sleep that logind announces now is followed again.
        try system.emitPrepareForSleep(true)
        #expect(try eventually { try daemon.property("Sleeping").contains("true") }, "\(daemon.log)")
        try system.emitPrepareForSleep(false)
        #expect(try eventually { try daemon.property("Sleeping").contains("false") }, "\(daemon.log)")
        #expect(daemon.stop() == .status(0))
    }

    /// A logind that keeps refusing the delay lock was asked every 2 s for
    /// good, a warning each time (1,800 lines an hour): the wait doubles now.
    @Test(.enabled(if: SleepTests.hasDBusMock, "needs python3-dbusmock"))
    func aLogindThatRefusesTheLockIsAskedLessAndLessOften() throws {
        let system = try MockSystemBus(services: [.logind()])
        defer { system.stop() }
        let daemon = try DaemonUnderTest(environment: system.environment)
        #expect(try eventually { try ourLocks(system) == 1 }, "\(daemon.log)")
        let refusing = try system.busctl([
            "call", "org.freedesktop.login1", "/org/freedesktop/login1", "org.freedesktop.DBus.Mock", "AddMethod", "sssss",
            "org.freedesktop.login1.Manager", "Inhibit", "ssss", "h",
            "raise dbus.exceptions.DBusException('no locks today', name='org.freedesktop.DBus.Error.AccessDenied')",
        ])
        #expect(refusing.succeeded, "\(refusing)")
        // After a sleep the daemon asks for a new lock: refused, asked again in 2 s, then in 4 s.
        try system.emitPrepareForSleep(true)
        #expect(try eventually { try daemon.property("Sleeping").contains("true") })
        try system.emitPrepareForSleep(false)
        #expect(daemon.process.waitForStandardError(containing: "no locks today; asking again in 2 s"), "\(daemon.log)")
        #expect(daemon.process.waitForStandardError(containing: "no locks today; asking again in 4 s", timeout: .seconds(15)), "\(daemon.log)")
        #expect(daemon.stop() == .status(0))
    }

    /// A lock asked for again after a refusal was granted in the middle of
    /// the next sleep and held through it, holding the sleep up for as long
    /// as logind waits for delay locks. No lock is asked for, and none
    /// kept, while logind prepares for sleep; the resume takes one.
    @Test(.enabled(if: SleepTests.hasDBusMock, "needs python3-dbusmock"))
    func noLockIsTakenWhileLogindPreparesForSleep() throws {
        let system = try MockSystemBus(services: [.logind()])
        defer { system.stop() }
        let daemon = try DaemonUnderTest(environment: system.environment)
        #expect(try eventually { try ourLocks(system) == 1 }, "\(daemon.log)")
        func inhibit(_ code: String) throws {
            let added = try system.busctl([
                "call", "org.freedesktop.login1", "/org/freedesktop/login1", "org.freedesktop.DBus.Mock", "AddMethod", "sssss",
                "org.freedesktop.login1.Manager", "Inhibit", "ssss", "h", code,
            ])
            #expect(added.succeeded, "\(added)")
        }
        func taken() -> Int { daemon.log.components(separatedBy: "took logind's sleep delay lock").count - 1 }
        try inhibit("raise dbus.exceptions.DBusException('not now', name='org.freedesktop.DBus.Error.AccessDenied')")
        try system.emitPrepareForSleep(true)
        #expect(try eventually { try daemon.property("Sleeping").contains("true") })
        try system.emitPrepareForSleep(false)
        #expect(daemon.waitForLog(containing: "not now; asking again in 2 s"), "\(daemon.log)")
        // Asleep again before the retry comes due, and logind grants locks again.
        try system.emitPrepareForSleep(true)
        #expect(try eventually { try daemon.property("Sleeping").contains("true") })
        try inhibit("ret = dbus.types.UnixFd(os.open('/dev/null', os.O_RDONLY))")
        let before = taken()
        Thread.sleep(forTimeInterval: 3)
        #expect(taken() == before, "no lock taken during the sleep: \(daemon.log.suffix(1500))")
        try system.emitPrepareForSleep(false)
        #expect(try eventually { taken() == before + 1 }, "the resume takes one: \(daemon.log.suffix(1500))")
        #expect(daemon.stop() == .status(0))
    }

    /// A daemon started while logind prepared for sleep (its PrepareForSleep
    /// went out before) took a lock, said the machine was awake and let
    /// SimulateWake through. logind's PreparingForSleep is read now.
    @Test(.enabled(if: SleepTests.hasDBusMock, "needs python3-dbusmock"))
    func aDaemonStartedWhileLogindPreparesForSleepSleeps() throws {
        let system = try MockSystemBus(services: [.logind()])
        defer { system.stop() }
        func preparing(_ value: Bool) throws {
            let set = try system.busctl(["set-property", "org.freedesktop.login1", "/org/freedesktop/login1",
                                         "org.freedesktop.login1.Manager", "PreparingForSleep", "b", value ? "true" : "false"])
            #expect(set.succeeded, "\(set)")
        }
        try preparing(true)
        let daemon = try DaemonUnderTest(environment: system.environment)
        #expect(daemon.waitForLog(containing: "logind is preparing for sleep (PreparingForSleep)"), "\(daemon.log)")
        #expect(try eventually { try daemon.property("Sleeping").contains("true") }, "\(daemon.log)")
        #expect(try ourLocks(system) == 0, "\(daemon.log)")
        let refused = try daemon.gdbusCall("SimulateWake")
        #expect(refused.standardError.contains("Error.NotPermitted"), "\(refused)")
        try preparing(false)
        try system.emitPrepareForSleep(false)
        #expect(try eventually { try ourLocks(system) == 1 }, "\(daemon.log)")
        #expect(try eventually { try daemon.property("Sleeping").contains("false") }, "\(daemon.log)")
        #expect(daemon.stop() == .status(0))
    }

    @Test(.enabled(if: SleepTests.hasDBusMock, "needs python3-dbusmock"))
    func logindComingAndGoingIsFollowed() throws {
        let system = try MockSystemBus(services: [])
        defer { system.stop() }
        let daemon = try DaemonUnderTest(environment: system.environment)
        #expect(daemon.process.waitForStandardError(containing: "no logind on the system bus"), "\(daemon.log)")

        // logind appears after the daemon: a lock is taken.
        try system.startService(.logind())
        #expect(try eventually { try ourLocks(system) == 1 }, "\(daemon.log)")
        // It restarts: the new logind gets a lock of its own.
        system.stopService(.logind())
        #expect(daemon.process.waitForStandardError(containing: "logind left the system bus"), "\(daemon.log)")
        try system.startService(.logind())
        #expect(try eventually { try ourLocks(system) == 1 }, "\(daemon.log)")

        // It goes away in the middle of a sleep: nothing will say the
        // machine woke, so the daemon counts it as a wake.
        try system.emitPrepareForSleep(true)
        #expect(try eventually { try daemon.property("Sleeping").contains("true") })
        system.stopService(.logind())
        #expect(daemon.process.waitForStandardError(containing: "counting that as a wake"), "\(daemon.log)")
        #expect(try daemon.property("Sleeping").contains("false"))
        // The log said logind had sent PrepareForSleep(false).
        #expect(daemon.log.contains("awake (logind left the bus)") && !daemon.log.contains("awake (logind: PrepareForSleep(false))"),
                "\(daemon.log)")
        #expect(daemon.stop() == .status(0))
    }

    /// The fetch plugin's planner hears sleep and wake: no fetch while the
    /// machine sleeps, and the one that fell due meanwhile comes at the wake.
    @Test func fetchesWaitForTheWake() throws {
        let daemon = try DaemonUnderTest(
            settings: ["Fetch.MinimumIntervalSec=1", "Fetch.MaximumSpacingSec=1"],
            desktopEntries: [DesktopEntrySpec(id: "org.example.Weather", modes: ["fetch"], exec: "/bin/true")])
        let app = try daemon.startTestApp([
            "--app-id", "org.example.Weather", "--fetch-interval", "1", "--fetch-result", "newData", "--background",
            "--tasks", "0", "--hold", "60",
        ])
        defer { app.stop() }
        #expect(app.waitForEvent("perform_fetch") != nil, "fetched every second while awake: \(daemon.log)")
        _ = try daemon.callManager("SimulateSleep")
        Thread.sleep(forTimeInterval: 3)
        // The fetch that fell due is listed as waiting for the wake, not as a time gone by.
        let apps = try daemon.bgtaskctl(["apps"])
        #expect(apps.succeeded && apps.standardOutput.contains("at the wake (due "), "\(apps)")
        _ = try daemon.callManager("SimulateWake")
        #expect(daemon.process.waitForStandardError(containing: "awake (SimulateWake)"))
        let log = daemon.log
        let asleep = try #require(log.range(of: "going to sleep (SimulateSleep)"))
        let awake = try #require(log.range(of: "awake (SimulateWake)"))
        #expect(!log[asleep.upperBound..<awake.lowerBound].contains("fetch wake for"), "no fetch while asleep: \(log)")
        let deadline = ContinuousClock.now + .seconds(5)
        while !daemon.log[awake.upperBound...].contains("fetch wake for"), ContinuousClock.now < deadline {
            Thread.sleep(forTimeInterval: 0.05)
        }
        #expect(daemon.log[awake.upperBound...].contains("fetch wake for 1 app(s): org.example.Weather"), "\(daemon.log)")
        #expect(daemon.stop() == .status(0))
    }

    /// Refresh switched off (or the power running low) while events waited
    /// for the machine to wake let them through all the same: the app was
    /// launched and handed them at the wake. They wait for refresh now, and
    /// a held alert goes once it is on again.
    @Test func eventsWaitingForTheWakeWaitForRefreshWhenItGoes() throws {
        let app = "org.example.Paper"
        let daemon = try DaemonUnderTest(desktopEntries: [DesktopEntrySpec(id: app, modes: ["fetch", "remote-notification"], exec: "/bin/true")])
        #expect(try daemon.bgtaskctl(["sleep"]).succeeded)
        #expect(try daemon.bgtaskctl(["fetch", "simulate", app]).succeeded)
        #expect(try daemon.bgtaskctl(["push", app, "-a", "news"]).succeeded)
        #expect(try daemon.bgtaskctl(["refresh", "disable"]).succeeded)
        #expect(daemon.waitForLog(containing: "waiting wake(s) of \(app) back to their plugins: Background App Refresh is denied"), "\(daemon.log)")
        #expect(try daemon.bgtaskctl(["wake"]).succeeded)
        Thread.sleep(forTimeInterval: 1.5)
        #expect(!daemon.log.contains("launched \(app)"), "\(daemon.log)")
        let pushes = try daemon.bgtaskctl(["pushes", app])
        #expect(pushes.standardOutput.contains("held"), "\(pushes)")
        #expect(try daemon.bgtaskctl(["refresh", "enable"]).succeeded)
        #expect(daemon.waitForLog(containing: "launched \(app)"), "the held alert goes once refresh is back: \(daemon.log)")
        #expect(daemon.stop() == .status(0))
    }

    /// An app with no process, whose fetch waits for the wake, was listed as
    /// `suspended` (JSON `running: false, suspended: true`): it is not running.
    @Test func anAppWithNoProcessIsNotSuspended() throws {
        let daemon = try DaemonUnderTest(desktopEntries: [DesktopEntrySpec(id: "org.example.Idle", modes: ["fetch"], exec: "/bin/true")])
        #expect(try daemon.bgtaskctl(["sleep"]).succeeded)
        #expect(try daemon.bgtaskctl(["fetch", "simulate", "org.example.Idle"]).succeeded)
        let json = try daemon.bgtaskctl(["--json", "apps"])
        #expect(json.succeeded && json.standardOutput.contains("\"suspended\":false") && !json.standardOutput.contains("\"suspended\":true"),
                "\(json)")
        let table = try daemon.bgtaskctl(["apps"])
        #expect(table.standardOutput.contains("not running") && !table.standardOutput.contains("suspended"), "\(table)")
        #expect(daemon.stop() == .status(0))
    }

    /// An app started by hand, known to the daemon only by its check-in (it
    /// cannot be frozen), in the background: a fetch asked for while the
    /// machine sleeps reaches it only after the wake, as the reply says.
    @Test func anEventForAnAppThatCannotBeFrozenWaitsForTheWake() throws {
        let daemon = try DaemonUnderTest(
            desktopEntries: [DesktopEntrySpec(id: "org.example.Weather", modes: ["fetch"], exec: "/bin/true")])
        let app = try daemon.startTestApp([
            "--app-id", "org.example.Weather", "--fetch-result", "newData", "--background", "--tasks", "0", "--hold", "60",
        ])
        defer { app.stop() }
        #expect(app.waitForEvent("state") != nil, "\(app.lines)")
        _ = try daemon.callManager("SimulateSleep")
        let admin = try RawClient(daemon)
        try admin.call("Fetch", "SimulateFetch") { try $0.append("org.example.Weather") }
        Thread.sleep(forTimeInterval: 1.5)
        #expect(app.events(named: "perform_fetch").isEmpty, "handed a fetch while asleep: \(app.lines)")
        _ = try daemon.callManager("SimulateWake")
        #expect(app.waitForEvent("fetch_completed") != nil, "the fetch comes at the wake: \(app.lines) \(daemon.log)")
        #expect(daemon.stop() == .status(0))
    }

    // MARK: Freezing

    /// Background apps are frozen in their cgroups for the sleep and use no
    /// CPU while frozen; a foreground app is never frozen.
    @Test(.enabled(if: ScopedApp.canMakeScopes, "needs root and a writable cgroup v2 hierarchy"))
    func sleepFreezesBackgroundAppsAndNeverAForegroundOne() throws {
        let daemon = try DaemonUnderTest(settings: ["Tasks.BudgetSec=120"])
        let background = try ScopedApp(daemon, appID: "org.example.Busy", ["--background", "--work", "60"])
        let foreground = try ScopedApp(daemon, appID: "org.example.Front", ["--hold", "60"])
        defer {
            background.stop()
            foreground.stop()
        }
        #expect(background.process.waitForEvent("worked") != nil, "\(background.process.lines) \(daemon.log)")
        #expect(foreground.process.waitForEvent("begun") != nil)

        _ = try daemon.callManager("SimulateSleep")
        // SimulateSleep answers once the freezes are complete.
        #expect(background.isFrozen, "\(daemon.log)")
        #expect(daemon.waitForLog(containing: "froze org.example.Busy"), "\(daemon.log)")
        #expect(daemon.waitForLog(containing: "with cgroup.freeze"), "\(daemon.log)")
        #expect(!foreground.isFrozen)
        let admin = try RawClient(daemon)
        let busy = try admin.applications().first { $0["app_id"] == .string("org.example.Busy") }
        #expect(busy?["suspended"] == .bool(true), "\(String(describing: busy))")

        // Frozen, it works no more and uses no CPU. What it wrote just before
        // may still be in the pipe: the count is taken once it stays.
        var steps = background.process.eventNames.count
        let settled = ContinuousClock.now + .seconds(5)
        while ContinuousClock.now < settled {
            Thread.sleep(forTimeInterval: 0.2)
            let now = background.process.eventNames.count
            if now == steps { break }
            steps = now
        }
        let cpu = try #require(background.cpuUsec)
        Thread.sleep(forTimeInterval: 0.5)
        #expect(background.process.eventNames.count == steps)
        #expect(background.cpuUsec == cpu)

        _ = try daemon.callManager("SimulateWake")
        #expect(background.waitUntilFrozen(false), "\(daemon.log)")
        #expect(eventually { background.process.eventNames.count > steps + 5 }, "it works again")
        #expect(daemon.stop() == .status(0))
        #expect(!background.isFrozen, "nothing stays frozen after the daemon stops")
    }

    /// After a wake the backlog drains in turns: never more than
    /// MaxConcurrentWakes apps run at once (as the apps' own work lines show),
    /// each turn at most ChunkSec, until every app has done its work.
    @Test(.enabled(if: ScopedApp.canMakeScopes, "needs root and a writable cgroup v2 hierarchy"))
    func theBacklogAfterAWakeDrainsInTurns() throws {
        let daemon = try DaemonUnderTest(settings: [
            "Tasks.BudgetSec=120", "Scheduler.MaxConcurrentWakes=2", "Scheduler.ChunkSec=0.5",
        ])
        let apps = try (1...4).map { n in
            try ScopedApp(daemon, appID: "org.example.Worker\(n)", ["--background", "--work", "0.8", "--hold", "60"])
        }
        defer { for app in apps { app.stop() } }
        for app in apps { #expect(app.process.waitForEvent("state") != nil, "\(app.process.lines)") }
        let slept = try daemon.bgtaskctl(["sleep"])
        #expect(slept.succeeded && slept.standardOutput.contains("Asleep"), "\(slept)")
        for app in apps { #expect(app.isFrozen, "\(daemon.log)") }
        #expect(daemon.log.contains(": 4 app instances frozen"), "\(daemon.log)")
        let asleep = try daemon.bgtaskctl(["status"])
        #expect(asleep.standardOutput.contains("Sleeping: yes"), "\(asleep)")
        var clock = timespec()
        clock_gettime(CLOCK_MONOTONIC, &clock)
        let woke = clock.tv_sec * 1_000_000 + clock.tv_nsec / 1000

        #expect(try daemon.bgtaskctl(["wake"]).succeeded)
        #expect(try daemon.property("Draining").contains("true"), "\(daemon.log)")
        let draining = try daemon.bgtaskctl(["status"])
        #expect(draining.standardOutput.contains("Backlog:  draining: 4 apps (org.example.Worker"), "\(draining)")
        // Each app does all its work and ends its task (it may be suspended
        // before it hears EndBackgroundTask's answer, as iOS suspends an app
        // whose last task ended: the Tasks property tells).
        #expect(eventually(.seconds(30)) { apps.allSatisfy { $0.process.eventNames.filter { $0 == "worked" }.count == 80 } },
                "\(apps.map { $0.process.eventNames.filter { $0 == "worked" }.count }) \(daemon.log)")
        #expect(try !daemon.waitForTasks(timeout: .seconds(10)) { !$0.contains("Worker") }.contains("Worker"), "\(daemon.log)")
        #expect(try eventually { try daemon.property("Draining").contains("false") }, "\(daemon.log)")
        #expect(daemon.waitForLog(containing: "backlog drained"))
        // Done, idle in the background, and opened by the user (not launched
        // by the daemon): left running, not frozen, so that it hears the user.
        for app in apps { #expect(!app.isFrozen, "\(daemon.log)") }
        let listed = try daemon.bgtaskctl(["apps"]).standardOutput
        #expect(listed.split(separator: "\n").filter { $0.contains("org.example.Worker") && $0.contains("background") }.count == 4,
                "\(listed)")

        // When each app ran after the wake, from its own lines.
        let runs = apps.map { app in
            app.process.events.compactMap { event -> Int? in
                guard event["event"] as? String == "worked", let t = event["t"] as? Int, t > woke else { return nil }
                return t
            }
        }
        #expect(runs.allSatisfy { !$0.isEmpty })
        let most = Self.mostAtOnce(runs, gap: 40_000)
        #expect(most <= 2 && most >= 1, "at most MaxConcurrentWakes apps ran at once, saw \(most)")
        #expect(daemon.stop() == .status(0))
    }

    /// A simulated fetch for an app waiting for its turn in the backlog after
    /// a wake was said to have reached the app ("it has its PerformFetch")
    /// while the app was not even launched yet.
    @Test(.enabled(if: ScopedApp.canMakeScopes, "needs root and a writable cgroup v2 hierarchy"))
    func aSimulatedFetchWaitingForItsTurnSaysSo() throws {
        let fetcher = "org.example.Fetcher"
        let daemon = try DaemonUnderTest(
            settings: ["Tasks.BudgetSec=120", "Scheduler.MaxConcurrentWakes=1", "Scheduler.ChunkSec=30"],
            desktopEntries: [DesktopEntrySpec(id: fetcher, modes: ["fetch"],
                                              exec: "\(BinaryLocator.path(of: "bgtaskd-testapp")) --fetch-result newData --tasks 0 --hold 60")])
        let worker = try ScopedApp(daemon, appID: "org.example.Worker", ["--background", "--work", "20", "--hold", "60"])
        defer { worker.stop() }
        #expect(worker.process.waitForEvent("state") != nil, "\(worker.process.lines)")
        #expect(try daemon.bgtaskctl(["sleep"]).succeeded)
        #expect(try daemon.bgtaskctl(["wake"]).succeeded)
        #expect(try daemon.property("Draining").contains("true"), "\(daemon.log)")
        let simulated = try daemon.bgtaskctl(["fetch", "simulate", fetcher])
        #expect(simulated.succeeded && simulated.standardOutput.contains("it gets its PerformFetch at its turn"), "\(simulated) \(daemon.log)")
        let json = try daemon.bgtaskctl(["--json", "fetch", "simulate", fetcher])
        #expect(json.standardOutput.contains(#""waits_for":"turn""#), "\(json)")
        // A sleep in the middle of the drain: the log said "backlog drained" with the backlog still there.
        #expect(try daemon.bgtaskctl(["sleep"]).succeeded)
        #expect(daemon.waitForLog(containing: "the backlog's turns stop for the sleep"), "\(daemon.log)")
        #expect(!daemon.log.contains("backlog drained") && daemon.log.contains("in turns of at most 1 app, "), "\(daemon.log)")
        #expect(daemon.stop() == .status(0))
    }

    /// An app launched at its turn and still starting is waiting for its
    /// check-in, not for its turn (found in review: the Backlog property
    /// lists the apps having their turn too).
    @Test func aSimulatedFetchForAnAppStartingAtItsTurnWaitsForItsCheckIn() throws {
        let app = "org.example.Slow"
        let daemon = try DaemonUnderTest(
            settings: ["Scheduler.MaxConcurrentWakes=1", "Fetch.WakeBudgetSec=60"],
            desktopEntries: [DesktopEntrySpec(id: app, modes: ["fetch"], exec: "/bin/sleep 60")])
        #expect(try daemon.bgtaskctl(["sleep"]).succeeded)
        let asleep = try daemon.bgtaskctl(["fetch", "simulate", app])
        #expect(asleep.standardOutput.contains("after the wake"), "\(asleep)")
        #expect(try daemon.bgtaskctl(["wake"]).succeeded)
        #expect(daemon.waitForLog(containing: "launched \(app) for fetch"), "\(daemon.log)")
        let starting = try daemon.bgtaskctl(["--json", "fetch", "simulate", app])
        #expect(starting.standardOutput.contains(#""waits_for":"check-in""#), "\(starting) \(daemon.log.suffix(1500))")
        #expect(daemon.stop() == .status(0))
    }

    /// The most apps running at the same moment, from the times each one
    /// worked: an app runs from a step to the next when they are under `gap` µs apart.
    static func mostAtOnce(_ runs: [[Int]], gap: Int) -> Int {
        var edges: [(Int, Int)] = []
        for times in runs {
            let sorted = times.sorted()
            guard var start = sorted.first else { continue }
            var last = start
            for t in sorted.dropFirst() {
                if t - last > gap {
                    edges += [(start, 1), (last, -1)]
                    start = t
                }
                last = t
            }
            edges += [(start, 1), (last, -1)]
        }
        // Ends before starts at the same instant.
        edges.sort { $0.0 != $1.0 ? $0.0 < $1.0 : $0.1 < $1.1 }
        var now = 0, most = 0
        for (_, change) in edges {
            now += change
            most = max(most, now)
        }
        return most
    }

    /// An app killed while frozen is cleaned up: its tasks and its record go,
    /// and the wake has nothing of it to drain.
    @Test(.enabled(if: ScopedApp.canMakeScopes, "needs root and a writable cgroup v2 hierarchy"))
    func anAppThatDiesWhileFrozenIsCleanedUp() throws {
        let daemon = try DaemonUnderTest(settings: ["Tasks.BudgetSec=120"])
        let app = try ScopedApp(daemon, appID: "org.example.Doomed", ["--background", "--hold", "60"])
        defer { app.stop() }
        #expect(app.process.waitForEvent("state") != nil)
        _ = try daemon.callManager("SimulateSleep")
        #expect(app.isFrozen)
        app.process.send(SIGKILL)  // a frozen process still dies of SIGKILL
        #expect(app.process.waitForExit() != nil)
        #expect(try daemon.waitForTasks { !$0.contains("org.example.Doomed") }.contains("org.example.Doomed") == false)
        #expect(daemon.process.waitForStandardError(containing: "thawed org.example.Doomed"), "\(daemon.log)")
        _ = try daemon.callManager("SimulateWake")
        #expect(try daemon.property("Draining").contains("false"))
        #expect(daemon.stop() == .status(0))
    }

    /// Two processes of one app share its scope: one dying while frozen
    /// does not thaw the scope while the other must stay frozen.
    @Test(.enabled(if: ScopedApp.canMakeScopes, "needs root and a writable cgroup v2 hierarchy"))
    func aScopeSharedByTwoProcessesStaysFrozenWhenOneDies() throws {
        let daemon = try DaemonUnderTest(settings: ["Tasks.BudgetSec=120"])
        let first = try ScopedApp(daemon, appID: "org.example.Pair", ["--background", "--hold", "60"])
        defer { first.stop() }
        let testapp = BinaryLocator.path(of: "bgtaskd-testapp")
        let second = try ChildProcess("/bin/sh", [
            "-c", "echo $$ > '\(first.scope)/cgroup.procs' && exec '\(testapp)' --bus '\(daemon.bus.address)' --background --hold 60",
        ])
        defer { second.stop() }
        #expect(first.process.waitForEvent("state") != nil)
        #expect(second.waitForEvent("state") != nil)
        _ = try daemon.callManager("SimulateSleep")
        #expect(first.isFrozen, "\(daemon.log)")
        second.send(SIGKILL)
        #expect(second.waitForExit() != nil)
        #expect(daemon.process.waitForStandardError(containing: "thawed org.example.Pair (pid \(second.pid))"), "\(daemon.log)")
        Thread.sleep(forTimeInterval: 0.3)
        #expect(first.isFrozen, "the other process of the app is still held: \(daemon.log)")
        _ = try daemon.callManager("SimulateWake")
        #expect(first.waitUntilFrozen(false), "\(daemon.log)")
        #expect(daemon.stop() == .status(0))
    }

    /// A daemon SIGKILLed while apps are frozen: the next start thaws them,
    /// both the app it launched and one the user opened in an app scope.
    @Test(.enabled(if: ScopedApp.canMakeScopes, "needs root and a writable cgroup v2 hierarchy"))
    func appsFrozenByAKilledDaemonAreThawedAtTheNextStart() throws {
        let daemon = try DaemonUnderTest(
            settings: ["Fetch.WakeBudgetSec=60", "Tasks.BudgetSec=120"],
            desktopEntries: [DesktopEntrySpec(id: "org.example.Sleeper", modes: ["fetch"], exec: "/bin/sleep 60")])
        let opened = try ScopedApp(daemon, appID: "org.example.Opened", ["--background", "--hold", "60"])
        defer { opened.stop() }
        #expect(opened.process.waitForEvent("state") != nil)
        let admin = try RawClient(daemon)
        try admin.bus.send(try LaunchTests.simulateFetch("org.example.Sleeper", on: admin))
        admin.bus.flush()
        #expect(daemon.process.waitForStandardError(containing: "launched org.example.Sleeper for fetch"), "\(daemon.log)")
        let line = try #require(daemon.log.split(separator: "\n").first {
            $0.contains("launched org.example.Sleeper") && $0.contains(" in /")
        }, "\(daemon.log)")
        let cgroup = String(try #require(line.split(separator: " in ").last))
        defer { try? "1".write(toFile: cgroup + "/cgroup.kill", atomically: false, encoding: .utf8) }
        _ = try daemon.callManager("SimulateSleep")
        // Answered once frozen and recorded: a daemon killed from here on leaves its freezes listed.
        let journal = try? String(contentsOfFile: daemon.stateDirectory + "/bgtaskd.sqlite3.frozen", encoding: .utf8)
        #expect(journal?.contains(cgroup) == true, "the journal lists the freeze before the reply: \(journal ?? "none")")
        #expect((try? String(contentsOfFile: cgroup + "/cgroup.events", encoding: .utf8))?.contains("frozen 1") == true,
                "\(daemon.log)")
        #expect(opened.isFrozen, "\(daemon.log)")

        try daemon.crashAndRestart()
        #expect(daemon.process.waitForStandardError(containing: "left frozen by a daemon that stopped without thawing them"),
                "\(daemon.log)")
        #expect(eventually {
            (try? String(contentsOfFile: cgroup + "/cgroup.events", encoding: .utf8))?.contains("frozen 0") == true
        })
        #expect(opened.waitUntilFrozen(false), "the app the user opened runs again")
        #expect(daemon.stop() == .status(0))
    }

    /// A daemon, and an app the user opened in an app scope, in the
    /// background and frozen by a sleep.
    func frozenOpenedApp() throws -> (DaemonUnderTest, ScopedApp) {
        let daemon = try DaemonUnderTest(settings: ["Tasks.BudgetSec=120"])
        let opened = try ScopedApp(daemon, appID: "org.example.Opened", ["--background", "--hold", "60"])
        #expect(opened.process.waitForEvent("state") != nil)
        _ = try daemon.callManager("SimulateSleep")
        #expect(opened.isFrozen, "\(daemon.log)")
        return (daemon, opened)
    }

    /// A second `bgtaskd` on `daemon`'s bus and state directory, run to its end.
    func anotherStart(of daemon: DaemonUnderTest) throws -> CommandResult {
        try CommandResult.run(
            BinaryLocator.path(of: "bgtaskd"), ["--bus", daemon.bus.address, "--state-dir", daemon.stateDirectory],
            environment: ["HOME": daemon.home, "XDG_DATA_HOME": daemon.home + "/data", "XDG_CONFIG_HOME": daemon.home + "/config"])
    }

    /// A start that refuses its database (here emptied) still thaws what the
    /// killed daemon left frozen before it gives up: the journal needs
    /// nothing from the database.
    @Test(.enabled(if: ScopedApp.canMakeScopes, "needs root and a writable cgroup v2 hierarchy"))
    func aStartThatRefusesItsDatabaseStillThawsWhatWasLeftFrozen() throws {
        let (daemon, opened) = try frozenOpenedApp()
        defer { opened.stop() }
        daemon.process.send(SIGKILL)
        _ = daemon.process.waitForExit(timeout: .seconds(10))
        #expect(truncate(daemon.stateDirectory + "/bgtaskd.sqlite3", 0) == 0)
        let refused = try anotherStart(of: daemon)
        #expect(refused.exit == .status(65), "\(refused)")
        #expect(refused.standardError.contains("left frozen by a daemon that stopped without thawing them, before giving up"), "\(refused)")
        #expect(opened.waitUntilFrozen(false), "the app the user opened runs again")
    }

    /// A second daemon on the same state directory is refused (the first
    /// holds the database) and leaves the first one's freezes alone: the
    /// journal is the first daemon's.
    @Test(.enabled(if: ScopedApp.canMakeScopes, "needs root and a writable cgroup v2 hierarchy"))
    func aSecondDaemonOnTheSameStateLeavesTheFirstsFreezesAlone() throws {
        let (daemon, opened) = try frozenOpenedApp()
        defer { opened.stop() }
        let second = try anotherStart(of: daemon)
        #expect(second.exit == .status(65), "\(second)")
        #expect(!second.standardError.contains("thawed"), "\(second)")
        #expect(opened.isFrozen, "the first daemon's freeze holds")
        _ = try daemon.callManager("SimulateWake")
        #expect(opened.waitUntilFrozen(false))
        #expect(daemon.stop() == .status(0))
    }

    /// A SimulateFetch waiting for its launched app to start is answered when
    /// the machine goes to sleep (it was launched), not held until the wake,
    /// past any caller's timeout.
    @Test func aSimulatedFetchWaitingForItsAppIsAnsweredWhenTheMachineSleeps() throws {
        let daemon = try DaemonUnderTest(
            settings: ["Fetch.WakeBudgetSec=60"],
            desktopEntries: [DesktopEntrySpec(id: "org.example.Sleeper", modes: ["fetch"], exec: "/bin/sleep 60")])
        let simulate = try ChildProcess(BinaryLocator.path(of: "bgtaskctl"), ["--bus", daemon.bus.address, "fetch", "simulate", "org.example.Sleeper"])
        #expect(daemon.process.waitForStandardError(containing: "launched org.example.Sleeper for fetch"), "\(daemon.log)")
        _ = try daemon.callManager("SimulateSleep")
        let exit = simulate.waitForExit(timeout: .seconds(20))
        #expect(exit == .status(0), "answered while the machine still sleeps: \(String(describing: exit)) \(simulate.lines) \(simulate.standardError)")
        _ = try daemon.callManager("SimulateWake")
        #expect(daemon.stop() == .status(0))
    }

    /// dbusmock as the systemd user manager on `bus`, with FreezeUnit (running
    /// `freezing`, Python, when called) and ThawUnit, once it answers.
    private func mockUserManager(on bus: PrivateBus, freezing: String = "") throws -> ChildProcess {
        let manager = try ChildProcess("/usr/bin/python3", [
            "-m", "dbusmock", "--session", "org.freedesktop.systemd1", "/org/freedesktop/systemd1", "org.freedesktop.systemd1.Manager",
        ], environment: bus.environment)
        func gdbus(_ arguments: [String]) throws -> CommandResult {
            try CommandResult.run("/usr/bin/gdbus", ["call", "--address", bus.address, "--dest", "org.freedesktop.systemd1",
                                                     "--object-path", "/org/freedesktop/systemd1"] + arguments)
        }
        let deadline = ContinuousClock.now + .seconds(20)
        while try !gdbus(["--method", "org.freedesktop.DBus.Peer.Ping"]).succeeded, ContinuousClock.now < deadline {
            Thread.sleep(forTimeInterval: 0.05)
        }
        for (method, code) in [("FreezeUnit", freezing), ("ThawUnit", "")] {
            let added = try gdbus(["--method", "org.freedesktop.DBus.Mock.AddMethod", "", method, "s", "", code])
            #expect(added.succeeded, "\(added)")
        }
        return manager
    }

    /// A SimulateWake that comes while the apps are still being frozen ends
    /// the sleep: the SimulateSleep waiting for the freezes is refused, not
    /// answered as if the machine slept ("Asleep: … suspended").
    @Test(.enabled(if: ScopedApp.canMakeScopes, "needs root and a writable cgroup v2 hierarchy"))
    func aSleepCutShortByAWakeIsRefused() throws {
        let bus = try PrivateBus()
        // A user manager whose FreezeUnit takes 3 s.
        let manager = try mockUserManager(on: bus, freezing: "__import__('time').sleep(3)")
        defer { manager.stop() }
        let daemon = try DaemonUnderTest(settings: ["Tasks.BudgetSec=120"], bus: bus)
        let opened = try ScopedApp(daemon, appID: "org.example.Opened", ["--background", "--hold", "60"])
        defer { opened.stop() }
        #expect(opened.process.waitForEvent("state") != nil)
        let sleep = try ChildProcess(BinaryLocator.path(of: "bgtaskctl"), ["--bus", bus.address, "sleep"])
        #expect(daemon.process.waitForStandardError(containing: "going to sleep"), "\(daemon.log)")
        #expect(try daemon.callManager("SimulateWake").succeeded)
        let exit = sleep.waitForExit(timeout: .seconds(20))
        #expect(exit != .status(0) && sleep.standardError.contains("a wake came before the background apps were frozen"),
                "\(String(describing: exit)) \(sleep.lines) \(sleep.standardError) \(daemon.log.suffix(1500))")
        #expect(!sleep.lines.joined().contains("Asleep"))
        #expect(daemon.stop() == .status(0))
    }

    /// A daemon that loses its bus cannot ask the user manager to thaw the
    /// units it froze: it leaves them listed, for the start on the bus's
    /// return to thaw, instead of forgetting them frozen.
    @Test(.enabled(if: ScopedApp.canMakeScopes, "needs root and a writable cgroup v2 hierarchy"))
    func unitsFrozenWhenTheBusIsLostStayListedForTheNextStart() throws {
        let bus = try PrivateBus()
        // The user manager, as far as freezing goes: FreezeUnit and ThawUnit that answer.
        let manager = try mockUserManager(on: bus)
        defer { manager.stop() }
        let daemon = try DaemonUnderTest(settings: ["Tasks.BudgetSec=120"], bus: bus)
        let opened = try ScopedApp(daemon, appID: "org.example.Opened", ["--background", "--hold", "60"])
        defer { opened.stop() }
        #expect(opened.process.waitForEvent("state") != nil)
        _ = try daemon.callManager("SimulateSleep")
        let journal = daemon.stateDirectory + "/bgtaskd.sqlite3.frozen"
        #expect((try? String(contentsOfFile: journal, encoding: .utf8))?.contains("unit app-gnome-org.example.Opened") == true,
                "frozen through the user manager: \(daemon.log.suffix(1500))")
        bus.stop()
        #expect(daemon.process.waitForExit(timeout: .seconds(10)) == .status(69), "\(daemon.log.suffix(1500))")
        #expect((try? String(contentsOfFile: journal, encoding: .utf8))?.contains("unit app-gnome-org.example.Opened") == true,
                "still listed for the next start: \(daemon.log.suffix(1500))")
    }
}
