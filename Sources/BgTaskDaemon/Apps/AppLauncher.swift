import BgTaskCore
import CBgTaskShim
import Foundation
import Glibc
import Logging
import SDBus

/// Starts apps for background events and tracks them until they exit
/// (docs/DESIGN.md §3). Confined to the loop's thread.
///
/// Implementation notes:
/// - Placement, in order of preference: a transient scope of the systemd user
///   manager (when `org.freedesktop.systemd1` is on the session bus); else a
///   cgroup v2 directory of its own under the daemon's cgroup, which the child
///   enters before `execve`; else a plain child tracked by its pidfd only.
///   Under systemd the app is spawned first and handed to systemd by pid (as
///   desktop launchers do), so for a moment it runs in the daemon's cgroup; if
///   systemd refuses, the launcher moves it into a cgroup of its own instead.
/// - `execve` failures are known synchronously (see `bgtask_spawn.h`) and
///   become ``LaunchError``s. Nothing is retried here; the core decides.
/// - `completion` always runs from the loop, never inside ``launch``. The
///   pidfd is watched only after it ran, so ``onExit`` for a process always
///   comes after its successful completion. A launcher released while a launch
///   waits for the bus never calls that launch's completion.
/// - Every child is reaped (`waitid(P_PIDFD)`) when its pidfd becomes
///   readable. A launcher dropped while its apps still run leaves them to be
///   reaped by whoever inherits them when the daemon exits.
/// - A cgroup the launcher made is removed once it is empty; if the app left
///   other processes behind, that happens when they are gone (`cgroup.events`
///   is watched), or at once after ``killAll(_:)``.
/// - A launch with a cgroup of its own is the whole cgroup: it is signalled as
///   a whole (``signalLaunch(_:_:killAfter:)``), and a main process that exits before
///   the app checked in, leaving others there (a launcher script that forked
///   the app and returned), ends the launch only once they are gone too.
final class AppLauncher {
    /// Called once when a launched process has exited and was reaped (for
    /// one whose launch lived on in its cgroup, once that cgroup emptied).
    var onExit: (LaunchedProcess, ExitStatus) -> Void = { _, _ in }

    /// Whether the launch of this process still waits for its app to check
    /// in; the daemon asks its engine. Until then the app may be a process
    /// the launched one started.
    var awaitsCheckIn: (LaunchedProcess) -> Bool = { _ in false }

    /// The processes, other than the one launched, of the app's checked-in
    /// connections; the daemon asks its engine. When the launched process
    /// exits, the launch goes on as the first of them in its cgroup (a
    /// launcher script's app; a copy the user opened is elsewhere).
    var checkedInProcesses: (LaunchedProcess) -> [ProcessRef] = { _ in [] }

    /// A launch goes on as another process (see ``handOver(_:to:)``): the
    /// daemon tells its engine and notes the new process for a later run.
    var onHandOver: (_ from: LaunchedProcess, _ to: LaunchedProcess) -> Void = { _, _ in }

    /// Variables of the daemon's own that an app must not inherit: they
    /// describe the daemon's service (sd_notify, socket activation, watchdog),
    /// and an app acting on them would speak for the daemon.
    static let daemonOnlyVariables: Set<String> = [
        "NOTIFY_SOCKET", "LISTEN_PID", "LISTEN_FDS", "LISTEN_FDNAMES", "WATCHDOG_PID", "WATCHDOG_USEC",
        "INVOCATION_ID",
    ]

    /// How the names of daemons' app groups begin.
    static let groupPrefix = "bgtaskd-apps-"

    private let loop: EventLoop
    private let systemd: SystemdUserManager?
    private let appBusAddress: String?
    private let logger: Logger
    private let hierarchy: CgroupHierarchy?
    /// The directory app cgroups are made in: a group of this daemon's own
    /// under its cgroup (``init(loop:sessionBus:appBusAddress:logger:cgroupGroup:)``),
    /// so that what it reclaims at start is only ever its own.
    private let appsDirectory: String?
    private var loggedNoCgroup = false

    /// One launched process, from spawn until it is reaped.
    private final class Tracked {
        var process: LaunchedProcess
        /// The child's pidfd, owned by the process table (the launcher holds the entry until it reaps).
        let pidfd: Int32
        var watch: EventSource?
        /// The cgroup the launcher made for it.
        var cgroup: Cgroup?
        /// The systemd scope's cgroup, once looked up.
        var scopeCgroup: Cgroup?

        init(process: LaunchedProcess, pidfd: Int32, cgroup: Cgroup?) {
            self.process = process
            self.pidfd = pidfd
            self.cgroup = cgroup
        }
    }

    /// A cgroup of the launcher's whose main process exited while others remained.
    private final class Lingering {
        let cgroup: Cgroup
        let appID: AppID
        let eventsFD: Int32
        var watch: EventSource?
        /// The launch lives on in the processes left (its app had not checked
        /// in): its exit is reported when they are gone.
        var exited: (process: LaunchedProcess, status: ExitStatus)?

        init(cgroup: Cgroup, appID: AppID, eventsFD: Int32) {
            self.cgroup = cgroup
            self.appID = appID
            self.eventsFD = eventsFD
        }
    }

    /// By pid: unique among our unreaped children.
    private var running: [Int32: Tracked] = [:]
    /// By unit name.
    private var lingering: [String: Lingering] = [:]
    /// SIGKILLs due after a SIGTERM, by cgroup path.
    private var pendingKills: [String: SDBus.Timer] = [:]

    /// What one `launch` call is about.
    private struct Request {
        var appID: AppID
        var commandLine: [String]
        /// The desktop entry's `Path=`; nil: the home directory.
        var directory: String?
        var reason: String
        var unit: String
        var completion: (Result<LaunchedProcess, LaunchError>) -> Void

        func failure(_ code: LaunchError.Code, _ reason: String, errno: Int32? = nil) -> LaunchError {
            LaunchError(code: code, appID: appID, commandLine: commandLine, reason: reason, errno: errno)
        }
    }

    /// - Parameters:
    ///   - sessionBus: where to look for the systemd user manager; nil: never use systemd.
    ///   - appBusAddress: the address of the bus the daemon serves, when it was
    ///     given one: apps get it as `DBUS_SESSION_BUS_ADDRESS`.
    ///   - cgroupGroup: the name of the directory under the daemon's cgroup that
    ///     holds its apps' cgroups (one per state directory: daemons sharing a
    ///     cgroup never touch each other's apps).
    ///   - processes: the daemon's process table, where every child is entered.
    convenience init(
        loop: EventLoop, sessionBus: Bus?, appBusAddress: String?, logger: Logger, cgroupGroup: String, processes: ProcessTable
    ) {
        self.init(
            loop: loop, sessionBus: sessionBus, appBusAddress: appBusAddress, logger: logger,
            cgroupHierarchy: CgroupHierarchy.current(), cgroupGroup: cgroupGroup, processes: processes)
    }

    /// As above, with the cgroup hierarchy given (nil: make no cgroups), for
    /// tests; without a group, app cgroups are made right in the daemon's cgroup.
    init(
        loop: EventLoop, sessionBus: Bus?, appBusAddress: String?, logger: Logger, cgroupHierarchy: CgroupHierarchy?,
        cgroupGroup: String? = nil, processes: ProcessTable? = nil
    ) {
        self.processTable = processes ?? ProcessTable(logger: logger)
        self.loop = loop
        self.systemd = sessionBus.map { SystemdUserManager(bus: $0) }
        self.appBusAddress = appBusAddress
        self.logger = logger
        self.hierarchy = cgroupHierarchy
        self.appsDirectory = cgroupHierarchy.map { hierarchy in
            cgroupGroup.map { hierarchy.ownDirectory + "/" + $0 } ?? hierarchy.ownDirectory
        }
        self.cgroupGroup = cgroupGroup
    }

    /// The name of the daemon's app group, which also marks its launches as its own (``LaunchMark/owner``).
    let cgroupGroup: String?
    /// The one table of processes; the launcher holds its children's entries until it reaps them.
    let processTable: ProcessTable

    deinit {
        for record in running.values {
            record.watch?.cancel()
            // Reap what has exited already; the rest outlives the launcher.
            _ = ProcessSpawner.reap(pidfd: record.pidfd)
            processTable.release(record.process.ref)
        }
        for entry in lingering.values {
            entry.watch?.cancel()
            close(entry.eventsFD)
        }
    }

    /// The processes launched and not yet reaped.
    var processes: [LaunchedProcess] { running.values.map(\.process) }

    /// The launched process with this pid, while it runs.
    func process(pid: Int32) -> LaunchedProcess? { running[pid]?.process }

    /// The app of the launch `pid` belongs to: the launched process itself,
    /// or any process in the cgroup the launcher made for a launch that is
    /// still on (what a launcher script started, also after the script
    /// exited). Nil for anything else, helpers left by a launch that ended
    /// included.
    func launchedAppID(containing pid: Int32) -> AppID? {
        if let process = running[pid]?.process { return process.appID }
        let units = running.values.compactMap { $0.process.placement == .cgroup ? ($0.process.unit, $0.process.appID) : nil }
            + lingering.compactMap { unit, entry in entry.exited.map { (unit, $0.process.appID) } }
        guard !units.isEmpty, let text = try? String(contentsOfFile: "/proc/\(pid)/cgroup", encoding: .utf8),
              let path = CgroupHierarchy.unifiedPath(fromProcCgroup: text)
        else { return nil }
        return units.first { path.hasSuffix("/" + $0.0) }?.1
    }

    /// The app checked in from `ref`. If its launch lives on in its cgroup
    /// (the process launched exited first, leaving others there) and `ref`
    /// is in that cgroup, the launch goes on as `ref`: tracked by its pidfd,
    /// its exit ends the launch, and what it leaves behind no longer holds
    /// the launch open (``onHandOver`` tells the daemon).
    func handOver(_ appID: AppID, to ref: ProcessRef) {
        guard let (unit, entry) = lingering.first(where: { $0.value.exited?.process.appID == appID && Self.isInUnit(ref.pid, $0.key) }),
              let exited = entry.exited, continueLaunch(exited.process, as: ref, in: entry.cgroup)
        else { return }
        entry.watch?.cancel()
        close(entry.eventsFD)
        lingering[unit] = nil
    }

    /// Tracks `ref`, if it runs in `cgroup`, as the launch `process` was;
    /// returns whether it does.
    private func continueLaunch(_ process: LaunchedProcess, as ref: ProcessRef, in cgroup: Cgroup) -> Bool {
        guard ref != process.ref, running[ref.pid] == nil, Self.isInUnit(ref.pid, process.unit),
              let held = try? processTable.open(pid: ref.pid)
        else { return false }
        guard held == ref, let pidfd = processTable.pidfd(of: ref), bgt_pidfd_exited(pidfd) == 0 else {
            processTable.release(held)
            return false
        }
        let next = LaunchedProcess(
            appID: process.appID, pid: ref.pid, ref: ref, unit: process.unit, cgroupPath: cgroup.path, reason: process.reason,
            placement: .cgroup)
        running[ref.pid] = Tracked(process: next, pidfd: pidfd, cgroup: cgroup)
        watchExit(of: ref.pid)
        // Unwatched, its exit would never end the launch.
        guard running[ref.pid]?.watch != nil else {
            running[ref.pid] = nil
            processTable.release(ref)
            return false
        }
        logger.info("\(process.appID) checked in from pid \(ref.pid), which its launched process started: the launch goes on as it")
        onHandOver(process, next)
        return true
    }

    /// The launch `ref` names: while its process runs, or while the launch
    /// lives on in the processes its exited main process left in its cgroup.
    func process(ref: ProcessRef) -> LaunchedProcess? {
        if let record = running[ref.pid], record.process.ref == ref { return record.process }
        return livingOn(ref)?.exited?.process
    }

    private func livingOn(_ ref: ProcessRef) -> Lingering? {
        lingering.values.first { $0.exited?.process.ref == ref }
    }

    // MARK: Launching

    /// Starts `commandLine` for `appID` in the background, in `directory`
    /// (nil: the home directory); `completion` runs on the loop.
    func launch(
        appID: AppID, commandLine: [String], directory: String? = nil, reason: String,
        completion: @escaping (Result<LaunchedProcess, LaunchError>) -> Void
    ) {
        let request = Request(
            appID: appID, commandLine: commandLine, directory: directory, reason: reason, unit: LaunchUnitName.make(for: appID),
            completion: completion)
        guard !commandLine.isEmpty else {
            return finish(request, .failure(request.failure(.emptyCommandLine, "the command line is empty")))
        }
        guard let systemd else { return launchInOwnCgroup(request) }
        systemd.checkPresence { [weak self] result in
            guard let self else { return }
            switch result {
            case .success(true):
                self.launchUnderSystemd(request, systemd)
            case .success(false):
                self.launchInOwnCgroup(request)
            case .failure(let error):
                self.logger.debug("cannot ask whether systemd is on the session bus: \(error)")
                self.launchInOwnCgroup(request)
            }
        }
    }

    /// Called with the cgroup a child is about to enter (tests: to remove it there, as another daemon's start may).
    var beforeSpawnIntoCgroup: ((Cgroup) -> Void)?

    /// Placement 2 or 3: the child enters a fresh cgroup before exec, if one can be made.
    /// `again`: this is the one retry after the cgroup vanished under the launch.
    private func launchInOwnCgroup(_ request: Request, again: Bool = false) {
        let cgroup: Cgroup?
        switch makeCgroup(for: request) {
        case .success(let made): cgroup = made
        case .failure(let error): return finish(request, .failure(error))
        }
        var procsFD: Int32?
        if let cgroup {
            do throws(Cgroup.Failure) {
                procsFD = try cgroup.openProcs()
                beforeSpawnIntoCgroup?(cgroup)
            } catch {
                try? cgroup.remove()
                return finish(request, .failure(request.failure(.cgroup, error.description, errno: error.errno)))
            }
        }
        let spawned = spawn(request, cgroupProcsFD: procsFD)
        if let procsFD { close(procsFD) }
        switch spawned {
        case .failure(let error):
            // The failed child was reaped, so the cgroup is empty again.
            if let cgroup { try? cgroup.remove() }
            // ENODEV: the cgroup (or the daemon's group above it) was removed between
            // its making and the child entering it; another daemon starting up removes
            // empty groups of daemons it does not know. Made again, once.
            if error.code == .cgroup, error.errno == ENODEV, !again {
                logger.info("the cgroup made for \(request.appID) vanished before it entered it: making it again")
                return launchInOwnCgroup(request, again: true)
            }
            finish(request, .failure(error))
        case .success(let child):
            let process = LaunchedProcess(
                appID: request.appID, pid: child.pid, ref: processTable.adopt(pid: child.pid, pidfd: child.pidfd),
                unit: request.unit, cgroupPath: cgroup?.path, reason: request.reason, placement: cgroup == nil ? .process : .cgroup)
            running[child.pid] = Tracked(process: process, pidfd: child.pidfd, cgroup: cgroup)
            logger.info("launched \(process) for \(request.reason)\(cgroup.map { " in \($0)" } ?? "")")
            finish(request, .success(process))
        }
    }

    /// Placement 1: spawn, then hand the pid to systemd as a transient scope.
    private func launchUnderSystemd(_ request: Request, _ systemd: SystemdUserManager) {
        let child: ProcessSpawner.Child
        switch spawn(request, cgroupProcsFD: nil) {
        case .failure(let error): return finish(request, .failure(error))
        case .success(let spawned): child = spawned
        }
        let process = LaunchedProcess(
            appID: request.appID, pid: child.pid, ref: processTable.adopt(pid: child.pid, pidfd: child.pidfd),
            unit: request.unit, cgroupPath: nil, reason: request.reason, placement: .systemdScope)
        let record = Tracked(process: process, pidfd: child.pidfd, cgroup: nil)
        running[child.pid] = record
        let description = "\(request.appID), launched by bgtaskd for \(request.reason)"
        systemd.startScope(name: request.unit, pid: child.pid, description: description) { [weak self] result in
            guard let self else { return }
            switch result {
            case .success:
                self.logger.info("launched \(process) for \(request.reason) in systemd scope \(request.unit)")
            case .failure(let error):
                self.logger.warning(
                    "systemd did not start scope \(request.unit) for \(request.appID): \(error); placing pid \(child.pid) in a cgroup of its own")
                self.moveIntoOwnCgroup(record, request)
            }
            self.finish(request, .success(record.process))
        }
    }

    /// The fallback when systemd refused the scope: the running process is
    /// moved by the parent. Failing that, it stays where it is (it runs, and
    /// killing it over its placement would be worse).
    private func moveIntoOwnCgroup(_ record: Tracked, _ request: Request) {
        let old = record.process
        var cgroup: Cgroup?
        switch makeCgroup(for: request) {
        case .success(let made): cgroup = made
        case .failure(let error): logger.warning("\(error); tracking pid \(old.pid) by its pidfd only")
        }
        if let made = cgroup {
            do throws(Cgroup.Failure) {
                try made.move(pid: old.pid)
            } catch {
                if error.errno != ESRCH { logger.warning("\(error); tracking pid \(old.pid) by its pidfd only") }
                try? made.remove()
                cgroup = nil
            }
        }
        record.cgroup = cgroup
        record.process = LaunchedProcess(
            appID: old.appID, pid: old.pid, ref: old.ref, unit: old.unit, cgroupPath: cgroup?.path, reason: old.reason,
            placement: cgroup == nil ? .process : .cgroup)
    }

    /// A new cgroup for the request: nil when cgroups cannot be made here
    /// (logged once), an error when making one that should work failed.
    private func makeCgroup(for request: Request) -> Result<Cgroup?, LaunchError> {
        guard let hierarchy, let appsDirectory else {
            noteNoCgroup("no cgroup v2 hierarchy is mounted, or the daemon's cgroup in it is unknown")
            return .success(nil)
        }
        if appsDirectory != hierarchy.ownDirectory, mkdir(appsDirectory, 0o755) != 0, errno != EEXIST {
            let reason = ProcessSpawner.describe(errno: errno)
            if [EACCES, EPERM, EROFS, ENOENT].contains(errno) {
                noteNoCgroup("cannot create \(appsDirectory): \(reason)")
                return .success(nil)
            }
            return .failure(request.failure(.cgroup, "cannot create \(appsDirectory): \(reason)", errno: errno))
        }
        guard request.unit.utf8.count <= Int(NAME_MAX) else {
            logger.warning("the scope name for \(request.appID) is too long for a cgroup; launching it without one")
            return .success(nil)
        }
        do throws(Cgroup.Failure) {
            return .success(try Cgroup.create(at: appsDirectory + "/" + request.unit))
        } catch {
            // Not allowed or not there: cgroups cannot be made here at all.
            if [EACCES, EPERM, EROFS, ENOENT].contains(error.errno) {
                noteNoCgroup("cannot create cgroups in \(appsDirectory): \(ProcessSpawner.describe(errno: error.errno))")
                return .success(nil)
            }
            return .failure(request.failure(.cgroup, error.description, errno: error.errno))
        }
    }

    private func noteNoCgroup(_ why: String) {
        guard !loggedNoCgroup else { return }
        loggedNoCgroup = true
        logger.notice("\(why); launched apps get no cgroup of their own, so suspending one stops it with SIGSTOP")
    }

    private func spawn(_ request: Request, cgroupProcsFD: Int32?) -> Result<ProcessSpawner.Child, LaunchError> {
        let environment = environment(for: request)
        let home = ProcessSpawner.value(of: "HOME", in: environment) ?? Self.homeFromPasswd()
        let result = ProcessSpawner.spawn(
            commandLine: request.commandLine, environment: environment,
            searchPath: ProcessSpawner.value(of: "PATH", in: environment), directory: request.directory ?? home,
            cgroupProcsFD: cgroupProcsFD)
        return result.mapError { failure in
            let code: LaunchError.Code
            switch failure.stage {
            case .lookup, .exec: code = .exec
            case .cgroup: code = .cgroup
            case .fork, .setup: code = .spawn
            }
            return request.failure(code, failure.description, errno: failure.errno)
        }
    }

    private func environment(for request: Request) -> [String] {
        var base: [String] = []
        var index = 0
        while let entry = environ[index] {
            base.append(String(cString: entry))
            index += 1
        }
        return Self.environment(
            base: base, appID: request.appID, reason: request.reason, appBusAddress: appBusAddress)
    }

    /// `base` (the daemon's environment) minus ``daemonOnlyVariables``, plus
    /// `BGTASKD_LAUNCH_REASON`, `BGTASKD_APP_ID` and, when the daemon serves a
    /// bus given by address, `DBUS_SESSION_BUS_ADDRESS`.
    static func environment(base: [String], appID: AppID, reason: String, appBusAddress: String?) -> [String] {
        var added = ["BGTASKD_LAUNCH_REASON=\(reason)", "BGTASKD_APP_ID=\(appID.rawValue)"]
        if let appBusAddress { added.append("DBUS_SESSION_BUS_ADDRESS=\(appBusAddress)") }
        let replaced = Set(added.map(variableName)).union(daemonOnlyVariables)
        return base.filter { !replaced.contains(variableName($0)) } + added
    }

    private static func variableName(_ entry: String) -> String { String(entry.prefix { $0 != "=" }) }

    private static func homeFromPasswd() -> String? {
        var entry = passwd()
        var found: UnsafeMutablePointer<passwd>?
        var buffer = [CChar](repeating: 0, count: 4096)
        guard getpwuid_r(getuid(), &entry, &buffer, buffer.count, &found) == 0, found != nil,
            let directory = entry.pw_dir
        else { return nil }
        return String(cString: directory)
    }

    private func finish(_ request: Request, _ result: Result<LaunchedProcess, LaunchError>) {
        if case .failure(let error) = result { logger.error("\(error)") }
        loop.later { [weak self] in
            if case .success(let process) = result { self?.watchExit(of: process.pid) }
            request.completion(result)
        }
    }

    // MARK: Exit and clean-up

    private func watchExit(of pid: Int32) {
        guard let record = running[pid], record.watch == nil else { return }
        do throws(BusError) {
            record.watch = try loop.watch(fd: record.pidfd, events: UInt32(EPOLLIN.rawValue)) { [weak self] _ in
                self?.reap(pid: pid)
            }
        } catch {
            // Without a watch nobody would reap it: better to see it at once.
            logger.critical("cannot watch pid \(pid) of \(record.process.appID): \(error)")
        }
    }

    private func reap(pid: Int32) {
        guard let record = running[pid] else { return }
        let status: ExitStatus
        switch ProcessSpawner.reap(pidfd: record.pidfd) {
        case .running:
            return
        case .exited(let exit):
            status = exit
        case .failed(let errno):
            if errno != ECHILD { logger.error("cannot reap pid \(pid): \(ProcessSpawner.describe(errno: errno))") }
            status = .unknown
        }
        record.watch?.cancel()
        running[pid] = nil
        processTable.release(record.process.ref)
        logger.info("\(record.process) \(status)")
        if let cgroup = record.cgroup {
            // The app checked in from a process this one started, which runs on: the launch is that one's now.
            if cgroup.isPopulated == true,
               checkedInProcesses(record.process).contains(where: { continueLaunch(record.process, as: $0, in: cgroup) }) {
                return
            }
            if cgroup.isPopulated == true, awaitsCheckIn(record.process) {
                logger.info("\(record.process.appID) has not checked in, and processes of its launch remain in \(cgroup): the launch goes on in them")
                return removeWhenEmpty(cgroup, unit: record.process.unit, appID: record.process.appID, exited: (record.process, status))
            }
            removeWhenEmpty(cgroup, unit: record.process.unit, appID: record.process.appID)
        }
        onExit(record.process, status)
    }

    /// Cgroups of apps launched by an earlier run that died without cleaning
    /// up (a SIGKILL, a crash): each is thawed (a frozen app must not stay
    /// frozen forever) and removed when empty. The app still running in
    /// each of the others is taken over (see ``adopt(_:unit:appID:mark:)``) and
    /// returned, for the engine to hold it to what a launched app is held
    /// to; a cgroup whose app cannot be taken over is removed once its
    /// processes are gone. Call once at start, before launching anything.
    @discardableResult
    func reclaimCgroupsOfEarlierRuns(launched: [String: LaunchMark] = [:]) -> [LaunchedProcess] {
        removeEmptyGroupsOfOtherDaemons()
        // Only in the daemon's own group: other daemons' apps may share the parent cgroup.
        guard cgroupGroup != nil, let appsDirectory,
              let names = try? FileManager.default.contentsOfDirectory(atPath: appsDirectory) else { return [] }
        Self.thawCgroups(named: names, in: appsDirectory, logger: logger)
        var removed = 0
        var adopted: [LaunchedProcess] = []
        for unit in names.sorted() where Self.isLaunchUnit(unit) {
            let cgroup = Cgroup(path: appsDirectory + "/" + unit)
            if cgroup.isPopulated == false, (try? cgroup.remove()) != nil {
                removed += 1
            } else if let appID = SandboxInspector.appID(fromUnit: unit) {
                if let mark = launched[unit], mark.placement == .cgroup, let process = adopt(cgroup, unit: unit, appID: appID, mark: mark) {
                    adopted.append(process)
                } else {
                    removeWhenEmpty(cgroup, unit: unit, appID: appID)
                }
            }
        }
        if removed > 0 { logger.info("removed \(removed) empty cgroups of apps launched by an earlier run") }
        return adopted
    }

    /// Whether `name` is that of a cgroup the launcher makes for a launch.
    private static func isLaunchUnit(_ name: String) -> Bool {
        name.hasPrefix("app-\(LaunchUnitName.launcher)-") && name.hasSuffix(".scope")
    }

    /// Thaws the launches' cgroups among `names` in `appsDirectory` that an
    /// earlier run left frozen; returns how many.
    @discardableResult
    private static func thawCgroups(named names: [String], in appsDirectory: String, logger: Logger) -> Int {
        var thawed = 0
        for unit in names.sorted() where isLaunchUnit(unit) {
            let cgroup = Cgroup(path: appsDirectory + "/" + unit)
            guard cgroup.isFreezeRequested else { continue }
            do throws(Cgroup.Failure) {
                try cgroup.setFrozen(false)
                thawed += 1
                logger.notice("thawed \(cgroup), left frozen by an earlier run")
            } catch {
                logger.warning("\(error)")
            }
        }
        return thawed
    }

    /// Thaws what an earlier run left frozen in the cgroups of its launches
    /// (`group` under the daemon's own cgroup), for a start that cannot go
    /// on: the freeze journal lists them too, but a full disk can have kept
    /// it from being written. Returns how many were thawed.
    static func thawCgroupsOfEarlierRuns(group: String, logger: Logger) -> Int {
        guard let hierarchy = CgroupHierarchy.current() else { return 0 }
        let appsDirectory = hierarchy.ownDirectory + "/" + group
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: appsDirectory) else { return 0 }
        return thawCgroups(named: names, in: appsDirectory, logger: logger)
    }

    /// Takes over the app an earlier run launched into `cgroup`: the process
    /// it launched there (`mark`), if that very process still runs in it;
    /// not a process the app left behind when it exited. From here on it is
    /// tracked as if launched by this run, but it is not this daemon's child,
    /// so how it ends is not known (``ExitStatus/unknown``). nil, and logged,
    /// when it is gone or cannot be held.
    private func adopt(_ cgroup: Cgroup, unit: String, appID: AppID, mark: LaunchMark) -> LaunchedProcess? {
        guard let (ref, pidfd) = hold(mark, of: appID, in: "\(cgroup)") else { return nil }
        // Still in the cgroup: what it runs there is the app's, not another's.
        guard Self.isInUnit(mark.pid, unit) else {
            processTable.release(ref)
            return nil
        }
        let process = LaunchedProcess(
            appID: appID, pid: mark.pid, ref: ref, unit: unit, cgroupPath: cgroup.path, reason: mark.reason, placement: .cgroup)
        return track(process, pidfd: pidfd, cgroup: cgroup)
    }

    /// Apps an earlier run launched outside a cgroup of its own (into a
    /// systemd scope, or as a plain child where no cgroup could be made) and
    /// that still run: each is taken over as one in a cgroup is (see
    /// ``reclaimCgroupsOfEarlierRuns(launched:)``), if its mark is of this
    /// boot and the process it names still runs, with the same start. One in
    /// a scope that no longer holds it is held by its pidfd only. Call once
    /// at start, before launching anything.
    func takeOverProcessesOfEarlierRuns(launched: [String: LaunchMark]) -> [LaunchedProcess] {
        var adopted: [LaunchedProcess] = []
        for (unit, mark) in launched.sorted(by: { $0.key < $1.key }) where mark.placement != .cgroup {
            guard let appID = SandboxInspector.appID(fromUnit: unit) else {
                logger.info("not taking over pid \(mark.pid) of \(unit): no app id in the unit's name")
                continue
            }
            // Another daemon's, on a copy of this database: it may run still, and holds it.
            guard mark.owner == cgroupGroup else {
                logger.info("not taking over pid \(mark.pid) of \(appID): another daemon launched it (\(mark.owner ?? "none named"))")
                continue
            }
            // Pids and start times repeat from one boot to the next.
            guard mark.bootID != nil, mark.bootID == LaunchMark.currentBootID else {
                logger.info("not taking over pid \(mark.pid) of \(appID): it was launched before the machine last started")
                continue
            }
            guard let (ref, pidfd) = hold(mark, of: appID, in: mark.placement == .systemdScope ? "scope \(unit)" : "no cgroup") else { continue }
            let placement: LaunchedProcess.Placement = mark.placement == .systemdScope && systemd != nil && Self.isInUnit(mark.pid, unit)
                ? .systemdScope : .process
            let process = LaunchedProcess(
                appID: appID, pid: mark.pid, ref: ref, unit: unit, cgroupPath: nil, reason: mark.reason, placement: placement)
            adopted.append(track(process, pidfd: pidfd, cgroup: nil))
        }
        return adopted
    }

    /// Opens the process `mark` names in the process table, if it is still
    /// the one launched (the same start time, checked again once its pidfd
    /// holds it); nil, and logged, when it is gone or cannot be held. From
    /// there on it is tracked as if launched by this run, but it is not this
    /// daemon's child, so how it ends is not known (``ExitStatus/unknown``).
    private func hold(_ mark: LaunchMark, of appID: AppID, in place: String) -> (ProcessRef, Int32)? {
        let pid = mark.pid
        guard let start = Self.startTime(of: pid), start == mark.startTime else {
            let gone = Self.startTime(of: pid) == nil ? "is gone" : "is gone (its pid names another process now)"
            logger.info("the process \(appID) was launched as (pid \(pid)) \(gone)\(mark.placement == .cgroup ? "; what it left in \(place) runs on untracked" : "")")
            return nil
        }
        let ref: ProcessRef
        do {
            ref = try processTable.open(pid: pid)
        } catch {
            logger.info("cannot take over pid \(pid) of \(appID) in \(place): \(error)")
            return nil
        }
        // Held by its pidfd from here: with the same start time, it is the process launched, not one that reused its pid.
        guard let pidfd = processTable.pidfd(of: ref), bgt_pidfd_exited(pidfd) == 0, Self.startTime(of: pid) == mark.startTime else {
            logger.info("the process \(appID) was launched as (pid \(pid)) has exited")
            processTable.release(ref)
            return nil
        }
        return (ref, pidfd)
    }

    /// Whether `pid` lives in the cgroup named `unit` (a scope or a launcher cgroup: the last component of its path).
    private static func isInUnit(_ pid: Int32, _ unit: String) -> Bool {
        guard let text = try? String(contentsOfFile: "/proc/\(pid)/cgroup", encoding: .utf8) else { return false }
        return CgroupHierarchy.unifiedPath(fromProcCgroup: text)?.hasSuffix("/" + unit) == true
    }

    private func track(_ process: LaunchedProcess, pidfd: Int32, cgroup: Cgroup?) -> LaunchedProcess {
        running[process.pid] = Tracked(process: process, pidfd: pidfd, cgroup: cgroup)
        watchExit(of: process.pid)
        let place = switch process.placement {
        case .cgroup: ""
        case .systemdScope: " in its systemd scope"
        case .process: ", held by its pidfd only"
        }
        logger.notice("took over \(process), launched for \(process.reason) by an earlier run and still running\(place)")
        return process
    }

    /// When the process started, in clock ticks since boot (`/proc/PID/stat`, field 22).
    static func startTime(of pid: Int32) -> UInt64? {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
              let close = stat.lastIndex(of: ")") else { return nil }
        // Fields after the command's closing parenthesis start at field 3 (state).
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        return fields.count > 19 ? UInt64(fields[19]) : nil
    }

    /// Groups of other daemons (other state directories) whose apps have all
    /// exited after their daemon stopped: their empty directories are removed,
    /// so that short-lived daemons (tests, demos) leave no litter. Only empty
    /// cgroups are touched: nothing of a running daemon's app is thawed or
    /// moved, and a live daemon makes its group again when it next launches.
    private func removeEmptyGroupsOfOtherDaemons() {
        guard let hierarchy, let cgroupGroup,
              let groups = try? FileManager.default.contentsOfDirectory(atPath: hierarchy.ownDirectory)
        else { return }
        var removed = 0
        for group in groups where group.hasPrefix(Self.groupPrefix) && group != cgroupGroup {
            let directory = hierarchy.ownDirectory + "/" + group
            guard Cgroup(path: directory).isPopulated == false,
                  let units = try? FileManager.default.contentsOfDirectory(atPath: directory) else { continue }
            for unit in units where unit.hasPrefix("app-\(LaunchUnitName.launcher)-") && unit.hasSuffix(".scope") {
                _ = rmdir(directory + "/" + unit)
            }
            if rmdir(directory) == 0 { removed += 1 }
        }
        if removed > 0 { logger.info("removed \(removed) empty cgroup groups left by other bgtaskd instances") }
    }

    /// At shutdown: the group directory goes if no app cgroup is left in it.
    func removeGroupIfEmpty() {
        guard cgroupGroup != nil, let appsDirectory else { return }
        _ = rmdir(appsDirectory)
    }

    /// With `exited`, the launch lives on until the cgroup is empty, and its
    /// exit is reported then (at once, if it cannot be watched).
    private func removeWhenEmpty(
        _ cgroup: Cgroup, unit: String, appID: AppID, exited: (process: LaunchedProcess, status: ExitStatus)? = nil
    ) {
        if cgroup.isPopulated == false, (try? cgroup.remove()) != nil {
            if let exited { onExit(exited.process, exited.status) }
            return
        }
        guard let fd = cgroup.openEvents() else {
            logger.warning("cannot watch \(cgroup); it is left behind")
            if let exited { onExit(exited.process, exited.status) }
            return
        }
        let entry = Lingering(cgroup: cgroup, appID: appID, eventsFD: fd)
        entry.exited = exited
        lingering[unit] = entry
        do throws(BusError) {
            // cgroup.events signals a change as EPOLLPRI (and EPOLLERR); reading re-arms it.
            entry.watch = try loop.watch(fd: fd, events: UInt32(EPOLLPRI.rawValue)) { [weak self] _ in
                self?.lingeringChanged(unit: unit)
            }
        } catch {
            logger.warning("cannot watch \(cgroup): \(error); it is left behind")
            // Unwatched, it would never be seen to empty: the launch ends here.
            if let exited {
                close(fd)
                lingering[unit] = nil
                return onExit(exited.process, exited.status)
            }
        }
        // It may have emptied before the watch existed.
        if !lingeringChanged(unit: unit), exited == nil {
            logger.info("processes of \(appID) remain in \(cgroup); it is removed when they are gone")
        }
    }

    /// Removes the lingering cgroup if it is empty now; returns whether it did.
    @discardableResult
    private func lingeringChanged(unit: String) -> Bool {
        guard let entry = lingering[unit] else { return true }
        // Unreadable: the cgroup is gone (removed by someone else); its events
        // file then reports an error forever, so the watch must go too.
        if let events = Cgroup.readEvents(fd: entry.eventsFD) {
            guard events["populated"] == "0" else { return false }
            do throws(Cgroup.Failure) {
                try entry.cgroup.remove()
            } catch {
                // EBUSY: a new process got in between; the next change tells.
                if error.errno == EBUSY { return false }
                if error.errno != ENOENT { logger.warning("\(error)") }
            }
        }
        entry.watch?.cancel()
        close(entry.eventsFD)
        lingering[unit] = nil
        if let exited = entry.exited {
            logger.info("the last process of \(entry.appID)'s launch is gone")
            onExit(exited.process, exited.status)
        }
        return true
    }

    // MARK: Killing

    /// SIGKILLs every process of the launch: `cgroup.kill` where it has a
    /// cgroup (also after the main process exited), else the main process
    /// through its pidfd. Returns whether anything was signalled.
    @discardableResult
    func killAll(_ p: LaunchedProcess) -> Bool {
        if let record = tracked(p) {
            if let cgroup = cgroup(of: record), kill(cgroup, appID: p.appID) { return true }
            return signal(record, SIGKILL)
        }
        if let entry = lingering[p.unit] { return kill(entry.cgroup, appID: p.appID) }
        return false
    }

    /// Signals every process of the launch `ref` names, where it has a
    /// cgroup: SIGTERM to each, SIGKILL through `cgroup.kill`. What the app
    /// started goes with it, and so does the app a launcher script started.
    /// nil when `ref` is no such launch: then the process alone is signalled.
    /// After SIGTERM, what is left of it `killAfter` µs later gets SIGKILL,
    /// whether or not the process itself is still there to be killed then.
    func signalLaunch(_ ref: ProcessRef, _ signal: ProcessSignal, killAfter: UInt64? = nil) -> Bool? {
        let cgroup: Cgroup
        let appID: AppID
        if let record = running[ref.pid], record.process.ref == ref, let own = self.cgroup(of: record) {
            (cgroup, appID) = (own, record.process.appID)
        } else if let entry = livingOn(ref) {
            (cgroup, appID) = (entry.cgroup, entry.appID)
        } else {
            return nil
        }
        switch signal {
        case .kill:
            return kill(cgroup, appID: appID)
        case .terminate:
            guard let text = try? String(contentsOfFile: cgroup.path + "/cgroup.procs", encoding: .utf8) else { return nil }
            var any = false
            for line in text.split(separator: "\n") {
                if let pid = Int32(line), pid > 1, pid != getpid(), Glibc.kill(pid, SIGTERM) == 0 { any = true }
            }
            if any, let killAfter { killLater(cgroup, appID: appID, after: killAfter) }
            return any
        }
    }

    /// SIGKILLs what is left in `cgroup` after `delay` µs: a process that
    /// ignores SIGTERM goes even when the one the engine watches obeyed it.
    private func killLater(_ cgroup: Cgroup, appID: AppID, after delay: UInt64) {
        guard pendingKills[cgroup.path] == nil else { return }
        do throws(BusError) {
            let timer = try loop.makeTimer { [weak self] in
                guard let self else { return }
                pendingKills[cgroup.path] = nil
                if cgroup.isPopulated == true, kill(cgroup, appID: appID) {
                    logger.notice("\(appID): processes left \(delay / 1_000_000) s after SIGTERM: SIGKILL to \(cgroup)")
                }
            }
            timer.arm(at: bgt_monotonic_usec() &+ delay)
            pendingKills[cgroup.path] = timer
        } catch {
            logger.warning("cannot time the SIGKILL of what \(appID) leaves after SIGTERM: \(error)")
        }
    }

    private func kill(_ cgroup: Cgroup, appID: AppID) -> Bool {
        do throws(Cgroup.Failure) {
            try cgroup.killAll()
            return true
        } catch {
            guard error.errno == ENOENT else {
                logger.warning("\(error)")
                return false
            }
        }
        // No cgroup.kill (Linux before 5.14): signal the pids listed, which may race with forks.
        guard let text = try? String(contentsOfFile: cgroup.path + "/cgroup.procs", encoding: .utf8) else { return false }
        var any = false
        for line in text.split(separator: "\n") {
            if let pid = Int32(line), pid > 1, Glibc.kill(pid, SIGKILL) == 0 { any = true }
        }
        return any
    }

    private func signal(_ record: Tracked, _ number: Int32) -> Bool {
        let r = bgt_pidfd_send_signal(record.pidfd, number)
        if r < 0, r != -ESRCH {
            logger.warning("cannot signal \(record.process): \(ProcessSpawner.describe(errno: -r))")
        }
        return r == 0
    }

    private func tracked(_ p: LaunchedProcess) -> Tracked? {
        guard let record = running[p.pid], record.process.unit == p.unit else { return nil }
        return record
    }

    /// The v2 cgroup the process lives in, if it has one of its own: the
    /// launcher's, or its systemd scope's (read from `/proc/PID/cgroup`, which
    /// is safe while the child is unreaped, and only if it names the scope).
    private func cgroup(of record: Tracked) -> Cgroup? {
        if let cgroup = record.cgroup ?? record.scopeCgroup { return cgroup }
        guard record.process.placement == .systemdScope, let hierarchy,
            let text = try? String(contentsOfFile: "/proc/\(record.process.pid)/cgroup", encoding: .utf8),
            let path = CgroupHierarchy.unifiedPath(fromProcCgroup: text),
            path.split(separator: "/").last.map(String.init) == record.process.unit,
            let directory = hierarchy.directory(of: path)
        else { return nil }
        record.scopeCgroup = Cgroup(path: directory)
        return record.scopeCgroup
    }
}
