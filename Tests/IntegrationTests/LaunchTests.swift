import BgTaskTestKit
import Foundation
import SDBus
import Testing

/// Apps launched for background events: failures reported and held back,
/// launched apps that never answer terminated.
@Suite struct LaunchTests {
    /// The user opens an app while the instance the daemon launched for a
    /// fetch runs on, then quits it: the app is in the background again, as
    /// its launched instance is, not left `active` (held from fetches, never
    /// suspended).
    @Test func theAppIsBackInTheBackgroundWhenTheUsersInstanceQuits() throws {
        let app = "org.example.Twice"
        let testapp = BinaryLocator.path(of: "bgtaskd-testapp")
        let daemon = try Self.daemonLaunching(app, exec: "\(testapp) --fetch-result newData --tasks 0 --hold 60")
        let admin = try RawClient(daemon)
        let backgroundStates: Set = ["background", "background, suspended"]
        try admin.call("Fetch", "SimulateFetch") { try $0.append(app) }
        #expect(daemon.waitForLog(containing: "launched \(app) for fetch"), "\(daemon.log)")
        #expect(try backgroundStates.contains(admin.waitForAppState(app, in: backgroundStates) ?? ""))
        // Opened by the user: a connection of its own that brings the app to the foreground.
        var byHand: RawClient? = try RawClient(daemon)
        try byHand!.call("Manager", "CheckIn") { try $0.append(app) }
        try byHand!.call("Manager", "SetApplicationState") { try $0.append("active") }
        #expect(try admin.waitForAppState(app, in: ["active"]) == "active")
        byHand = nil
        let after = try admin.waitForAppState(app, in: backgroundStates)
        #expect(backgroundStates.contains(after ?? ""), "\(String(describing: after)) \(daemon.log.suffix(1500))")
        #expect(daemon.stop() == .status(0))
    }

    /// The entry's `Path=` is where the app starts. It was ignored: every
    /// app started in the home directory, and an `Exec=./app` beside it was
    /// not found.
    @Test func anAppStartsInItsEntrysPath() throws {
        let app = "org.example.Placed"
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("bgtaskd-path-\(UUID()) dir").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let testapp = BinaryLocator.path(of: "bgtaskd-testapp")
        try "#!/bin/sh\npwd > started-in\nexec '\(testapp)' --fetch-result newData --tasks 0 --hold 5\n"
            .write(toFile: directory + "/app", atomically: true, encoding: .utf8)
        chmod(directory + "/app", 0o755)
        let daemon = try DaemonUnderTest(desktopEntries: [
            DesktopEntrySpec(id: app, modes: ["fetch"], exec: "./app", workingDirectory: directory),
        ])
        try RawClient(daemon).call("Fetch", "SimulateFetch") { try $0.append(app) }
        let startedIn = try? String(contentsOfFile: directory + "/started-in", encoding: .utf8)
        #expect(startedIn == directory + "\n", "\(String(describing: startedIn)) \(daemon.log.suffix(1500))")
        #expect(daemon.stop() == .status(0))
    }

    @Test func entryThatCannotStartIsReportedNotRetried() throws {
        let daemon = try DaemonUnderTest(desktopEntries: [
            DesktopEntrySpec(id: "org.example.Broken", modes: ["fetch"], exec: "/nonexistent/broken-app --fetch"),
        ])
        let admin = try RawClient(daemon)
        // SimulateFetch waits for the launch, and says why it failed.
        let failed = #expect(throws: BusError.self) {
            try admin.call("Fetch", "SimulateFetch") { try $0.append("org.example.Broken") }
        }
        #expect(failed?.message.contains("cannot launch org.example.Broken") == true, "\(String(describing: failed))")
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

    /// A daemon killed while its launched apps run leaves their cgroups: the
    /// next start thaws them, removes the empty ones at once and the others
    /// when their processes are gone (the app in each is taken over).
    @Test(.enabled(if: IdentityTests.canMakeScopes, "needs root and a writable cgroup v2 hierarchy"))
    func cgroupsLeftByAKilledDaemonAreReclaimedAtTheNextStart() throws {
        let daemon = try DaemonUnderTest(
            settings: ["Fetch.WakeBudgetSec=60"],
            desktopEntries: [
                DesktopEntrySpec(id: "org.example.Quick", modes: ["fetch"], exec: "/bin/sleep 1"),
                DesktopEntrySpec(id: "org.example.Slow", modes: ["fetch"], exec: "/bin/sleep 60"),
            ])
        let admin = try RawClient(daemon)
        var cgroups: [String: String] = [:]
        for app in ["org.example.Quick", "org.example.Slow"] {
            // Neither checks in (SimulateFetch answers when the launch is settled): only their cgroups matter here.
            try admin.bus.send(try Self.simulateFetch(app, on: admin))
            admin.bus.flush()
            #expect(daemon.process.waitForStandardError(containing: "launched \(app) for fetch"), "\(daemon.log)")
            cgroups[app] = try Self.launchedCgroup(of: app, in: daemon)
        }
        let quick = try #require(cgroups["org.example.Quick"]), slow = try #require(cgroups["org.example.Slow"])
        daemon.process.send(SIGKILL)
        _ = daemon.process.waitForExit()
        // While no daemon runs: the quick app exits (its cgroup empties), the slow one is frozen.
        let emptied = ContinuousClock.now + .seconds(15)
        while (try? String(contentsOfFile: quick + "/cgroup.events", encoding: .utf8))?.contains("populated 1") == true,
              ContinuousClock.now < emptied {
            Thread.sleep(forTimeInterval: 0.05)
        }
        try "1".write(toFile: slow + "/cgroup.freeze", atomically: false, encoding: .utf8)
        #expect(FileManager.default.fileExists(atPath: quick))

        try daemon.crashAndRestart()
        #expect(!FileManager.default.fileExists(atPath: quick), "the empty cgroup is removed at start")
        #expect(daemon.waitForLog(containing: "removed 1 empty cgroups of apps launched by an earlier run"), "\(daemon.log)")
        #expect(daemon.waitForLog(containing: "thawed \(slow)"), "\(daemon.log)")
        // Thawing completes asynchronously (cgroup.events says when).
        let thawBy = ContinuousClock.now + .seconds(5)
        while (try? String(contentsOfFile: slow + "/cgroup.events", encoding: .utf8))?.contains("frozen 0") != true,
              ContinuousClock.now < thawBy { Thread.sleep(forTimeInterval: 0.02) }
        #expect((try? String(contentsOfFile: slow + "/cgroup.events", encoding: .utf8))?.contains("frozen 0") == true)
        // The app still running is taken over; once it is gone, its cgroup goes too.
        #expect(daemon.process.waitForStandardError(containing: "took over org.example.Slow (pid", timeout: .seconds(5)), "\(daemon.log)")
        try "1".write(toFile: slow + "/cgroup.kill", atomically: false, encoding: .utf8)
        let deadline = ContinuousClock.now + .seconds(10)
        while FileManager.default.fileExists(atPath: slow), ContinuousClock.now < deadline { Thread.sleep(forTimeInterval: 0.1) }
        #expect(!FileManager.default.fileExists(atPath: slow))
        #expect(daemon.stop() == .status(0))
    }

    /// An app launched for a fetch still runs when the daemon is killed. The
    /// next start takes it over as launched: when its SDK checks in again it
    /// is in the background, not the user's app, and is suspended (its
    /// cgroup frozen) once idle, as it was before; its exit is seen.
    @Test(.enabled(if: IdentityTests.canMakeScopes, "needs root and a writable cgroup v2 hierarchy"))
    func aLaunchedAppStillRunningAfterACrashIsTakenOverAsLaunched() throws {
        let app = "org.example.Survivor"
        var (daemon, admin, cgroup) = try Self.suspendedLaunch(of: app)

        try daemon.crashAndRestart()
        admin = try RawClient(daemon)
        #expect(daemon.waitForLog(containing: "took over \(app) (pid"), "\(daemon.log)")
        #expect(daemon.waitForLog(containing: "launched for fetch by an earlier run and still running"), "\(daemon.log)")
        // Thawed at the start, it checks in again, in the background, and is suspended when idle.
        let after = try admin.waitForAppState(app, in: ["background, suspended"])
        #expect(after == "background, suspended", "\(String(describing: after)) \(daemon.log.suffix(2000))")
        let frozenBy = ContinuousClock.now + .seconds(10)
        while (try? String(contentsOfFile: cgroup + "/cgroup.events", encoding: .utf8))?.contains("frozen 1") != true,
              ContinuousClock.now < frozenBy { Thread.sleep(forTimeInterval: 0.05) }
        #expect((try? String(contentsOfFile: cgroup + "/cgroup.events", encoding: .utf8))?.contains("frozen 1") == true)
        // Its end is seen, though it is not this daemon's child.
        try "1".write(toFile: cgroup + "/cgroup.kill", atomically: false, encoding: .utf8)
        #expect(daemon.waitForLog(containing: "\(app) exited: exited (its status is unknown"), "\(daemon.log)")
        let goneBy = ContinuousClock.now + .seconds(10)
        while try admin.appState(app) != "", ContinuousClock.now < goneBy { Thread.sleep(forTimeInterval: 0.05) }
        #expect(try admin.appState(app) == "", "listed for its desktop entry only: no state, not suspended")
        #expect(daemon.stop() == .status(0))
    }

    /// A daemon killed while an app it launched was frozen, whose freeze
    /// journal a full disk had kept from being written, left the app frozen
    /// for good when the next start gave up: that start thawed only what the
    /// journal names. It thaws the cgroups of its launches too.
    @Test(.enabled(if: IdentityTests.canMakeScopes, "needs root and a writable cgroup v2 hierarchy"))
    func aStartThatGivesUpThawsItsLaunchesWithoutTheJournal() throws {
        let (daemon, cgroup) = try Self.killedWithAFrozenLaunch(of: "org.example.Frozen")
        defer { Self.removeCgroup(cgroup) }
        // As a full disk would have left it: no journal; and a database the next start refuses.
        #expect(unlink(daemon.stateDirectory + "/bgtaskd.sqlite3.frozen") == 0 || errno == ENOENT)
        #expect(truncate(daemon.stateDirectory + "/bgtaskd.sqlite3", 0) == 0)
        let refused = try Self.startAgain(daemon, bus: daemon.bus.address)
        #expect(refused.exit == .status(65), "\(refused)")
        #expect(refused.standardError.contains("thawed 1 apps it launched left frozen"), "\(refused)")
        #expect(Self.waitForCgroup(cgroup, "frozen 0"), "\(refused)")
    }

    /// A start that opened its database and then stopped (no bus here; a
    /// full disk at its first write alike) left what a killed daemon had
    /// frozen frozen: only a refused database thawed it.
    @Test(.enabled(if: IdentityTests.canMakeScopes, "needs root and a writable cgroup v2 hierarchy"))
    func aStartWithNoBusThawsWhatWasLeftFrozen() throws {
        let (daemon, cgroup) = try Self.killedWithAFrozenLaunch(of: "org.example.Stranded")
        defer { Self.removeCgroup(cgroup) }
        let stopped = try Self.startAgain(daemon, bus: "unix:path=/nonexistent/bgtaskd-test-bus")
        #expect(stopped.exit == .status(69), "\(stopped)")
        #expect(Self.waitForCgroup(cgroup, "frozen 0"), "\(stopped)")
    }

    /// A daemon killed while the app it launched (the test app, for a fetch)
    /// was suspended in its cgroup, and that cgroup.
    static func killedWithAFrozenLaunch(of app: String) throws -> (DaemonUnderTest, cgroup: String) {
        let (daemon, _, cgroup) = try suspendedLaunch(of: app)
        #expect(waitForCgroup(cgroup, "frozen 1"), "\(daemon.log.suffix(1500))")
        daemon.process.send(SIGKILL)
        _ = daemon.process.waitForExit(timeout: .seconds(10))
        return (daemon, cgroup)
    }

    /// Whether the cgroup's `cgroup.events` says `state` within 10 s (freezing and thawing take a moment).
    static func waitForCgroup(_ cgroup: String, _ state: String) -> Bool {
        func events() -> String { (try? String(contentsOfFile: cgroup + "/cgroup.events", encoding: .utf8)) ?? "" }
        let deadline = ContinuousClock.now + .seconds(10)
        while !events().contains(state), ContinuousClock.now < deadline { Thread.sleep(forTimeInterval: 0.05) }
        return events().contains(state)
    }

    /// Kills what runs in a cgroup no daemon is left to remove, and removes it and its group.
    static func removeCgroup(_ cgroup: String) {
        try? "1".write(toFile: cgroup + "/cgroup.kill", atomically: false, encoding: .utf8)
        let goneBy = ContinuousClock.now + .seconds(10)
        while rmdir(cgroup) != 0, errno == EBUSY, ContinuousClock.now < goneBy { Thread.sleep(forTimeInterval: 0.05) }
        rmdir(URL(fileURLWithPath: cgroup).deletingLastPathComponent().path)
    }

    /// Another bgtaskd on `daemon`'s state and home, on `bus`, run to its end.
    static func startAgain(_ daemon: DaemonUnderTest, bus: String) throws -> CommandResult {
        try CommandResult.run(
            BinaryLocator.path(of: "bgtaskd"), ["--bus", bus, "--state-dir", daemon.stateDirectory],
            environment: ["HOME": daemon.home, "XDG_DATA_HOME": daemon.home + "/data", "XDG_CONFIG_HOME": daemon.home + "/config"])
    }

    /// A launched app working in a task when the daemon crashed lost the
    /// task: taken over, it checked in again with nothing open, was
    /// suspended as idle in the middle of its work and stayed frozen. Its
    /// SDK begins the task again now, and the app works on to its end.
    @Test(.enabled(if: IdentityTests.canMakeScopes, "needs root and a writable cgroup v2 hierarchy"))
    func aLaunchedAppWorkingInATaskWhenTheDaemonCrashesFinishesItsWork() throws {
        let app = "org.example.Busy"
        let testapp = BinaryLocator.path(of: "bgtaskd-testapp")
        // Work that outlasts the crash and the restart on a loaded machine,
        // and a life after it that outlasts the slowest restart seen (under
        // a full parallel run beside a release build, the app had gone by
        // then: 75 s). The cgroup's removal ends it.
        let daemon = try Self.daemonLaunching(app, exec: "\(testapp) --fetch-result newData --tasks 1 --work 15 --hold 600")
        let admin = try RawClient(daemon)
        try admin.call("Fetch", "SimulateFetch") { try $0.append(app) }
        let cgroup = try Self.launchedCgroup(of: app, in: daemon)
        defer { Self.removeCgroup(cgroup) }
        #expect(try daemon.waitForTasks { $0.contains(app) }.contains(app), "\(daemon.log.suffix(1500))")

        try daemon.crashAndRestart()
        #expect(daemon.waitForLog(containing: "took over \(app) (pid"), "\(daemon.log)")
        #expect(try daemon.waitForTasks { $0.contains(app) }.contains(app), "its task is begun again: \(daemon.log.suffix(1500))")
        // The work done, the app ends its task; then, idle, it is suspended.
        #expect(!(try daemon.waitForTasks(timeout: .seconds(60)) { !$0.contains(app) }).contains(app), "\(daemon.log.suffix(1500))")
        let again = try RawClient(daemon)
        #expect(try again.waitForAppState(app, in: ["background, suspended"]) == "background, suspended", "\(daemon.log.suffix(1500))")
        #expect(daemon.stop() == .status(0))
    }

    /// An app launched into a systemd scope still runs when the daemon is
    /// killed. Only apps in cgroups of the daemon's own were taken over, so it
    /// checked in again as the user's app: never suspended, held to no
    /// budget. Now it is taken over too. The mock user manager moves nothing
    /// into the scope, so the new run holds it by its pidfd and suspends it
    /// with SIGSTOP; its end is seen.
    @Test func anAppLaunchedIntoASystemdScopeIsTakenOverAfterACrash() throws {
        let bus = try PrivateBus()
        let manager = try ChildProcess("/usr/bin/python3", ["-m", "dbusmock", "--session", "--template", "systemd"], environment: bus.environment)
        defer { manager.stop() }
        let ready = ContinuousClock.now + .seconds(20)
        while try !CommandResult.run("/usr/bin/gdbus", [
            "call", "--address", bus.address, "--dest", "org.freedesktop.systemd1", "--object-path", "/org/freedesktop/systemd1",
            "--method", "org.freedesktop.DBus.Peer.Ping",
        ]).succeeded, ContinuousClock.now < ready { Thread.sleep(forTimeInterval: 0.05) }
        let app = "org.example.Scoped"
        let testapp = BinaryLocator.path(of: "bgtaskd-testapp")
        let daemon = try DaemonUnderTest(settings: ["Fetch.WakeBudgetSec=60"], bus: bus, desktopEntries: [
            DesktopEntrySpec(id: app, modes: ["fetch"], exec: "\(testapp) --fetch-result newData --tasks 0 --hold 120"),
        ])
        var admin = try RawClient(daemon)
        try admin.call("Fetch", "SimulateFetch") { try $0.append(app) }
        #expect(daemon.waitForLog(containing: "for fetch in systemd scope app-bgtaskd-"), "\(daemon.log)")
        let line = try #require(daemon.log.split(separator: "\n").first { $0.contains("launched \(app) (pid ") }, "\(daemon.log)")
        let pid = try #require(Int32(line.split(separator: "(pid ").last?.prefix { $0.isNumber } ?? ""), "\(line)")
        defer { kill(pid, SIGKILL) }
        #expect(try admin.waitForAppState(app, in: ["background, suspended"]) == "background, suspended", "done with its fetch: \(daemon.log.suffix(1500))")

        // A daemon on a copy of the database (a restored backup) leaves the app to the daemon that holds it.
        let copy = daemon.stateDirectory + "-copy"
        #expect(try CommandResult.run("/bin/cp", ["-a", daemon.stateDirectory, copy]).succeeded)
        let other = try DaemonUnderTest(stateDirectory: copy)
        #expect(other.waitForLog(containing: "not taking over pid \(pid) of \(app): another daemon launched it"), "\(other.log)")
        #expect(!other.log.contains("took over"), "\(other.log)")
        #expect(other.stop() == .status(0))
        try? FileManager.default.removeItem(atPath: copy)

        try daemon.crashAndRestart()
        admin = try RawClient(daemon)
        #expect(daemon.waitForLog(containing: "took over \(app) (pid \(pid)), "), "\(daemon.log)")
        #expect(daemon.waitForLog(containing: "launched for fetch by an earlier run and still running, held by its pidfd only"), "\(daemon.log)")
        // Thawed at the start (SIGCONT), it checks in again, in the background, and is stopped again when idle.
        let after = try admin.waitForAppState(app, in: ["background, suspended"])
        #expect(after == "background, suspended", "\(String(describing: after)) \(daemon.log.suffix(2000))")
        #expect(Self.waitForProcessState(pid, "T"), "stopped when idle: \(daemon.log.suffix(1500))")
        kill(pid, SIGKILL)
        #expect(daemon.waitForLog(containing: "\(app) exited: exited (its status is unknown"), "\(daemon.log)")
        #expect(daemon.stop() == .status(0))
    }

    /// Waits up to 10 s for `/proc/PID/stat` to show `state` (`T`: stopped).
    static func waitForProcessState(_ pid: Int32, _ state: String) -> Bool {
        let deadline = ContinuousClock.now + .seconds(10)
        while ContinuousClock.now < deadline {
            if let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8), let close = stat.lastIndex(of: ")"),
               stat[stat.index(after: close)...].split(separator: " ").first.map(String.init) == state { return true }
            Thread.sleep(forTimeInterval: 0.05)
        }
        return false
    }

    /// An app that exited and left a helper running in its cgroup: after a
    /// crash the helper was taken over as the app (it inherited the launch
    /// reason), so the app was never launched again and each wake ended in
    /// an offence and a SIGTERM of the helper. Only the very process that was
    /// launched is taken over; the app is launched again for its next fetch.
    @Test(.enabled(if: IdentityTests.canMakeScopes, "needs root and a writable cgroup v2 hierarchy"))
    func aHelperTheAppLeftBehindIsNotTakenOverAsTheApp() throws {
        let (scratch, script) = try Self.scriptInScratch("#!/bin/sh\nsleep 120 &\nexit 0\n")
        defer { try? FileManager.default.removeItem(atPath: scratch) }
        let app = "org.example.Leftover"
        let daemon = try Self.daemonLaunching(app, exec: script, wakeBudget: 3)
        let admin = try RawClient(daemon)
        try admin.bus.send(try Self.simulateFetch(app, on: admin))
        admin.bus.flush()
        // Generous: under a full parallel run, launches wait for the CPU.
        #expect(daemon.waitForLog(containing: "\(app) exited", timeout: .seconds(40)), "\(daemon.log)")
        let cgroup = try Self.launchedCgroup(of: app, in: daemon)
        defer { try? "1".write(toFile: cgroup + "/cgroup.kill", atomically: false, encoding: .utf8) }

        try daemon.crashAndRestart()
        let again = try RawClient(daemon)
        #expect(daemon.waitForLog(containing: "ready"), "\(daemon.log)")
        try again.bus.send(try Self.simulateFetch(app, on: again))
        again.bus.flush()
        #expect(daemon.waitForLog(containing: "launched \(app) for fetch", timeout: .seconds(40)), "launched again: \(daemon.log.suffix(2000))")
        #expect(!daemon.log.contains("took over \(app)"), "\(daemon.log.suffix(2000))")
        #expect(daemon.stop() == .status(0))
    }

    /// A copy of the app the user started while the daemon's launch of it
    /// was starting checked in first and was taken for the launched one:
    /// told the launch's reason, put in the background, and terminated when
    /// it missed the wake (found by an outside test). It is the user's
    /// (reason `user`, in the foreground), and is never terminated.
    @Test(.enabled(if: IdentityTests.canMakeScopes, "needs root and a writable cgroup v2 hierarchy"))
    func aCopyTheUserStartsWhileTheLaunchStartsIsTheUsers() throws {
        let testapp = BinaryLocator.path(of: "bgtaskd-testapp")
        // The launched app starts once the test says so: after the user's copy checked in.
        let (scratch, script) = try Self.scriptInScratch { directory in
            "while [ ! -e '\(directory)/go' ]; do sleep 0.1; done\nexec '\(testapp)' --tasks 0 --hold 30\n"
        }
        defer { try? FileManager.default.removeItem(atPath: scratch) }
        let app = "org.example.Slow"
        // The launched app must check in within the budget, after the copy
        // started and checked in: room for a machine busy with the suite.
        let daemon = try Self.daemonLaunching(app, exec: script, wakeBudget: 8)
        let admin = try RawClient(daemon)
        try admin.bus.send(try Self.simulateFetch(app, on: admin))
        admin.bus.flush()
        #expect(daemon.waitForLog(containing: "launched \(app) for fetch"), "\(daemon.log)")
        let copy = try daemon.startTestApp(["--app-id", app, "--tasks", "0", "--hold", "30"])
        defer { copy.stop() }
        let ready = copy.waitForEvent("ready")
        #expect(ready?["reason"] as? String == "user", "\(copy.lines)")
        FileManager.default.createFile(atPath: scratch + "/go", contents: nil)
        // The launched one checks in as such when its script gets to it.
        #expect(daemon.waitForLog(containing: "pending=0 reason=fetch", timeout: .seconds(20)), "\(daemon.log.suffix(2000))")
        // Past the wake's budget: the user's copy was not terminated for it.
        #expect(daemon.waitForLog(containing: "\(app) did not complete its fetch within", timeout: .seconds(30)), "\(daemon.log.suffix(2000))")
        Thread.sleep(forTimeInterval: 1)
        #expect(copy.events(named: "sigterm").isEmpty, "\(copy.lines) \(daemon.log.suffix(2000))")
        #expect(!daemon.log.contains("SIGTERM pid=\(ready?["pid"] as? Int ?? -1)"), "\(daemon.log.suffix(2000))")
        #expect(daemon.stop() == .status(0))
    }

    /// A desktop entry whose Exec is a script that starts the app and
    /// returns: the script's exit, before the app checked in, failed the
    /// launch, and the app, which checked in a moment later, was taken for
    /// one the user opened: no fetch, foreground. The launch goes on in its
    /// cgroup, and the app gets its fetch.
    @Test(.enabled(if: IdentityTests.canMakeScopes, "needs root and a writable cgroup v2 hierarchy"))
    func aLauncherScriptThatStartsTheAppAndReturnsHandsItTheLaunch() throws {
        let testapp = BinaryLocator.path(of: "bgtaskd-testapp")
        let (scratch, script) = try Self.scriptInScratch(
            // 2 s: the daemon sees the script end before the app checks in, even on a busy machine.
            "#!/bin/sh\n( sleep 2; exec '\(testapp)' --fetch-result newData --tasks 0 --hold 30 & )\nexit 0\n")
        defer { try? FileManager.default.removeItem(atPath: scratch) }
        let app = "org.example.Forking"
        let daemon = try Self.daemonLaunching(app, exec: script)
        let admin = try RawClient(daemon)
        #expect(throws: Never.self, "\(daemon.log.suffix(2000))") { try admin.call("Fetch", "SimulateFetch") { try $0.append(app) } }
        #expect(daemon.waitForLog(containing: "\(app) completed its fetch"), "\(daemon.log.suffix(2000))")
        #expect(daemon.log.contains("\(app) has not checked in, and processes of its launch remain"), "\(daemon.log.suffix(2000))")
        #expect(!daemon.log.contains("without checking in"), "\(daemon.log.suffix(2000))")
        // Still the launched instance: done with its event, it is suspended.
        let state = try admin.waitForAppState(app, in: ["background, suspended"])
        #expect(state == "background, suspended", "\(String(describing: state)) \(daemon.log.suffix(2000))")
        #expect(daemon.log.contains("\(app) checked in from pid"), "\(daemon.log.suffix(2000))")
        #expect(daemon.stop() == .status(0))
    }

    /// The same with an app that checks in before its launcher script exits
    /// (and is busy with a task meanwhile, so not suspended with the script):
    /// the script's exit ended the launch, and the app ran on as one the
    /// user opened, never suspended.
    @Test(.enabled(if: IdentityTests.canMakeScopes, "needs root and a writable cgroup v2 hierarchy"))
    func anAppThatChecksInBeforeItsLauncherScriptExitsIsStillTheLaunch() throws {
        let testapp = BinaryLocator.path(of: "bgtaskd-testapp")
        let (scratch, script) = try Self.scriptInScratch(
            "#!/bin/sh\n( exec '\(testapp)' --fetch-result newData --tasks 1 --end-after 4 --hold 30 & )\nsleep 1\nexit 0\n")
        defer { try? FileManager.default.removeItem(atPath: scratch) }
        let app = "org.example.Lingering"
        let daemon = try Self.daemonLaunching(app, exec: script)
        let admin = try RawClient(daemon)
        try admin.call("Fetch", "SimulateFetch") { try $0.append(app) }
        #expect(daemon.waitForLog(containing: "\(app) completed its fetch"), "\(daemon.log.suffix(2000))")
        #expect(daemon.waitForLog(containing: "\(app) checked in from pid", timeout: .seconds(20)), "\(daemon.log.suffix(2000))")
        let state = try admin.waitForAppState(app, in: ["background, suspended"])
        #expect(state == "background, suspended", "\(String(describing: state)) \(daemon.log.suffix(2000))")
        #expect(daemon.stop() == .status(0))
    }

    /// A copy of the app the user opened checked in while the launch was
    /// pending, and the app the launcher script started checked in after
    /// it: when the script exited, the launch was looked for in the user's
    /// copy only, and ended, leaving the script's app unsuspended (found in
    /// review). It goes on as the process that checked in from the launch.
    @Test(.enabled(if: IdentityTests.canMakeScopes, "needs root and a writable cgroup v2 hierarchy"))
    func aCopyTheUserOpenedDoesNotHideTheLaunchFromItsScriptsApp() throws {
        let testapp = BinaryLocator.path(of: "bgtaskd-testapp")
        let (scratch, script) = try Self.scriptInScratch(
            "#!/bin/sh\n( sleep 1; exec '\(testapp)' --tasks 1 --end-after 4 --hold 30 & )\nsleep 3\nexit 0\n")
        defer { try? FileManager.default.removeItem(atPath: scratch) }
        let app = "org.example.Opened"
        let daemon = try Self.daemonLaunching(app, exec: script)
        let admin = try RawClient(daemon)
        try admin.bus.send(try Self.simulateFetch(app, on: admin))
        admin.bus.flush()
        #expect(daemon.waitForLog(containing: "launched \(app) for fetch"), "\(daemon.log)")
        let byHand = try RawClient(daemon)
        try byHand.call("Manager", "CheckIn") { try $0.append(app) }
        #expect(daemon.waitForLog(containing: "\(app) checked in from pid", timeout: .seconds(20)), "\(daemon.log.suffix(2000))")
        #expect(daemon.stop() == .status(0))
    }

    /// An app a launcher script started checked in, did its work and
    /// exited, leaving a helper: the launch lived on in the helper, and the
    /// next event waited out its budget for an app that was gone, counted
    /// an offence and killed the helper (found in review). The launch ends
    /// with the app; the next event launches it again.
    @Test(.enabled(if: IdentityTests.canMakeScopes, "needs root and a writable cgroup v2 hierarchy"))
    func aLaunchEndsWithTheAppItsScriptStartedNotWithWhatTheAppLeft() throws {
        let testapp = BinaryLocator.path(of: "bgtaskd-testapp")
        let (scratch, script) = try Self.scriptInScratch(
            "#!/bin/sh\nsleep 120 &\n( sleep 0.3; exec '\(testapp)' --fetch-result newData --tasks 0 --hold 30 & )\nexit 0\n")
        defer { try? FileManager.default.removeItem(atPath: scratch) }
        let app = "org.example.Leaving"
        let daemon = try Self.daemonLaunching(app, exec: script)
        defer {
            // What the launches left (the helper, the second app).
            for line in daemon.log.split(separator: "\n") where line.contains("launched \(app)") && line.contains(" in /") {
                try? "1".write(toFile: String(line.split(separator: " in ").last!) + "/cgroup.kill", atomically: false, encoding: .utf8)
            }
        }
        let admin = try RawClient(daemon)
        try admin.call("Fetch", "SimulateFetch") { try $0.append(app) }
        #expect(daemon.waitForLog(containing: "\(app) completed its fetch"), "\(daemon.log.suffix(2000))")
        // The app ends (killed: once done it may be frozen already, and a
        // frozen app would not end by itself as `--hold 1` had it).
        let checkedIn = try #require(daemon.log.components(separatedBy: "\(app) checked in from pid ").dropFirst().first)
        let pid = try #require(Int32(checkedIn.prefix { $0.isNumber }))
        #expect(kill(pid, SIGKILL) == 0)
        #expect(daemon.waitForLog(containing: "\(app) exited", timeout: .seconds(20)), "\(daemon.log.suffix(2000))")
        try admin.call("Fetch", "SimulateFetch") { try $0.append(app) }
        #expect(daemon.log.components(separatedBy: "launched \(app) for fetch").count == 3, "launched again: \(daemon.log.suffix(2000))")
        #expect(daemon.waitForLog(containing: "\(app) completed its fetch", timeout: .seconds(20)))
        #expect(!daemon.log.contains("did not complete its fetch wake in time"), "\(daemon.log.suffix(2000))")
        #expect(daemon.stop() == .status(0))
    }

    /// A launched app terminated for overstaying went alone: a process it
    /// had started ran on in its cgroup, with no budget and never frozen.
    @Test(.enabled(if: IdentityTests.canMakeScopes, "needs root and a writable cgroup v2 hierarchy"))
    func anAppTerminatedForOverstayingTakesWhatItStartedWithIt() throws {
        let testapp = BinaryLocator.path(of: "bgtaskd-testapp")
        let (scratch, script) = try Self.scriptInScratch { directory in """
            #!/bin/sh
            sleep 120 &
            echo $! > '\(directory)/helper.pid'
            ( trap '' TERM; exec sleep 120 ) &
            echo $! > '\(directory)/stubborn.pid'
            exec '\(testapp)' --fetch-result never --tasks 0

            """
        }
        defer { try? FileManager.default.removeItem(atPath: scratch) }
        let pidFile = scratch + "/helper.pid"
        let stubbornFile = scratch + "/stubborn.pid"
        let app = "org.example.Helped"
        let daemon = try DaemonUnderTest(settings: ["Fetch.WakeBudgetSec=2", "Tasks.KillGraceSec=1"], desktopEntries: [
            DesktopEntrySpec(id: app, modes: ["fetch"], exec: script),
        ])
        let admin = try RawClient(daemon)
        try admin.bus.send(try Self.simulateFetch(app, on: admin))
        admin.bus.flush()
        #expect(daemon.waitForLog(containing: "\(app) did not complete its fetch wake in time", timeout: .seconds(40)), "\(daemon.log)")
        #expect(daemon.waitForLog(containing: "\(app) exited", timeout: .seconds(20)), "\(daemon.log.suffix(2000))")
        let helper = try #require(Int32(try String(contentsOfFile: pidFile, encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)))
        let deadline = ContinuousClock.now + .seconds(10)
        while Self.isRunning(helper), ContinuousClock.now < deadline { Thread.sleep(forTimeInterval: 0.05) }
        #expect(!Self.isRunning(helper), "the helper went with the app: \(daemon.log.suffix(2000))")
        if Self.isRunning(helper) { kill(helper, SIGKILL) }
        // One that ignores SIGTERM gets SIGKILL after the grace, though the app itself obeyed SIGTERM.
        let stubborn = try #require(Int32(try String(contentsOfFile: stubbornFile, encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)))
        while Self.isRunning(stubborn), ContinuousClock.now < deadline + .seconds(10) { Thread.sleep(forTimeInterval: 0.05) }
        #expect(!Self.isRunning(stubborn), "the helper that ignores SIGTERM went too: \(daemon.log.suffix(2000))")
        if Self.isRunning(stubborn) { kill(stubborn, SIGKILL) }
        #expect(daemon.stop() == .status(0))
    }

    /// Whether `pid` runs (a zombie has ended).
    static func isRunning(_ pid: Int32) -> Bool {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8), let close = stat.lastIndex(of: ")") else { return false }
        return stat[stat.index(after: close)...].split(separator: " ").first != "Z"
    }

    /// An app uninstalled while the instance launched for it was suspended:
    /// it stayed frozen until the daemon stopped, as no event could reach it.
    @Test func anUninstalledAppsLaunchedInstanceIsStopped() throws {
        let app = "org.example.Gone"
        let testapp = BinaryLocator.path(of: "bgtaskd-testapp")
        let daemon = try DaemonUnderTest(desktopEntries: [
            DesktopEntrySpec(id: app, modes: ["fetch"], exec: "\(testapp) --fetch-result newData --tasks 0 --hold 120"),
        ])
        let admin = try RawClient(daemon)
        try admin.call("Fetch", "SimulateFetch") { try $0.append(app) }
        #expect(daemon.waitForLog(containing: "\(app) completed its fetch"), "\(daemon.log.suffix(1500))")
        unlink(daemon.applicationsDirectory + "/\(app).desktop")
        #expect(daemon.waitForLog(containing: "\(app)'s desktop entry is gone: stopping the instance launched for it"), "\(daemon.log.suffix(1500))")
        #expect(daemon.waitForLog(containing: "\(app) is uninstalled: SIGTERM to the instance launched for it"), "\(daemon.log.suffix(1500))")
        #expect(daemon.waitForLog(containing: "\(app) exited: exited with code 143"), "the test app exits 143 on SIGTERM: \(daemon.log.suffix(1500))")
        #expect(!daemon.log.contains("\(app) overstayed"), "\(daemon.log.suffix(1500))")
        #expect(daemon.stop() == .status(0))
    }

    /// A launched app the user brought to the foreground is still in the
    /// foreground after the daemon crashed and took it over: its SDK says so
    /// again, and it is not suspended under the user.
    @Test(.enabled(if: IdentityTests.canMakeScopes, "needs root and a writable cgroup v2 hierarchy"))
    func aLaunchedAppTheUserOpenedStaysInTheForegroundAfterACrash() throws {
        let app = "org.example.Opened"
        let testapp = BinaryLocator.path(of: "bgtaskd-testapp")
        let daemon = try Self.daemonLaunching(app, exec: "\(testapp) --fetch-result newData --tasks 0 --foreground --hold 120")
        var admin = try RawClient(daemon)
        try admin.call("Fetch", "SimulateFetch") { try $0.append(app) }
        #expect(try admin.waitForAppState(app, in: ["active"]) == "active", "\(daemon.log.suffix(1500))")
        // Done with its fetch first: the test app exits when its completion fails, as it would if the crash took it.
        #expect(daemon.waitForLog(containing: "\(app) completed its fetch"), "\(daemon.log.suffix(1500))")
        let cgroup = try Self.launchedCgroup(of: app, in: daemon)
        try daemon.crashAndRestart()
        admin = try RawClient(daemon)
        #expect(daemon.waitForLog(containing: "took over \(app) (pid"), "\(daemon.log)")
        #expect(daemon.waitForLog(containing: "application state caller="), "\(daemon.log)")
        #expect(try admin.waitForAppState(app, in: ["active"]) == "active", "\(daemon.log.suffix(1500))")
        // Well past the idle grace: still not suspended.
        Thread.sleep(forTimeInterval: 2)
        #expect(try admin.appState(app) == "active")
        try "1".write(toFile: cgroup + "/cgroup.kill", atomically: false, encoding: .utf8)
        #expect(daemon.waitForLog(containing: "\(app) exited"), "\(daemon.log)")
        #expect(daemon.stop() == .status(0))
    }

    /// An app launched for a fetch whose first call asks for its background
    /// time is told the fetch's budget, not a foreground app's DBL_MAX. (The
    /// call comes from a child of the launched shell: the app's cgroup names it.)
    @Test(.enabled(if: IdentityTests.canMakeScopes, "needs root and a writable cgroup v2 hierarchy"))
    func aLaunchedAppsFirstCallForItsTimeAnswersTheEventsBudget() throws {
        let (scratch, script) = try Self.scriptInScratch("""
            #!/bin/sh
            busctl --address="$DBUS_SESSION_BUS_ADDRESS" call org.bgtaskd.BackgroundTasks1 /org/bgtaskd/BackgroundTasks1 \\
                org.bgtaskd.BackgroundTasks1.Manager GetBackgroundTimeRemaining > "$1.part" 2>&1
            mv "$1.part" "$1"
            """)
        defer { try? FileManager.default.removeItem(atPath: scratch) }
        let answer = scratch + "/answer"
        let app = "org.example.AskFirst"
        let daemon = try Self.daemonLaunching(app, exec: "\(script) \(answer)", wakeBudget: 40)
        let admin = try RawClient(daemon)
        // Answered once the launch is settled; the app never completes the fetch.
        try admin.bus.send(try Self.simulateFetch(app, on: admin))
        admin.bus.flush()
        let deadline = ContinuousClock.now + .seconds(15)
        while !FileManager.default.fileExists(atPath: answer), ContinuousClock.now < deadline { Thread.sleep(forTimeInterval: 0.05) }
        let text = try String(contentsOfFile: answer, encoding: .utf8)
        let seconds = try #require(Double(text.split(separator: " ").last?.trimmingCharacters(in: .whitespacesAndNewlines) ?? ""), "\(text)")
        #expect(seconds > 30 && seconds <= 40, "\(text)")
        #expect(daemon.stop() == .status(0))
    }

    /// Groups of daemons that are gone (other state directories), whose apps
    /// exited after them, are removed at start; a group with a process in it
    /// is left alone.
    @Test(.enabled(if: IdentityTests.canMakeScopes, "needs root and a writable cgroup v2 hierarchy"))
    func emptyGroupsOfOtherDaemonsAreRemovedAtStart() throws {
        let tag = "\(getpid())\(Int.random(in: 0..<1_000_000))"
        let empty = "\(IdentityTests.cgroupRoot)/bgtaskd-apps-emptytest\(tag)"
        let busy = "\(IdentityTests.cgroupRoot)/bgtaskd-apps-busytest\(tag)"
        for group in [empty, busy] {
            try FileManager.default.createDirectory(
                atPath: group + "/app-bgtaskd-org.example.Gone-0000abcd.scope", withIntermediateDirectories: true)
        }
        let sleeper = try ChildProcess("/bin/sh", [
            "-c", "echo $$ > '\(busy)/app-bgtaskd-org.example.Gone-0000abcd.scope/cgroup.procs' && exec sleep 60",
        ])
        defer {
            sleeper.stop()
            sleeper.waitForExit()
            rmdir(busy + "/app-bgtaskd-org.example.Gone-0000abcd.scope")
            rmdir(busy)
            rmdir(empty + "/app-bgtaskd-org.example.Gone-0000abcd.scope")
            rmdir(empty)
        }
        // The sleeper is in the busy group before the daemon looks.
        let by = ContinuousClock.now + .seconds(5)
        while (try? String(contentsOfFile: busy + "/cgroup.events", encoding: .utf8))?.contains("populated 1") != true,
              ContinuousClock.now < by { Thread.sleep(forTimeInterval: 0.02) }

        let daemon = try DaemonUnderTest()
        #expect(!FileManager.default.fileExists(atPath: empty), "\(daemon.log)")
        // (Which daemon logged the removal depends on the tests running alongside.)
        #expect(FileManager.default.fileExists(atPath: busy + "/app-bgtaskd-org.example.Gone-0000abcd.scope"))
        #expect(daemon.stop() == .status(0))
    }

    @Test func launchedAppThatNeverAnswersIsTerminatedAfterTheBudget() throws {
        let daemon = try DaemonUnderTest(
            settings: ["Fetch.WakeBudgetSec=2", "Tasks.KillGraceSec=1"],
            desktopEntries: [DesktopEntrySpec(id: "org.example.Silent", modes: ["fetch"], exec: "/bin/sleep 60")])
        let admin = try RawClient(daemon)
        let started = ContinuousClock.now
        // It never checks in: SimulateFetch says so once the budget has run out.
        let silentError = #expect(throws: BusError.self) {
            try admin.call("Fetch", "SimulateFetch") { try $0.append("org.example.Silent") }
        }
        #expect(silentError?.message.contains("never checked in") == true, "\(String(describing: silentError))")
        #expect(daemon.process.waitForStandardError(containing: "launched org.example.Silent for fetch"), "\(daemon.log)")
        #expect(daemon.process.waitForStandardError(containing: "org.example.Silent exited: killed by SIGTERM", timeout: .seconds(15)),
                "\(daemon.log)")
        #expect(ContinuousClock.now - started >= .milliseconds(1800), "not before its budget")
        #expect(daemon.waitForLog(containing: "org.example.Silent did not complete its fetch wake in time"))
        let silent = try admin.applications().first { $0["app_id"] == .string("org.example.Silent") }
        #expect(silent?["fetch_offences"] == .uint64(1), "\(String(describing: silent))")
        #expect(daemon.stop() == .status(0))
    }

    /// A shell script of `text` in a fresh directory of its own (the caller
    /// removes it): the directory and the command line that runs the script.
    ///
    /// The command runs the script with `/bin/sh` rather than executing it:
    /// Foundation writes the file through a descriptor without O_CLOEXEC, and
    /// a process another test forks at that moment holds it open for writing
    /// until its exec, during which executing the script fails with ETXTBSY
    /// (seen in CI). `sh` only reads it.
    static func scriptInScratch(_ text: String) throws -> (directory: String, command: String) {
        try scriptInScratch { _ in text }
    }

    /// The same with a script that names files in its directory: `text` is
    /// given the directory.
    static func scriptInScratch(_ text: (_ directory: String) -> String) throws -> (directory: String, command: String) {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("bgtaskd-script-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let path = directory + "/app.sh"
        try text(directory).write(toFile: path, atomically: true, encoding: .utf8)
        return (directory, "/bin/sh \(path)")
    }

    /// A daemon whose one app, `app`, declares the fetch mode and is launched with `exec`.
    static func daemonLaunching(_ app: String, exec: String, wakeBudget: Int = 60) throws -> DaemonUnderTest {
        try DaemonUnderTest(settings: ["Fetch.WakeBudgetSec=\(wakeBudget)"], desktopEntries: [
            DesktopEntrySpec(id: app, modes: ["fetch"], exec: exec),
        ])
    }

    /// A daemon that launched `app` (the test app) for a fetch into a cgroup
    /// of its own, and suspended it once it was done; with a client, and that cgroup.
    static func suspendedLaunch(of app: String) throws -> (DaemonUnderTest, RawClient, cgroup: String) {
        let testapp = BinaryLocator.path(of: "bgtaskd-testapp")
        let daemon = try Self.daemonLaunching(app, exec: "\(testapp) --fetch-result newData --tasks 0 --hold 120")
        let admin = try RawClient(daemon)
        try admin.call("Fetch", "SimulateFetch") { try $0.append(app) }
        let cgroup = try launchedCgroup(of: app, in: daemon)
        #expect(try admin.waitForAppState(app, in: ["background, suspended"]) == "background, suspended", "done with its fetch: \(daemon.log.suffix(1500))")
        return (daemon, admin, cgroup)
    }

    /// The cgroup the daemon launched `app` into, from its log line ("launched … in /sys/fs/cgroup/…").
    static func launchedCgroup(of app: String, in daemon: DaemonUnderTest) throws -> String {
        let line = try #require(daemon.log.split(separator: "\n").first {
            $0.contains("launched") && $0.contains(app) && $0.contains(" in /")
        }, "\(daemon.log)")
        return String(try #require(line.split(separator: " in ").last))
    }

    /// A SimulateFetch call for `app`, to send without waiting for its answer.
    static func simulateFetch(_ app: String, on client: RawClient) throws -> Message {
        let message = try client.bus.newMethodCall(
            destination: "org.bgtaskd.BackgroundTasks1", path: "/org/bgtaskd/BackgroundTasks1",
            interface: "org.bgtaskd.BackgroundTasks1.Fetch", member: "SimulateFetch")
        try message.append(app)
        return message
    }
}
