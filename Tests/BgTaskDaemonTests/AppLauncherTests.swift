@testable import BgTaskDaemon
import BgTaskCore
import CBgTaskShim
import CSystemd
import Foundation
import Glibc
import Logging
import SDBus
import Testing

/// Swift Testing has an `ExitStatus` of its own.
private typealias LaunchExit = BgTaskDaemon.ExitStatus

/// Launching apps for background events (docs/DESIGN.md §3): process state, placement,
/// failures, reaping, freezing. Each test drives its own sd-event loop on the
/// test's thread and cleans up every process and cgroup it makes.
@Suite(.serialized) struct AppLauncherTests {
    /// The v2 hierarchy, when this machine lets the tests make cgroups in it.
    static let writableHierarchy: CgroupHierarchy? = {
        guard let hierarchy = CgroupHierarchy.current() else { return nil }
        let probe = hierarchy.ownDirectory + "/bgtaskd-test-probe-\(getpid())"
        guard mkdir(probe, 0o755) == 0 else { return nil }
        rmdir(probe)
        return hierarchy
    }()

    static let hasDBusMock: Bool = FileManager.default.isExecutableFile(atPath: "/usr/bin/dbus-daemon")
        && FileManager.default.isExecutableFile(atPath: "/usr/bin/python3")
        && (try? String(contentsOfFile: "/usr/lib/python3/dist-packages/dbusmock/templates/systemd.py", encoding: .utf8)) != nil

    let appID = try! AppID(validating: "org.example.Launch-Test")
    let logger = Logger(label: "bgtaskd-tests")

    // MARK: Pure parts

    /// How an exit reads after "it" in a failed launch's reason.
    @Test func anExitReadsAsAClause() {
        #expect(LaunchExit.exited(code: 1).clause == "exited with code 1")
        #expect(LaunchExit.killed(signal: SIGTERM, coreDumped: false).clause == "was killed by SIGTERM")
    }

    @Test func unitNamesMapBackToTheAppID() throws {
        for id in ["org.example.App", "org.example.Launch-Test", "com.ex-ample.my_app-2", "a.b"] {
            let appID = try AppID(validating: id)
            let unit = LaunchUnitName.make(for: appID, random: 0x1a2b3c)
            #expect(unit.hasPrefix("app-bgtaskd-"))
            #expect(unit.hasSuffix("-001a2b3c.scope"))
            #expect(!unit.dropFirst(12).dropLast(15).contains("-"), "dashes in the id are escaped: \(unit)")
            #expect(SandboxInspector.appID(fromUnit: unit) == appID, "\(unit)")
        }
        #expect(LaunchUnitName.make(for: try AppID(validating: "org.example.My-App"), random: 0xabcdef12)
            == "app-bgtaskd-org.example.My\\x2dApp-abcdef12.scope")
    }

    @Test func hierarchyFromMountinfoAndProcCgroup() {
        let hybrid = """
            31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
            37 31 0:34 / /sys/fs/cgroup/freezer rw,relatime - cgroup cgroup rw,freezer
            41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
            """
        let root = CgroupHierarchy.parse(mountinfo: hybrid, procCgroup: "6:freezer:/\n0::/\n")
        #expect(root?.ownDirectory == "/sys/fs/cgroup/unified")
        let nested = CgroupHierarchy.parse(mountinfo: hybrid, procCgroup: "0::/user.slice/bgtaskd.service\n")
        #expect(nested?.ownDirectory == "/sys/fs/cgroup/unified/user.slice/bgtaskd.service")

        let unified = "25 1 0:22 / /sys/fs/cgroup rw,nosuid shared:4 - cgroup2 cgroup2 rw,nsdelegate\n"
        #expect(CgroupHierarchy.parse(mountinfo: unified, procCgroup: "0::/a/b\n")?.ownDirectory == "/sys/fs/cgroup/a/b")
        // A mount showing only part of the hierarchy, with an escaped space in its mount point.
        let partial = "25 1 0:22 /a /mnt/cg\\040x rw shared:4 - cgroup2 cgroup2 rw\n"
        #expect(CgroupHierarchy.parse(mountinfo: partial, procCgroup: "0::/a/b\n")?.ownDirectory == "/mnt/cg x/b")
        #expect(CgroupHierarchy.parse(mountinfo: partial, procCgroup: "0::/other\n") == nil)
        // No v2 hierarchy, or the daemon's cgroup is gone.
        #expect(CgroupHierarchy.parse(mountinfo: hybrid, procCgroup: "6:freezer:/\n") == nil)
        #expect(CgroupHierarchy.parse(mountinfo: unified, procCgroup: "0::/x (deleted)\n") == nil)
        #expect(CgroupHierarchy.parse(mountinfo: "", procCgroup: "0::/\n") == nil)
    }

    @Test func environmentReplacesTheLaunchVariablesAndDropsTheDaemonsOwn() {
        let base = [
            "PATH=/usr/bin", "HOME=/home/u", "BGTASKD_APP_ID=org.evil.Other", "NOTIFY_SOCKET=/run/x",
            "LISTEN_FDS=1", "DBUS_SESSION_BUS_ADDRESS=unix:path=/run/user/1/bus", "NO_VALUE",
        ]
        let withBus = AppLauncher.environment(base: base, appID: appID, reason: "fetch", appBusAddress: "unix:path=/tmp/b")
        #expect(withBus == [
            "PATH=/usr/bin", "HOME=/home/u", "NO_VALUE", "BGTASKD_LAUNCH_REASON=fetch",
            "BGTASKD_APP_ID=org.example.Launch-Test", "DBUS_SESSION_BUS_ADDRESS=unix:path=/tmp/b",
        ])
        let plain = AppLauncher.environment(base: base, appID: appID, reason: "location", appBusAddress: nil)
        #expect(plain.contains("DBUS_SESSION_BUS_ADDRESS=unix:path=/run/user/1/bus"))
        #expect(plain.contains("BGTASKD_LAUNCH_REASON=location"))
    }

    @Test func errorsNameTheAppTheCommandAndTheReason() {
        let error = LaunchError(
            code: .exec, appID: appID, commandLine: ["/opt/app", "--mode", "it's"], reason: "gone", errno: ENOENT)
        #expect(error.description == "cannot launch org.example.Launch-Test (`/opt/app --mode 'it'\\''s'`): gone")
    }

    /// The daemon's own shortages are not the app's failures (its launches are not held back for them).
    @Test func aShortageOfTheDaemonsIsToldFromTheAppsFailure() {
        func error(_ code: LaunchError.Code, _ errno: Int32?) -> LaunchError {
            LaunchError(code: code, appID: appID, commandLine: ["/opt/app"], reason: "r", errno: errno)
        }
        #expect(error(.cgroup, EMFILE).isDaemonsShortage)
        #expect(error(.spawn, ENFILE).isDaemonsShortage)
        #expect(error(.spawn, EAGAIN).isDaemonsShortage)
        #expect(error(.exec, ENOMEM).isDaemonsShortage)
        #expect(!error(.exec, ENOENT).isDaemonsShortage)
        #expect(!error(.exec, EACCES).isDaemonsShortage)
        #expect(!error(.emptyCommandLine, nil).isDaemonsShortage)
    }

    @Test func spawnFailsSynchronously() {
        let missing = ProcessSpawner.spawn(
            commandLine: ["bgtaskd-test-no-such-program"], environment: [], searchPath: "/usr/bin:/bin",
            directory: nil, cgroupProcsFD: nil)
        #expect(missing == .failure(.init(
            stage: .lookup, errno: ENOENT, program: "bgtaskd-test-no-such-program", searchPath: "/usr/bin:/bin")))
        let directory = ProcessSpawner.spawn(
            commandLine: ["/"], environment: [], searchPath: nil, directory: nil, cgroupProcsFD: nil)
        #expect(directory == .failure(.init(stage: .exec, errno: EACCES, program: "/", searchPath: nil)))
        // A cgroup.procs the child cannot write to: it never gets to execve.
        let readOnly = open("/dev/null", O_RDONLY | O_CLOEXEC)
        defer { close(readOnly) }
        let cgroup = ProcessSpawner.spawn(
            commandLine: ["/bin/true"], environment: [], searchPath: nil, directory: nil, cgroupProcsFD: readOnly)
        #expect(cgroup == .failure(.init(stage: .cgroup, errno: EBADF, program: "/bin/true", searchPath: nil)))
    }

    @Test func cgroupThatCannotBeEnteredIsALaunchError() throws {
        // A "hierarchy" that is a plain directory: the app's directory can be
        // made, but it has no cgroup.procs.
        let temporary = try TemporaryDirectory()
        let loop = try EventLoop()
        let launcher = AppLauncher(
            loop: loop, sessionBus: nil, appBusAddress: nil, logger: logger,
            cgroupHierarchy: CgroupHierarchy(mountPoint: temporary.root, ownCgroup: "/"))
        var result: Result<LaunchedProcess, LaunchError>?
        launcher.launch(appID: appID, commandLine: ["/bin/true"], reason: "fetch") { result = $0 }
        #expect(drive(loop) { result != nil })
        guard case .failure(let error) = result else {
            Issue.record("launched in a directory that is no cgroup: \(String(describing: result))")
            return
        }
        #expect(error.code == .cgroup)
        #expect(error.errno == ENOENT)
        #expect(error.description.contains("org.example.Launch-Test") && error.description.contains("cgroup.procs"))
        #expect(try FileManager.default.contentsOfDirectory(atPath: temporary.root).isEmpty, "its directory is removed")
    }

    // MARK: Launching

    @Test func launchedAppGetsACleanProcessState() throws {
        let temporary = try TemporaryDirectory()
        let output = temporary.path("out")
        let loop = try EventLoop()
        let launcher = AppLauncher(
            loop: loop, sessionBus: nil, appBusAddress: "unix:path=/tmp/bgtaskd-test-bus", logger: logger,
            cgroupHierarchy: Self.writableHierarchy)
        var events: [String] = []
        var exits: [(LaunchedProcess, LaunchExit)] = []
        launcher.onExit = { process, status in
            events.append("exit")
            exits.append((process, status))
        }

        // State the app must not inherit: a blocked and an ignored signal, a leaked descriptor.
        var block = sigset_t()
        var savedMask = sigset_t()
        sigemptyset(&block)
        sigaddset(&block, SIGUSR1)
        pthread_sigmask(SIG_BLOCK, &block, &savedMask)
        let savedUSR2 = signal(SIGUSR2, SIG_IGN)
        // F_DUPFD (not dup2): never clobbers a descriptor of a test running in parallel.
        let devNull = open("/dev/null", O_RDONLY)
        let leaked = fcntl(devNull, F_DUPFD, 200)
        close(devNull)
        #expect(leaked >= 200 && fcntl(leaked, F_GETFD) & FD_CLOEXEC == 0)
        defer {
            pthread_sigmask(SIG_SETMASK, &savedMask, nil)
            signal(SIGUSR2, savedUSR2)
            close(leaked)
        }

        let script = """
            echo "$BGTASKD_LAUNCH_REASON $BGTASKD_APP_ID $DBUS_SESSION_BUS_ADDRESS" > '\(output)'
            grep -E "^(SigBlk|SigIgn)" /proc/self/status >> '\(output)'
            ulimit -n >> '\(output)'
            cat /proc/self/cgroup >> '\(output)'
            echo "cwd=$(pwd -P)" >> '\(output)'
            echo "stdin=$(readlink /proc/$$/fd/0)" >> '\(output)'
            echo "session=$(cut -d' ' -f6 /proc/$$/stat) pid=$$" >> '\(output)'
            echo "fds=$(ls /proc/$$/fd | tr '\\n' ' ')" >> '\(output)'
            """
        var result: Result<LaunchedProcess, LaunchError>?
        launcher.launch(appID: appID, commandLine: ["/bin/sh", "-c", script], reason: "fetch") {
            events.append("launched")
            result = $0
        }
        #expect(result == nil, "the completion never runs inside launch()")
        #expect(drive(loop) { !exits.isEmpty })
        let process = try #require(try result?.get())
        #expect(events == ["launched", "exit"])
        #expect(exits.first?.0 == process)
        #expect(exits.first?.1 == .exited(code: 0))
        #expect(process.appID == appID && process.reason == "fetch")
        #expect(process.unit.hasPrefix("app-bgtaskd-org.example.Launch\\x2dTest-") && process.unit.hasSuffix(".scope"))
        #expect(isReaped(process.pid))
        #expect(launcher.processes.isEmpty)

        let lines = try String(contentsOfFile: output, encoding: .utf8).split(separator: "\n").map(String.init)
        #expect(lines.first == "fetch org.example.Launch-Test unix:path=/tmp/bgtaskd-test-bus")
        #expect(lines.contains("SigBlk:\t0000000000000000"))
        #expect(lines.contains("SigIgn:\t0000000000000000"))
        #expect(lines.contains("1024"))
        let home = ProcessInfo.processInfo.environment["HOME"].map { URL(fileURLWithPath: $0).resolvingSymlinksInPath().path } ?? "/"
        #expect(lines.contains("cwd=\(home)"))
        #expect(lines.contains("stdin=/dev/null"))
        #expect(lines.contains("session=\(process.pid) pid=\(process.pid)"))
        let fds = lines.first { $0.hasPrefix("fds=") }?.dropFirst(4).split(separator: " ") ?? []
        #expect(!fds.contains("\(leaked)"), "a descriptor without O_CLOEXEC leaked: \(fds)")

        let cgroupText = lines.filter { $0.hasPrefix("0::") }.joined(separator: "\n")
        if let hierarchy = Self.writableHierarchy {
            #expect(process.placement == .cgroup)
            let unit = try #require(SandboxInspector.unitName(fromCgroup: cgroupText))
            #expect(unit == process.unit)
            #expect(SandboxInspector.appID(fromUnit: unit) == appID)
            #expect(process.cgroupPath == hierarchy.ownDirectory + "/" + process.unit)
            #expect(drive(loop) { !FileManager.default.fileExists(atPath: process.cgroupPath!) }, "cgroup removed")
        } else {
            #expect(process.placement == .process)
            #expect(process.cgroupPath == nil)
        }
    }

    @Test func missingAndUnusableProgramsFailWithTheirErrno() throws {
        let temporary = try TemporaryDirectory()
        try temporary.write("not-executable", "#!/bin/sh\n")
        let loop = try EventLoop()
        let launcher = AppLauncher(
            loop: loop, sessionBus: nil, appBusAddress: nil, logger: logger, cgroupHierarchy: Self.writableHierarchy)
        let before = scopeDirectories()

        let cases: [([String], String)] = [
            (["bgtaskd-test-no-such-program", "--flag"], "ENOENT"),
            (["/nonexistent/bgtaskd-test"], "ENOENT"),
            ([temporary.path("not-executable")], "EACCES"),
        ]
        for (commandLine, errnoName) in cases {
            var result: Result<LaunchedProcess, LaunchError>?
            launcher.launch(appID: appID, commandLine: commandLine, reason: "fetch") { result = $0 }
            #expect(drive(loop) { result != nil })
            guard case .failure(let error) = result else {
                Issue.record("\(commandLine) launched: \(String(describing: result))")
                continue
            }
            #expect(error.code == .exec)
            #expect(error.description.contains("org.example.Launch-Test"))
            #expect(error.description.contains(commandLine[0]))
            #expect(error.description.contains(errnoName), "\(error)")
        }
        #expect(launcher.processes.isEmpty)
        #expect(scopeDirectories() == before, "no cgroup is left behind")
    }

    @Test func emptyCommandLineFails() throws {
        let loop = try EventLoop()
        let launcher = AppLauncher(loop: loop, sessionBus: nil, appBusAddress: nil, logger: logger, cgroupHierarchy: nil)
        var result: Result<LaunchedProcess, LaunchError>?
        launcher.launch(appID: appID, commandLine: [], reason: "fetch") { result = $0 }
        #expect(drive(loop) { result != nil })
        guard case .failure(let error) = result else {
            Issue.record("launched nothing?")
            return
        }
        #expect(error.code == .emptyCommandLine)
        #expect(error.description.contains("org.example.Launch-Test"))
    }

    // MARK: Freezing and killing

    @Test(.enabled(if: AppLauncherTests.writableHierarchy != nil)) func freezeAndThawThroughTheV2Cgroup() throws {
        let loop = try EventLoop()
        let launcher = AppLauncher(
            loop: loop, sessionBus: nil, appBusAddress: nil, logger: logger, cgroupHierarchy: Self.writableHierarchy)
        var exit: LaunchExit?
        launcher.onExit = { _, status in exit = status }
        let process = try launchSleep(launcher, loop)
        defer { if exit == nil { launcher.killAll(process); _ = drive(loop) { exit != nil } } }
        let cgroup = Cgroup(path: try #require(process.cgroupPath))
        let (freezer, ref, table) = try freezer(for: process, launcher, loop)
        defer { table.release(ref) }

        freezer.freeze(.app(appID), [ref])
        #expect(freezer.isFrozen(ref))
        #expect(drive(loop) { cgroup.isFrozen == true })
        var settled: Bool?
        freezer.whenSettled(timeout: 5_000_000) { settled = $0 }
        #expect(drive(loop) { settled != nil })
        #expect(settled == true)
        freezer.thaw(.app(appID), [ref])
        #expect(!freezer.isFrozen(ref))
        #expect(drive(loop) { cgroup.isFrozen == false })

        // SIGKILL reaches a frozen v2 cgroup.
        freezer.freeze(.app(appID), [ref])
        #expect(drive(loop) { cgroup.isFrozen == true })
        #expect(launcher.killAll(process))
        #expect(drive(loop) { exit != nil })
        #expect(exit == .killed(signal: SIGKILL, coreDumped: false))
        #expect(isReaped(process.pid))
        #expect(drive(loop) { !FileManager.default.fileExists(atPath: cgroup.path) })
    }

    /// A launched child is entered in the one process table at spawn: a
    /// connection of it shares its entry, and the entry goes when the last
    /// holder lets go after the child is reaped.
    @Test func launchedProcessIsInTheOneProcessTable() throws {
        let loop = try EventLoop()
        let table = ProcessTable(logger: logger)
        let launcher = AppLauncher(
            loop: loop, sessionBus: nil, appBusAddress: nil, logger: logger, cgroupHierarchy: nil, processes: table)
        var exit: LaunchExit?
        launcher.onExit = { _, status in exit = status }
        let process = try launchSleep(launcher, loop)
        #expect(table.pidfd(of: process.ref) != nil)
        #expect(table.isAlive(process.ref))
        let connection = try table.open(pid: process.pid)
        #expect(connection == process.ref, "one entry per process, whoever holds it")
        #expect(launcher.killAll(process))
        #expect(drive(loop) { exit != nil })
        #expect(table.pidfd(of: process.ref) != nil, "the connection still holds it after the reap")
        table.release(connection)
        #expect(table.pidfd(of: process.ref) == nil)
        #expect(table.count == 0)
    }

    /// Marks read back as written, those of the first form (a cgroup's,
    /// without placement) too; a placement not known is no mark.
    @Test func launchMarksReadBackAsWritten() {
        for mark in [
            LaunchMark(pid: 4242, startTime: 987_654, reason: "fetch"),
            LaunchMark(pid: 4242, startTime: 987_654, reason: "location", placement: .systemdScope, bootID: "5e1f-boot", owner: "bgtaskd-apps-00ff"),
            LaunchMark(pid: 4242, startTime: 987_654, reason: "transfer", placement: .process, bootID: nil, owner: nil),
        ] {
            #expect(LaunchMark(text: mark.text) == mark, "\(mark.text)")
        }
        #expect(LaunchMark(text: "4242 987654 fetch") == LaunchMark(pid: 4242, startTime: 987_654, reason: "fetch", placement: .cgroup))
        #expect(LaunchMark(text: "4242 987654 fetch elsewhere 5e1f bgtaskd-apps-00ff") == nil)
        #expect(LaunchMark(text: "4242 987654 fetch process 5e1f") == nil)
        #expect(LaunchMark(text: "4242 987654 fetch process") == nil)
    }

    /// A plain child of an earlier run (no cgroup could be made for it) is
    /// taken over by a later run from its mark, if the mark is of this boot
    /// and names the same start; marks of another boot or start are not.
    @Test func aPlainChildOfAnEarlierRunIsTakenOverFromItsMark() throws {
        let loop = try EventLoop()
        let earlier = AppLauncher(loop: loop, sessionBus: nil, appBusAddress: nil, logger: logger, cgroupHierarchy: nil)
        var earlierExit: LaunchExit?
        earlier.onExit = { _, status in earlierExit = status }
        let process = try launchSleep(earlier, loop)
        defer { if earlierExit == nil { earlier.killAll(process); _ = drive(loop) { earlierExit != nil } } }
        #expect(process.placement == .process)
        let start = try #require(AppLauncher.startTime(of: process.pid))
        let mark = LaunchMark(pid: process.pid, startTime: start, reason: "fetch", placement: .process, bootID: LaunchMark.currentBootID)
        var otherBoot = mark, otherStart = mark, noBoot = mark, otherDaemons = mark
        otherBoot.bootID = "00000000-0000-0000-0000-000000000000"
        otherStart.startTime += 1
        noBoot.bootID = nil
        // A daemon on a copy of the database reads the launching daemon's marks.
        otherDaemons.owner = "bgtaskd-apps-0123456789abcdef"

        let later = AppLauncher(loop: loop, sessionBus: nil, appBusAddress: nil, logger: logger, cgroupHierarchy: nil)
        var exit: LaunchExit?
        later.onExit = { _, status in exit = status }
        for stale in [otherBoot, otherStart, noBoot, otherDaemons] {
            #expect(later.takeOverProcessesOfEarlierRuns(launched: [process.unit: stale]).isEmpty, "\(stale.text)")
        }
        #expect(later.takeOverProcessesOfEarlierRuns(launched: [process.unit: LaunchMark(pid: process.pid, startTime: start, reason: "fetch")]).isEmpty,
                "a cgroup's mark is for reclaimCgroupsOfEarlierRuns")
        let taken = later.takeOverProcessesOfEarlierRuns(launched: [process.unit: mark])
        #expect(taken.map(\.pid) == [process.pid])
        #expect(taken.first?.placement == .process && taken.first?.appID == appID && taken.first?.reason == "fetch")
        #expect(later.processes.map(\.pid) == [process.pid])
        #expect(later.killAll(try #require(taken.first)))
        // Here both runs are this process, so whichever reaps first sees the status.
        #expect(drive(loop) { exit != nil && earlierExit != nil })
        #expect(later.processes.isEmpty)
    }

    @Test func freezeFallsBackToSIGSTOPWithoutACgroup() throws {
        let loop = try EventLoop()
        let launcher = AppLauncher(loop: loop, sessionBus: nil, appBusAddress: nil, logger: logger, cgroupHierarchy: nil)
        var exit: LaunchExit?
        launcher.onExit = { _, status in exit = status }
        let process = try launchSleep(launcher, loop)
        defer { if exit == nil { launcher.killAll(process); _ = drive(loop) { exit != nil } } }
        #expect(process.placement == .process && process.cgroupPath == nil)
        let (freezer, ref, table) = try freezer(for: process, launcher, loop)
        defer { table.release(ref) }

        freezer.freeze(.app(appID), [ref])
        #expect(drive(loop) { processState(process.pid) == "T" })
        freezer.thaw(.app(appID), [ref])
        #expect(drive(loop) { processState(process.pid) == "S" })
        #expect(launcher.killAll(process))
        #expect(drive(loop) { exit != nil })
        #expect(exit == .killed(signal: SIGKILL, coreDumped: false))
        #expect(isReaped(process.pid))
    }

    /// Without a cgroup only the main process was stopped: what it started
    /// ran on through the sleep (a "frozen" app using CPU). The launch leads
    /// a session of its own, and its whole process group is stopped now.
    @Test func aFreezeBySIGSTOPStopsWhatTheAppStarted() throws {
        let loop = try EventLoop()
        let launcher = AppLauncher(loop: loop, sessionBus: nil, appBusAddress: nil, logger: logger, cgroupHierarchy: nil)
        var exit: LaunchExit?
        launcher.onExit = { _, status in exit = status }
        var result: Result<LaunchedProcess, LaunchError>?
        launcher.launch(appID: appID, commandLine: ["/bin/sh", "-c", "sleep 30 & wait"], reason: "fetch") { result = $0 }
        #expect(drive(loop) { result != nil })
        let process = try #require(result).get()
        defer { if exit == nil { launcher.killAll(process); _ = drive(loop) { exit != nil } } }
        func child() -> Int32? {
            let text = try? String(contentsOfFile: "/proc/\(process.pid)/task/\(process.pid)/children", encoding: .utf8)
            return text?.split(separator: " ").first.flatMap { Int32($0) }
        }
        #expect(drive(loop) { child() != nil })
        let sleeper = try #require(child())
        defer { kill(sleeper, SIGKILL) }
        let (freezer, ref, table) = try freezer(for: process, launcher, loop)
        defer { table.release(ref) }

        freezer.freeze(.app(appID), [ref])
        #expect(drive(loop) { processState(process.pid) == "T" && processState(sleeper) == "T" }, "\(String(describing: processState(sleeper)))")
        freezer.thaw(.app(appID), [ref])
        #expect(drive(loop) { processState(process.pid) == "S" && processState(sleeper) == "S" }, "\(String(describing: processState(sleeper)))")
    }

    /// The main process exits while another process is still in the app's
    /// cgroup: the cgroup stays until killAll empties it, then goes.
    /// Another daemon starting up removes the empty groups of daemons it does
    /// not know: a cgroup removed between its making and the child entering it
    /// failed the launch (ENODEV), and held the app's launches back.
    @Test(.enabled(if: AppLauncherTests.writableHierarchy != nil)) func aCgroupRemovedUnderTheLaunchIsMadeAgain() throws {
        let loop = try EventLoop()
        let launcher = AppLauncher(
            loop: loop, sessionBus: nil, appBusAddress: nil, logger: logger, cgroupHierarchy: Self.writableHierarchy)
        var removed = 0
        launcher.beforeSpawnIntoCgroup = { cgroup in
            guard removed == 0 else { return }
            removed += 1
            try? cgroup.remove()
        }
        var result: Result<LaunchedProcess, LaunchError>?
        launcher.launch(appID: appID, commandLine: ["/bin/sleep", "30"], reason: "fetch") { result = $0 }
        #expect(drive(loop) { result != nil })
        guard case .success(let process) = result else {
            Issue.record("the launch failed: \(String(describing: result))")
            return
        }
        #expect(removed == 1)
        #expect(launcher.killAll(process))
        // The cgroup goes once its process is gone (it was left at the root of the hierarchy, test after test).
        let cgroup = try #require(process.cgroupPath)
        #expect(drive(loop) { !FileManager.default.fileExists(atPath: cgroup) })
    }

    @Test(.enabled(if: AppLauncherTests.writableHierarchy != nil)) func cgroupWithProcessesLeftIsRemovedWhenTheyAreGone() throws {
        let loop = try EventLoop()
        let launcher = AppLauncher(
            loop: loop, sessionBus: nil, appBusAddress: nil, logger: logger, cgroupHierarchy: Self.writableHierarchy)
        var exit: LaunchExit?
        launcher.onExit = { _, status in exit = status }
        let process = try launchSleep(launcher, loop)
        let cgroup = Cgroup(path: try #require(process.cgroupPath))

        // A process of the test's own (so the test can reap it) joins the app's cgroup.
        let straggler = try Straggler(in: cgroup)

        kill(process.pid, SIGTERM)
        #expect(drive(loop) { exit != nil })
        #expect(exit == .killed(signal: SIGTERM, coreDumped: false))
        _ = drive(loop, seconds: 0.3) { false }
        #expect(FileManager.default.fileExists(atPath: cgroup.path), "kept while a process is in it")

        #expect(launcher.killAll(process), "killAll reaches what is left after the main process exited")
        straggler.waitForEnd()
        #expect(drive(loop) { !FileManager.default.fileExists(atPath: cgroup.path) })
    }

    /// A launcher script that starts the app and returns: its exit, before
    /// the app checked in, was taken for the app's, and the event failed
    /// while the app ran on. The launch goes on in what it left in its
    /// cgroup, and its exit is reported once that is gone too.
    @Test(.enabled(if: AppLauncherTests.writableHierarchy != nil)) func aLaunchThatHasNotCheckedInGoesOnInWhatItLeftInItsCgroup() throws {
        let loop = try EventLoop()
        let launcher = AppLauncher(
            loop: loop, sessionBus: nil, appBusAddress: nil, logger: logger, cgroupHierarchy: Self.writableHierarchy)
        var exit: LaunchExit?
        launcher.onExit = { _, status in exit = status }
        launcher.awaitsCheckIn = { _ in true }
        let process = try launchSleep(launcher, loop)
        let cgroup = Cgroup(path: try #require(process.cgroupPath))
        let straggler = try Straggler(in: cgroup)

        kill(process.pid, SIGTERM)
        #expect(drive(loop) { isReaped(process.pid) })
        _ = drive(loop, seconds: 0.3) { false }
        #expect(exit == nil, "the launch lives on in the process it left")
        #expect(launcher.process(ref: process.ref) == process)

        // Terminated as a whole, the launch ends with what is left of it.
        #expect(launcher.signalLaunch(process.ref, .terminate) == true)
        straggler.waitForEnd()
        #expect(drive(loop) { exit != nil })
        #expect(exit == .killed(signal: SIGTERM, coreDumped: false), "the main process's own end")
        #expect(launcher.process(ref: process.ref) == nil)
        #expect(drive(loop) { !FileManager.default.fileExists(atPath: cgroup.path) })
    }

    /// An app terminated for overstaying went alone: what it had started in
    /// its cgroup ran on, with no budget, never frozen.
    @Test(.enabled(if: AppLauncherTests.writableHierarchy != nil)) func terminatingALaunchSignalsEveryProcessOfItsCgroup() throws {
        let loop = try EventLoop()
        let launcher = AppLauncher(
            loop: loop, sessionBus: nil, appBusAddress: nil, logger: logger, cgroupHierarchy: Self.writableHierarchy)
        var exit: LaunchExit?
        launcher.onExit = { _, status in exit = status }
        let process = try launchSleep(launcher, loop)
        defer { if exit == nil { launcher.killAll(process); _ = drive(loop) { exit != nil } } }
        let straggler = try Straggler(in: Cgroup(path: try #require(process.cgroupPath)))

        #expect(launcher.signalLaunch(process.ref, .terminate) == true)
        #expect(drive(loop) { exit != nil })
        #expect(exit == .killed(signal: SIGTERM, coreDumped: false))
        // Not a launch of this launcher: the caller signals the process alone.
        #expect(launcher.signalLaunch(ProcessRef(pid: straggler.child.pid, serial: 0), .terminate) == nil)
        #expect(straggler.waitForEnd() == SIGTERM, "the process it started got SIGTERM too")
    }

    /// A process that exited while its connection had not yet been seen to
    /// close was "frozen" with SIGSTOP, which reached nothing, and logged so.
    @Test func aProcessThatExitedIsNotStopped() throws {
        let loop = try EventLoop()
        let launcher = AppLauncher(loop: loop, sessionBus: nil, appBusAddress: nil, logger: logger, cgroupHierarchy: nil)
        let child = try #require(try? ProcessSpawner.spawn(
            commandLine: ["/bin/true"], environment: [], searchPath: nil, directory: nil, cgroupProcsFD: nil
        ).get())
        let table = launcher.processTable
        let ref = try table.open(pid: child.pid)
        defer { table.release(ref); waitForExit(child) }
        let freezer = Freezer(loop: loop, launcher: launcher, processes: table, systemd: nil, hierarchy: nil, logger: logger)
        let deadline = bgt_monotonic_usec() + 10_000_000
        while bgt_pidfd_exited(child.pidfd) == 0, bgt_monotonic_usec() < deadline { usleep(5_000) }
        #expect(table.hasExited(ref))

        freezer.freeze(.app(appID), [ref])
        #expect(!freezer.isFrozen(ref))
    }

    // MARK: systemd

    @Test(.enabled(if: AppLauncherTests.hasDBusMock)) func systemdScopeIsRequestedWhenTheUserManagerIsThere() throws {
        let bus = try TestBus()
        defer { bus.stop() }
        try bus.startMock(["--template", "systemd"])
        let loop = try EventLoop()
        let session = try Bus.open(.address(bus.address))
        try session.attach(to: loop)
        let launcher = AppLauncher(
            loop: loop, sessionBus: session, appBusAddress: nil, logger: logger, cgroupHierarchy: Self.writableHierarchy)
        var exit: LaunchExit?
        launcher.onExit = { _, status in exit = status }
        let process = try launchSleep(launcher, loop)
        defer { if exit == nil { launcher.killAll(process); _ = drive(loop) { exit != nil } } }

        #expect(process.placement == .systemdScope)
        #expect(process.cgroupPath == nil)
        let calls = try bus.mockCalls().filter { $0.method == "StartTransientUnit" }
        let call = try #require(calls.first)
        #expect(call.arguments.count == 4)
        #expect(call.arguments.first == .string(process.unit))
        #expect(call.arguments.dropFirst().first == .string("fail"))
        let properties = call.arguments.dropFirst(2).first?.description ?? ""
        #expect(properties.contains("\"PIDs\", <[\(process.pid)]>"), "\(properties)")
        #expect(properties.contains("\"CollectMode\", <\"inactive-or-failed\">"), "\(properties)")
        #expect(properties.contains("\"Description\""), "\(properties)")
        // The mock moves nothing, so killing falls back to the pidfd.
        #expect(launcher.killAll(process))
        #expect(drive(loop) { exit != nil })
        #expect(isReaped(process.pid))
    }

    @Test(.enabled(if: AppLauncherTests.hasDBusMock)) func refusedScopeFallsBackToACgroupOfItsOwn() throws {
        let bus = try TestBus()
        defer { bus.stop() }
        try bus.startMock(["org.freedesktop.systemd1", "/org/freedesktop/systemd1", "org.freedesktop.systemd1.Manager"])
        try bus.addMockMethod(
            "StartTransientUnit", "ssa(sv)a(sa(sv))", "o",
            "raise dbus.exceptions.DBusException('refused by the test', name='org.freedesktop.systemd1.UnitExists')")
        let loop = try EventLoop()
        let session = try Bus.open(.address(bus.address))
        try session.attach(to: loop)
        let launcher = AppLauncher(
            loop: loop, sessionBus: session, appBusAddress: nil, logger: logger, cgroupHierarchy: Self.writableHierarchy)
        var exit: LaunchExit?
        launcher.onExit = { _, status in exit = status }
        let process = try launchSleep(launcher, loop)
        defer { if exit == nil { launcher.killAll(process); _ = drive(loop) { exit != nil } } }

        if Self.writableHierarchy != nil {
            #expect(process.placement == .cgroup)
            let text = try String(contentsOfFile: "/proc/\(process.pid)/cgroup", encoding: .utf8)
            #expect(SandboxInspector.unitName(fromCgroup: text) == process.unit)
        } else {
            #expect(process.placement == .process)
        }
        #expect(launcher.killAll(process))
        #expect(drive(loop) { exit != nil })
        if let path = process.cgroupPath { #expect(drive(loop) { !FileManager.default.fileExists(atPath: path) }) }
    }

    /// A session bus without systemd, whose activation file for
    /// org.freedesktop.systemd1 (Debian ships one) must not be triggered.
    @Test(.enabled(if: AppLauncherTests.hasDBusMock)) func busWithoutSystemdUsesACgroupOfItsOwn() throws {
        let bus = try TestBus()
        defer { bus.stop() }
        let loop = try EventLoop()
        let session = try Bus.open(.address(bus.address))
        try session.attach(to: loop)
        let launcher = AppLauncher(
            loop: loop, sessionBus: session, appBusAddress: nil, logger: logger, cgroupHierarchy: Self.writableHierarchy)
        var exit: LaunchExit?
        launcher.onExit = { _, status in exit = status }
        let process = try launchSleep(launcher, loop)
        defer { if exit == nil { launcher.killAll(process); _ = drive(loop) { exit != nil } } }
        #expect(process.placement == (Self.writableHierarchy == nil ? .process : .cgroup))
        #expect(launcher.killAll(process))
        #expect(drive(loop) { exit != nil })
    }

    // MARK: Helpers

    /// Launches `sleep 30` and waits for the completion.
    private func launchSleep(_ launcher: AppLauncher, _ loop: EventLoop) throws -> LaunchedProcess {
        var result: Result<LaunchedProcess, LaunchError>?
        launcher.launch(appID: appID, commandLine: ["sleep", "30"], reason: "fetch") { result = $0 }
        #expect(drive(loop) { result != nil })
        return try #require(result).get()
    }

    /// A freezer over the launcher, and the launched process's handle in its process table.
    private func freezer(
        for process: LaunchedProcess, _ launcher: AppLauncher, _ loop: EventLoop
    ) throws -> (Freezer, ProcessRef, ProcessTable) {
        let table = launcher.processTable
        let ref = try table.open(pid: process.pid)
        let freezer = Freezer(
            loop: loop, launcher: launcher, processes: table, systemd: nil, hierarchy: Self.writableHierarchy,
            logger: logger)
        return (freezer, ref, table)
    }

    /// The app directories in the daemon's cgroup.
    private func scopeDirectories() -> Set<String> {
        guard let hierarchy = Self.writableHierarchy,
            let names = try? FileManager.default.contentsOfDirectory(atPath: hierarchy.ownDirectory)
        else { return [] }
        return Set(names.filter { $0.hasPrefix("app-bgtaskd-") })
    }
}

/// Runs the loop on this thread until `done()` or `seconds` pass; returns `done()`.
private func drive(_ loop: EventLoop, seconds: Double = 10, until done: () -> Bool) -> Bool {
    let deadline = bgt_monotonic_usec() + UInt64(seconds * 1_000_000)
    while !done() {
        if bgt_monotonic_usec() >= deadline { return false }
        _ = sd_event_run(loop.handle, 10_000)
    }
    return true
}

/// Whether `pid` is no unreaped child of ours (and no zombie at all, unless reused).
private func isReaped(_ pid: Int32) -> Bool {
    // Asked without reaping (WNOWAIT): waitpid reaped the child itself when
    // the launcher had not yet, which then read its end as unknown.
    var info = siginfo_t()
    guard waitid(P_PID, id_t(pid), &info, WEXITED | WNOHANG | WNOWAIT) == -1, errno == ECHILD else { return false }
    return processState(pid) != "Z"
}

/// The state letter in `/proc/PID/status` ("S", "T", "Z" …), nil when there is no such process.
private func processState(_ pid: Int32) -> String? {
    guard let text = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8) else { return nil }
    let line = text.split(separator: "\n").first { $0.hasPrefix("State:") }
    return line?.dropFirst(6).trimmingCharacters(in: .whitespaces).first.map(String.init)
}

/// A process of the test's own (so the test can reap it) in an app's
/// cgroup, as one the app started; killed and reaped when let go of, if
/// it has not ended by then.
private final class Straggler {
    let child: ProcessSpawner.Child
    private var ended = false

    init(in cgroup: Cgroup) throws {
        child = try #require(try? ProcessSpawner.spawn(
            commandLine: ["/bin/sleep", "30"], environment: [], searchPath: nil, directory: nil, cgroupProcsFD: nil
        ).get())
        try cgroup.move(pid: child.pid)
    }

    deinit {
        if !ended {
            _ = bgt_pidfd_send_signal(child.pidfd, SIGKILL)
            waitForExit(child)
        }
    }

    /// Waits for it to end and reaps it; the signal that ended it, if one did.
    @discardableResult
    func waitForEnd() -> Int32? {
        ended = true
        var status = siginfo_t()
        let reaped = waitid(P_PIDFD, id_t(child.pidfd), &status, WEXITED) == 0
        close(child.pidfd)
        return reaped && status.si_code == CLD_KILLED ? status._sifields._sigchld.si_status : nil
    }
}

/// Waits up to 10 s for a child of the test to exit and reaps it.
private func waitForExit(_ child: ProcessSpawner.Child) {
    let deadline = bgt_monotonic_usec() + 10_000_000
    while bgt_monotonic_usec() < deadline {
        if ProcessSpawner.reap(pidfd: child.pidfd) != .running { break }
        usleep(5_000)
    }
    close(child.pidfd)
}

/// A private dbus-daemon, and optionally a python-dbusmock service on it; started
/// with the launcher's own spawner and stopped (and reaped) by pidfd.
private final class TestBus {
    let directory: TemporaryDirectory
    let address: String
    private let daemon: ProcessSpawner.Child
    private var mock: ProcessSpawner.Child?
    private let control: Bus

    init() throws {
        directory = try TemporaryDirectory()
        address = "unix:path=" + directory.path("bus")
        var environment = ProcessInfo.processInfo.environment.map { "\($0.key)=\($0.value)" }
        environment.removeAll { $0.hasPrefix("DBUS_SESSION_BUS_ADDRESS=") }
        daemon = try ProcessSpawner.spawn(
            commandLine: ["/usr/bin/dbus-daemon", "--session", "--nofork", "--nopidfile", "--address=\(address)"],
            environment: environment, searchPath: nil, directory: nil, cgroupProcsFD: nil
        ).get()
        var connected: Bus?
        let deadline = bgt_monotonic_usec() + 10_000_000
        while connected == nil, bgt_monotonic_usec() < deadline {
            if FileManager.default.fileExists(atPath: directory.path("bus")) {
                connected = try? Bus.open(.address(address))
            }
            if connected == nil { usleep(10_000) }
        }
        guard let connected else {
            Self.stop(daemon)
            throw TestBusError(description: "dbus-daemon did not come up at \(address)")
        }
        control = connected
    }

    /// Starts `python3 -m dbusmock --session ARGS` and waits for its name.
    func startMock(_ arguments: [String]) throws {
        let environment = ProcessInfo.processInfo.environment.filter { $0.key != "DBUS_SESSION_BUS_ADDRESS" }
            .map { "\($0.key)=\($0.value)" } + ["DBUS_SESSION_BUS_ADDRESS=\(address)"]
        mock = try ProcessSpawner.spawn(
            commandLine: ["/usr/bin/python3", "-m", "dbusmock", "--session"] + arguments,
            environment: environment, searchPath: nil, directory: nil, cgroupProcsFD: nil
        ).get()
        let deadline = bgt_monotonic_usec() + 20_000_000
        while bgt_monotonic_usec() < deadline {
            let call = try control.newMethodCall(
                destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus", interface: "org.freedesktop.DBus",
                member: "NameHasOwner")
            try call.append(SystemdUserManager.busName)
            if try control.call(call).readBool() { return }
            usleep(20_000)
        }
        throw TestBusError(description: "dbusmock did not take \(SystemdUserManager.busName)")
    }

    /// dbusmock's `AddMethod` on the main object's interface.
    func addMockMethod(_ name: String, _ inSignature: String, _ outSignature: String, _ code: String) throws {
        let call = try control.newMethodCall(
            destination: SystemdUserManager.busName, path: SystemdUserManager.path,
            interface: "org.freedesktop.DBus.Mock", member: "AddMethod")
        for argument in ["", name, inSignature, outSignature, code] { try call.append(argument) }
        _ = try control.call(call)
    }

    /// dbusmock's `GetCalls`: every call the mock received, oldest first.
    func mockCalls() throws -> [(method: String, arguments: [BusValue])] {
        let call = try control.newMethodCall(
            destination: SystemdUserManager.busName, path: SystemdUserManager.path,
            interface: "org.freedesktop.DBus.Mock", member: "GetCalls")
        guard case .array(_, let entries)? = try control.call(call).readValue() else { return [] }
        return entries.compactMap { entry in
            guard case .structure(let fields) = entry, fields.count == 3, case .string(let method) = fields[1],
                case .array(_, let arguments) = fields[2]
            else { return nil }
            return (method, arguments.map(\.unwrapped))
        }
    }

    func stop() {
        if let mock { Self.stop(mock) }
        mock = nil
        Self.stop(daemon)
    }

    private static func stop(_ child: ProcessSpawner.Child) {
        guard bgt_pidfd_send_signal(child.pidfd, SIGTERM) == 0 else {
            close(child.pidfd)
            return
        }
        waitForExit(child)
    }
}

private struct TestBusError: Error, CustomStringConvertible {
    var description: String
}
