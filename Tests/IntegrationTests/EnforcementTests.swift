import BgTaskTestKit
import Foundation
import Testing

/// Deadlines enforced on real processes. Budgets are small and margins generous:
/// these tests check behaviour, the benchmark checks timing.
@Suite struct EnforcementTests {
    static let budget = ["Tasks.BudgetSec=2", "Tasks.WarningSec=1", "Tasks.KillGraceSec=2"]

    @Test func overstayingAppIsWarnedThenTerminated() throws {
        let daemon = try DaemonUnderTest(settings: Self.budget)
        let app = try daemon.startTestApp(["--name", "upload", "--background"])
        #expect(app.waitForEvent("begun") != nil, "\(app.lines) \(app.standardError)")
        #expect(app.waitForEvent("state") != nil)
        let backgroundAt = ContinuousClock.now
        let expiring = try #require(app.waitForEvent("expiring"), "\(app.lines)")
        let warnedAfter = ContinuousClock.now - backgroundAt
        #expect(warnedAfter < .milliseconds(1900), "warned \(warnedAfter) after going to the background")
        #expect((expiring["seconds_left"] as? Double ?? -1) <= 1.0)
        let exit = app.waitForExit(timeout: .seconds(10))
        #expect(exit == .status(143), "the test app exits 143 after catching SIGTERM")
        #expect(app.eventNames.contains("sigterm"))
        // TaskExpired is taken in before SIGTERM comes: the app's handler has run.
        let names = app.eventNames
        #expect((names.firstIndex(of: "expired") ?? .max) < (names.firstIndex(of: "sigterm") ?? -1), "\(names)")
        // Measured from when the test read "state", which may lag: a margin for it.
        #expect(ContinuousClock.now - backgroundAt >= .milliseconds(1000))
        #expect(daemon.waitForLog(containing: "overstayed its background time: SIGTERM"))
        #expect(try daemon.waitForTasks { $0 == "a(ussd) 0" } == "a(ussd) 0")
        #expect(daemon.stop() == .status(0))
    }

    /// An overstaying app that closes its bus connection when TaskExpired
    /// comes: the SIGTERM, which waits for the app to take TaskExpired in,
    /// found the process's handle closed with its last connection, and the
    /// app ran on, unsignalled and unlogged.
    @Test func anAppThatLeavesTheBusOnTaskExpiredIsStillTerminated() throws {
        let daemon = try DaemonUnderTest(settings: Self.budget)
        let script = """
            import dbus, os
            from dbus.mainloop.glib import DBusGMainLoop
            from gi.repository import GLib
            DBusGMainLoop(set_as_default=True)
            bus = dbus.bus.BusConnection(os.environ["DBUS_SESSION_BUS_ADDRESS"])
            manager = dbus.Interface(bus.get_object("org.bgtaskd.BackgroundTasks1", "/org/bgtaskd/BackgroundTasks1"),
                                     "org.bgtaskd.BackgroundTasks1.Manager")
            def expired(task):
                bus.close()
                print("closed", flush=True)
            bus.add_signal_receiver(expired, signal_name="TaskExpired", dbus_interface="org.bgtaskd.BackgroundTasks1.Manager")
            manager.BeginBackgroundTask("stay")
            manager.SetApplicationState("background")
            print("background", flush=True)
            GLib.timeout_add(15000, lambda: os._exit(0))
            GLib.MainLoop().run()
            """
        let app = try ChildProcess("/usr/bin/python3", ["-c", script], environment: daemon.environment)
        defer { _ = app.stop() }
        #expect(app.waitForLine(timeout: .seconds(10), where: { $0 == "closed" }) != nil, "\(app.lines) \(app.standardError) \(daemon.log)")
        #expect(app.waitForExit(timeout: .seconds(10)) == .signal(SIGTERM), "\(app.lines) \(daemon.log.suffix(2000))")
        #expect(daemon.waitForLog(containing: "overstayed its background time: SIGTERM"), "\(daemon.log.suffix(2000))")
        #expect(daemon.stop() == .status(0))
    }

    /// A process of the same user may claim an app and send it to the
    /// background; the app's own process, which never asked for the
    /// background, then has its task expire but is not terminated. Before,
    /// the claimant got it SIGTERMed (and SIGKILLed).
    @Test func anotherProcessThatSendsTheAppToTheBackgroundCannotHaveItTerminated() throws {
        let daemon = try DaemonUnderTest(settings: Self.budget)
        let app = try daemon.startTestApp(["--app-id", "org.example.Victim", "--name", "work"])
        #expect(app.waitForEvent("begun") != nil, "\(app.lines) \(app.standardError)")
        let claimant = try RawClient(daemon)
        try claimant.call("Manager", "CheckIn") { try $0.append("org.example.Victim") }
        try claimant.call("Manager", "SetApplicationState") { try $0.append("background") }
        #expect(app.waitForEvent("expired") != nil, "its task expires with the app's clock: \(app.lines)")
        #expect(daemon.waitForLog(containing: "never asked for the background"), "\(daemon.log.suffix(2000))")
        // Past the grace a SIGKILL would have come after: still running, no SIGTERM seen.
        Thread.sleep(forTimeInterval: 3)
        #expect(app.isRunning, "\(app.lines)")
        #expect(!app.eventNames.contains("sigterm"), "\(app.lines)")
        #expect(!daemon.log.contains("overstayed its background time: SIGTERM"), "\(daemon.log.suffix(2000))")
        _ = app.stop()
        #expect(daemon.stop() == .status(0))
    }

    /// Python every forking test script starts with: the imports, and
    /// - `sockets()`: the descriptors of the process's sockets;
    /// - `connect()`: a new bus connection and the descriptors it opened;
    /// - `manager(bus)`: the daemon's Manager on a connection;
    /// - `detach()`: a forked child off the test's pipes (the test sees its
    ///   parent's exit at once);
    /// - `note_sigterm(marker)`: on SIGTERM, write "sigterm" to `marker` and exit;
    /// - `park(sender, reader, fd)`: send `fd` over `sender` in a message to
    ///   the connection `reader` after enough that it does not read for the
    ///   bus daemon to queue it, descriptor and all.
    static let pythonHelpers = """
        import dbus, dbus.lowlevel, os, signal, sys, time
        def sockets():
            found = set()
            for fd in os.listdir("/proc/self/fd"):
                try:
                    if os.readlink("/proc/self/fd/" + fd).startswith("socket:"):
                        found.add(int(fd))
                except OSError:
                    pass
            return found
        def connect():
            before = sockets()
            bus = dbus.bus.BusConnection(address)
            return bus, sockets() - before
        def manager(bus):
            return dbus.Interface(bus.get_object("org.bgtaskd.BackgroundTasks1", "/org/bgtaskd/BackgroundTasks1"),
                                  "org.bgtaskd.BackgroundTasks1.Manager")
        def detach():
            null = os.open(os.devnull, os.O_RDWR)
            for fd in (0, 1, 2):
                os.dup2(null, fd)
        def note_sigterm(marker):
            def terminated(number, frame):
                with open(marker, "w") as f:
                    f.write("sigterm")
                os._exit(0)
            signal.signal(signal.SIGTERM, terminated)
        def park(sender, reader, fd):
            for _ in range(200):
                message = dbus.lowlevel.MethodCallMessage(reader, "/x", "x.y", "Fill")
                message.append("x" * 60000, signature="s")
                message.set_no_reply(True)
                sender.send_message(message)
            message = dbus.lowlevel.MethodCallMessage(reader, "/x", "x.y", "Park")
            message.append(dbus.types.UnixFd(fd), signature="h")
            message.set_no_reply(True)
            sender.send_message(message)
            sender.flush()
        address = os.environ["DBUS_SESSION_BUS_ADDRESS"]
        """

    /// A marker file's path for a test's child to write to (removed with `defer`).
    static func markerPath(_ kind: String) -> String {
        FileManager.default.temporaryDirectory.appendingPathComponent("bgtaskd-\(kind)-\(UUID())").path
    }

    /// Whether the child noted SIGTERM in `marker`.
    static func gotSigterm(_ marker: String) -> Bool { (try? String(contentsOfFile: marker, encoding: .utf8)) == "sigterm" }

    /// Waits up to 10 s for the child to note SIGTERM in `marker`. The child
    /// creates the file before it writes it: the content is waited for, not the file.
    static func waitForSigterm(_ marker: String) -> Bool {
        let deadline = ContinuousClock.now + .seconds(10)
        while !gotSigterm(marker), ContinuousClock.now < deadline { Thread.sleep(forTimeInterval: 0.05) }
        return gotSigterm(marker)
    }

    /// The owner of a task forks and exits; its child keeps the connection,
    /// and with it the task: the deadline is enforced on the child.
    @Test func aTaskInheritedByAForkedChildIsEnforcedOnTheChild() throws {
        let daemon = try DaemonUnderTest(settings: Self.budget)
        let marker = Self.markerPath("heir")
        defer { try? FileManager.default.removeItem(atPath: marker) }
        let script = """
            \(Self.pythonHelpers)
            bus = dbus.bus.BusConnection(address)
            manager(bus).BeginBackgroundTask("inherited")
            manager(bus).SetApplicationState("background")
            if os.fork() == 0:
                detach()
                note_sigterm(sys.argv[1])
                time.sleep(30)
                os._exit(1)
            os._exit(0)
            """
        let owner = try CommandResult.run("/usr/bin/python3", ["-c", script, marker], environment: daemon.environment)
        #expect(owner.succeeded, "\(owner)")
        #expect(try daemon.property("Tasks").contains("\"inherited\""), "the child holds the connection, so the task stays")
        #expect(Self.waitForSigterm(marker), "\(daemon.log.suffix(2000))")
        // The daemon logs the heir after it signalled it: the line may come a moment after the marker.
        #expect(daemon.waitForLog(containing: "its bus connection lives on in pid"), "\(daemon.log.suffix(2000))")
        #expect(daemon.stop() == .status(0))
    }

    /// A daemon(3)-style heir (fork, setsid, fork again) cannot be told from
    /// an unrelated process and is not signalled; the log said nothing of it
    /// and stopped at "task expired".
    @Test func anHeirThatLeftTheProcessGroupIsNotSignalledAndTheLogSaysSo() throws {
        let daemon = try DaemonUnderTest(settings: Self.budget)
        let marker = Self.markerPath("setsid")
        defer { try? FileManager.default.removeItem(atPath: marker) }
        let script = """
            \(Self.pythonHelpers)
            bus = dbus.bus.BusConnection(address)
            manager(bus).BeginBackgroundTask("escaped")
            manager(bus).SetApplicationState("background")
            if os.fork() == 0:
                detach()
                os.setsid()
                if os.fork() == 0:
                    with open(sys.argv[1], "w") as f:
                        f.write(str(os.getpid()))
                    time.sleep(12)
                os._exit(0)
            os._exit(0)
            """
        let owner = try CommandResult.run("/usr/bin/python3", ["-c", script, marker], environment: daemon.environment)
        #expect(owner.succeeded, "\(owner)")
        #expect(daemon.waitForLog(containing: "no process it forked in its process group holds its bus connection"), "\(daemon.log.suffix(2000))")
        if let pid = (try? String(contentsOfFile: marker, encoding: .utf8)).flatMap({ Int32($0) }), pid > 1 {
            kill(pid, SIGKILL)
        }
        #expect(daemon.stop() == .status(0))
    }

    /// Python that opens two connections, begins a task on the first and sends
    /// it to the background, checks the second in as another app, then forks
    /// one child that keeps only the first connection and one that keeps only
    /// the second, and exits. Each child writes "sigterm" to its marker file
    /// (argv 1, argv 2) if it gets SIGTERM.
    static let twoConnectionsTwoHeirs = """
        \(Self.pythonHelpers)
        first, first_fds = connect()
        second, second_fds = connect()
        manager(second).CheckIn("org.example.Innocent")
        manager(first).BeginBackgroundTask("inherited")
        manager(first).SetApplicationState("background")
        for drop, marker in ((second_fds, sys.argv[1]), (first_fds, sys.argv[2])):
            if os.fork() == 0:
                detach()
                for fd in drop:
                    os.close(fd)
                note_sigterm(marker)
                time.sleep(12)
                os._exit(1)
        os._exit(0)
        """

    /// A process with two bus connections forks two children, each keeping
    /// one of them, and exits. Which child holds the connection whose task
    /// expired cannot be told from outside; the child holding only another
    /// app's connection was SIGTERMed with the other. Now neither is, and the
    /// log says why.
    @Test func aChildHoldingAnotherConnectionOfTheGoneOwnerIsNotSignalled() throws {
        let daemon = try DaemonUnderTest(settings: Self.budget)
        let markers = (0..<2).map { Self.markerPath("heir-\($0)") }
        defer { for marker in markers { try? FileManager.default.removeItem(atPath: marker) } }
        let owner = try CommandResult.run("/usr/bin/python3", ["-c", Self.twoConnectionsTwoHeirs] + markers, environment: daemon.environment)
        #expect(owner.succeeded, "\(owner)")
        #expect(daemon.waitForLog(containing: "which of them holds the one meant cannot be told: none is signalled"), "\(daemon.log.suffix(2000))")
        Thread.sleep(forTimeInterval: 0.5)
        #expect(!Self.gotSigterm(markers[1]), "the holder of the other app's connection: \(daemon.log.suffix(2000))")
        #expect(daemon.stop() == .status(0))
    }

    /// A client that sends its own socket to a connection that does not read
    /// (so the bus daemon queues the message, and the descriptor with it) and
    /// exits: at the deadline the bus daemon held the connection's socket and
    /// was SIGTERMed as its heir, and bgtaskd stopped with the bus.
    @Test func theBusDaemonIsNeverTakenForAnHeir() throws {
        let daemon = try DaemonUnderTest(settings: Self.budget)
        let script = """
            \(Self.pythonHelpers)
            bus, own = connect()
            manager(bus).BeginBackgroundTask("handed-over")
            manager(bus).SetApplicationState("background")
            reader = dbus.bus.BusConnection(address)
            if os.fork() == 0:
                # Holds the reader's connection and never reads it.
                detach()
                for fd in own:
                    os.close(fd)
                time.sleep(10)
                os._exit(0)
            park(bus, reader.get_unique_name(), list(own)[0])
            time.sleep(0.5)
            os._exit(0)
            """
        let owner = try CommandResult.run("/usr/bin/python3", ["-c", script], environment: daemon.environment)
        #expect(owner.succeeded, "\(owner)")
        #expect(daemon.waitForLog(containing: "task expired"), "\(daemon.log.suffix(2000))")
        Thread.sleep(forTimeInterval: 3)
        #expect(!daemon.log.contains("which inherited it: signal"), "\(daemon.log.suffix(2000))")
        #expect(daemon.process.isRunning, "the bus and bgtaskd live on: \(daemon.log.suffix(2000))")
        #expect(daemon.stop() == .status(0))
    }

    /// The owner parks a second connection's socket with the bus daemon (a
    /// message to a connection that does not read), forks a child that keeps
    /// the task's connection, and exits. The parked connection had no heir
    /// but the bus daemon, which made the two look split between processes,
    /// and the child that overstayed was not signalled.
    @Test func aConnectionParkedWithTheBusDaemonDoesNotHideTheHeir() throws {
        let daemon = try DaemonUnderTest(settings: Self.budget)
        let marker = Self.markerPath("heir")
        defer { try? FileManager.default.removeItem(atPath: marker) }
        let script = """
            \(Self.pythonHelpers)
            first, first_fds = connect()
            second, second_fds = connect()
            manager(first).BeginBackgroundTask("inherited")
            manager(first).SetApplicationState("background")
            third, third_fds = connect()
            park(second, third.get_unique_name(), list(second_fds)[0])
            time.sleep(0.3)
            if os.fork() == 0:
                detach()
                for fd in sockets() - first_fds - third_fds:
                    os.close(fd)
                note_sigterm(sys.argv[1])
                time.sleep(12)
                os._exit(1)
            os._exit(0)
            """
        let owner = try CommandResult.run("/usr/bin/python3", ["-c", script, marker], environment: daemon.environment)
        #expect(owner.succeeded, "\(owner)")
        #expect(Self.waitForSigterm(marker), "\(daemon.log.suffix(2000))")
        #expect(daemon.stop() == .status(0))
    }

    /// A process that begins a task, goes to the background, sends its own
    /// bus socket in a message to another process of the user and exits:
    /// that process, which takes the socket in when it reads the message,
    /// was SIGTERMed as the heir of the connection. It did not fork from the
    /// owner, and is left alone.
    @Test func aProcessHandedTheOwnersSocketIsNoHeir() throws {
        let daemon = try DaemonUnderTest(settings: Self.budget)
        let marker = Self.markerPath("victim")
        defer { for path in [marker, marker + ".name"] { try? FileManager.default.removeItem(atPath: path) } }
        let victim = try ChildProcess("/usr/bin/python3", ["-c", """
            \(Self.pythonHelpers)
            bus = dbus.bus.BusConnection(address)
            with open(sys.argv[1] + ".name", "w") as f:
                f.write(bus.get_unique_name())
            note_sigterm(sys.argv[1])
            for _ in range(100):
                bus.list_names()
                time.sleep(0.1)
            """, marker], environment: daemon.environment)
        defer { _ = victim.stop() }
        var name: String?
        let named = ContinuousClock.now + .seconds(10)
        while name == nil, ContinuousClock.now < named {
            name = (try? String(contentsOfFile: marker + ".name", encoding: .utf8)).flatMap { $0.isEmpty ? nil : $0 }
            Thread.sleep(forTimeInterval: 0.05)
        }
        let victimName = try #require(name, "the victim did not start")
        let attacker = """
            \(Self.pythonHelpers)
            bus, own = connect()
            manager(bus).BeginBackgroundTask("framed")
            manager(bus).SetApplicationState("background")
            message = dbus.lowlevel.MethodCallMessage(sys.argv[1], "/x", "x.y", "Take")
            message.append(dbus.types.UnixFd(list(own)[0]), signature="h")
            message.set_no_reply(True)
            bus.send_message(message)
            bus.flush()
            os._exit(0)
            """
        let owner = try CommandResult.run("/usr/bin/python3", ["-c", attacker, victimName], environment: daemon.environment)
        #expect(owner.succeeded, "\(owner)")
        #expect(daemon.waitForLog(containing: "task expired"), "\(daemon.log.suffix(2000))")
        Thread.sleep(forTimeInterval: 3)
        #expect(!Self.gotSigterm(marker), "\(daemon.log.suffix(2000))")
        #expect(victim.isRunning)
        #expect(!daemon.log.contains("which inherited it: signal"), "\(daemon.log.suffix(2000))")
        #expect(daemon.stop() == .status(0))
    }

    /// An app left in the background past its budget (Linux does not suspend
    /// it) that then begins a task is refused (`LimitExceeded`) and goes on
    /// running: the task could only have expired at once and the app been
    /// terminated before its expiration handler could end it.
    @Test func aTaskBegunWithNoTimeLeftIsRefusedAndTheAppLivesOn() throws {
        let daemon = try DaemonUnderTest(settings: Self.budget)
        let app = try daemon.startTestApp(["--begin-after", "3", "--hold", "30"])
        let error = try #require(app.waitForEvent("error", timeout: .seconds(15)), "\(app.lines) \(app.standardError)")
        #expect(error["name"] as? String == "org.bgtaskd.BackgroundTasks1.Error.LimitExceeded", "\(error)")
        #expect((error["message"] as? String ?? "").contains("no background time is left"), "\(error)")
        #expect(app.waitForExit(timeout: .seconds(10)) == .status(1), "the app exits on its own after the error, not by SIGTERM")
        #expect(!app.eventNames.contains("sigterm") && !app.eventNames.contains("expired"), "\(app.eventNames)")
        #expect(!daemon.log.contains("overstayed"), "\(daemon.log.suffix(2000))")
        #expect(daemon.stop() == .status(0))
    }

    @Test func appIgnoringSigtermIsKilled() throws {
        let daemon = try DaemonUnderTest(settings: Self.budget)
        let app = try daemon.startTestApp(["--background", "--ignore-sigterm"])
        #expect(app.waitForEvent("state") != nil, "\(app.lines) \(app.standardError)")
        let backgroundAt = ContinuousClock.now
        let exit = app.waitForExit(timeout: .seconds(15))
        #expect(exit == .signal(SIGKILL), "got \(String(describing: exit))")
        // Deadline (2 s) + grace (2 s); well before that would mean no grace
        // (the test may have read "state" late: a margin for it).
        #expect(ContinuousClock.now - backgroundAt >= .milliseconds(3000))
        #expect(app.eventNames.contains("expiring"))
        #expect(daemon.waitForLog(containing: "SIGKILL"))
        #expect(daemon.stop() == .status(0))
    }

    @Test func appThatEndsInTimeSurvives() throws {
        let daemon = try DaemonUnderTest(settings: Self.budget)
        let app = try daemon.startTestApp(["--background", "--end-after", "0.5", "--hold", "60"])
        #expect(app.waitForEvent("ended") != nil, "\(app.lines) \(app.standardError)")
        // Past the deadline and the grace period: nothing may touch it.
        Thread.sleep(forTimeInterval: 5)
        #expect(app.isRunning)
        #expect(!app.eventNames.contains("expiring"))
        #expect(!app.eventNames.contains("expired"))
        #expect(!daemon.log.contains("SIGTERM"))
        app.stop()
        #expect(daemon.stop() == .status(0))
    }

    @Test func activeAppIsNeverExpired() throws {
        let daemon = try DaemonUnderTest(settings: Self.budget)
        let app = try daemon.startTestApp(["--hold", "60"])
        #expect(app.waitForEvent("begun") != nil, "\(app.lines) \(app.standardError)")
        Thread.sleep(forTimeInterval: 4.5)
        #expect(app.isRunning)
        #expect(!app.eventNames.contains("expiring"))
        app.stop()
        #expect(daemon.stop() == .status(0))
    }

    @Test func closedConnectionLosesItsTasksAtOnce() throws {
        let daemon = try DaemonUnderTest()
        let app = try daemon.startTestApp(["--tasks", "3", "--name", "sync"])
        #expect(app.waitForEvent("ready") != nil, "\(app.lines) \(app.standardError)")
        let held = try daemon.waitForTasks { $0.hasPrefix("a(ussd) 3") }
        #expect(held.hasPrefix("a(ussd) 3"), "\(held)")
        #expect(held.contains("\"sync\""))
        app.send(SIGKILL)
        app.waitForExit()
        #expect(try daemon.waitForTasks { $0 == "a(ussd) 0" } == "a(ussd) 0")
        #expect(daemon.stop() == .status(0))
    }

    @Test func strangerCannotEndAnothersTask() throws {
        let daemon = try DaemonUnderTest()
        let app = try daemon.startTestApp(["--hold", "60"])
        let begun = try #require(app.waitForEvent("begun"), "\(app.lines) \(app.standardError)")
        let id = try #require(begun["task_id"] as? Int)
        let reply = try daemon.gdbusCall("EndBackgroundTask", ["\(id)"])
        #expect(reply.standardError.contains("org.bgtaskd.BackgroundTasks1.Error.NoSuchTask: no task \(id) is open on this connection"), "\(reply)")
        #expect(try daemon.property("Tasks").hasPrefix("a(ussd) 1"))
        app.stop()
        #expect(daemon.stop() == .status(0))
    }

    @Test func tooManyTasksIsLimitExceeded() throws {
        let daemon = try DaemonUnderTest(settings: ["Tasks.MaxPerConnection=2"])
        let app = try daemon.startTestApp(["--tasks", "3"])
        let error = try #require(app.waitForEvent("error"), "\(app.lines) \(app.standardError)")
        #expect(error["name"] as? String == "org.bgtaskd.BackgroundTasks1.Error.LimitExceeded")
        #expect((error["message"] as? String ?? "").contains("Tasks.MaxPerConnection"))
        #expect(daemon.stop() == .status(0))
    }

    @Test func expirySignalsGoToTheOwnerOnly() throws {
        let daemon = try DaemonUnderTest(settings: Self.budget)
        // gdbus monitor subscribes to everything the daemon broadcasts; unicast
        // signals to another connection must not reach it.
        let monitor = try ChildProcess("/usr/bin/gdbus", ["monitor", "--session", "--dest", "org.bgtaskd.BackgroundTasks1"],
                                       environment: daemon.environment)
        #expect(monitor.waitForLine(timeout: .seconds(5)) { $0.contains("owned by") } != nil)
        let app = try daemon.startTestApp(["--background"])
        #expect(app.waitForEvent("expiring") != nil, "\(app.lines)")
        app.waitForExit(timeout: .seconds(10))
        // The monitor saw the broadcast Tasks change, so it was listening…
        #expect(monitor.waitForLine(timeout: .seconds(5)) { $0.contains("PropertiesChanged") } != nil, "\(monitor.lines)")
        // …but not the owner's signals.
        #expect(!monitor.lines.contains { $0.contains("TaskExpiring") || $0.contains("TaskExpired") }, "\(monitor.lines)")
        monitor.stop()
        #expect(daemon.stop() == .status(0))
    }
}
