import BgTaskCore
import CBgTaskShim
import Glibc
import Logging
import SDBus

// Implementation notes
//
// The engine decides which app is suspended and names the processes the
// daemon can tie to it; this carries the freeze out, choosing per process
// what to freeze (its target):
//
//   1. a systemd unit of the user manager (a launched app's transient scope,
//      or the app scope/service a desktop launcher made): the manager's
//      FreezeUnit/ThawUnit, as systemd owns that cgroup; done when the call
//      is answered; if it fails, SIGSTOP;
//   2. a cgroup v2 directory of the app's own (one the launcher made, or a
//      writable app scope): `cgroup.freeze`, done when `cgroup.events`
//      reads `frozen 1`;
//   3. otherwise SIGSTOP / SIGCONT through the pidfd, the last resort (a
//      stopped process still takes SIGKILL; the engine thaws before SIGTERM).
//
// Several processes can share a target (two processes of one Flatpak): a
// target is frozen while any of its processes should be, and thawed when
// none should any more. Each freeze is logged with the way it was done, and
// recorded in the FreezeJournal until it is thawed, so that a daemon that
// dies without thawing has its apps thawed by the next start; at shutdown
// everything is thawed. `whenSettled` reports when the freezes asked for have
// completed, for the sleep path, which may release logind's delay lock only
// then. A thaw asked for while freezes are in flight waits for them (at most
// `thawWait`), so that an app whose turn in the backlog ended is really still
// before the next one runs.

/// Freezes and thaws apps' processes for the engine's `freeze`/`thaw` actions.
final class Freezer {
    /// What is frozen to freeze a process.
    enum Target: Hashable, Sendable, CustomStringConvertible {
        case unit(String)
        case cgroup(String)
        case process(ProcessRef)

        var method: String {
            switch self {
            case .unit: "systemd unit"
            case .cgroup: "cgroup.freeze"
            case .process: "SIGSTOP"
            }
        }

        var description: String {
            switch self {
            case .unit(let name): name
            case .cgroup(let path): path
            case .process(let ref): "\(ref)"
            }
        }
    }

    private let loop: EventLoop
    private let launcher: AppLauncher
    private let processes: ProcessTable
    private let systemd: SystemdUserManager?
    private let hierarchy: CgroupHierarchy?
    private let journal: FreezeJournal?
    private let logger: Logger
    /// The processes the engine asked to freeze, and what froze each.
    private var frozen: [ProcessRef: Target] = [:]
    /// How many frozen processes each frozen target holds.
    private var holders: [Target: Int] = [:]
    /// The journal entry of each frozen target.
    private var recorded: [Target: FreezeJournal.Entry] = [:]
    /// Cgroups asked to freeze that have not reported `frozen 1` yet, by path, with their watch.
    private var pending: [String: (fd: Int32, watch: EventSource?)] = [:]
    /// FreezeUnit calls not answered yet.
    private var unitCalls = 0
    private var settledWaiters: [(deadline: UInt64, done: (Bool) -> Void)] = []
    private var settleTimer: SDBus.Timer?
    /// Thaws held back until the freezes in flight have completed.
    private var deferredThaws: Set<Target> = []
    /// The longest a thaw waits for freezes in flight (µs).
    static let thawWait: UInt64 = 100_000
    /// Re-reads of `cgroup.events` while freezes are in flight: the kernel
    /// sends its change notification at most every 10 ms per file, while a
    /// freeze usually completes well within a millisecond. From the first
    /// delay, doubling up to the last (µs).
    private static let recheckDelays: (first: UInt64, last: UInt64) = (250, 8_000)
    private var recheckTimer: SDBus.Timer?
    private var recheckDelay: UInt64 = 0
    /// Whether a systemd user manager is on the session bus (asked once, at start).
    private var userManager = false

    /// - Parameter journal: where to record what is frozen (nil: nowhere, for tests).
    init(
        loop: EventLoop, launcher: AppLauncher, processes: ProcessTable, systemd: SystemdUserManager?,
        hierarchy: CgroupHierarchy?, journal: FreezeJournal? = nil, logger: Logger
    ) {
        self.loop = loop
        self.launcher = launcher
        self.processes = processes
        self.systemd = systemd
        self.hierarchy = hierarchy
        self.journal = journal
        self.logger = logger
        systemd?.checkPresence { [weak self] result in
            if case .success(true) = result { self?.userManager = true }
        }
    }

    deinit {
        for entry in pending.values {
            entry.watch?.cancel()
            close(entry.fd)
        }
    }

    /// Processes frozen now.
    var frozenCount: Int { frozen.count }

    /// Whether the process is frozen by this daemon.
    func isFrozen(_ process: ProcessRef) -> Bool { frozen[process] != nil }

    // MARK: Freezing and thawing

    func freeze(_ app: AppKey, _ refs: [ProcessRef]) {
        for ref in refs where frozen[ref] == nil {
            let target = target(of: ref, app: app)
            // Exited, with its connection not yet seen to close: nothing to stop.
            if case .process = target, processes.hasExited(ref) {
                logger.debug("pid \(ref.pid) of \(app) has exited: nothing to freeze")
                continue
            }
            frozen[ref] = target
            hold(target, ref: ref)
            logger.info("froze \(app) (pid \(ref.pid)) with \(target.method): \(target)")
        }
    }

    /// Thaws at once, or, while freezes are in flight, as soon as they complete (at most ``thawWait`` later).
    func thaw(_ app: AppKey, _ refs: [ProcessRef]) {
        for ref in refs {
            guard let target = frozen.removeValue(forKey: ref) else { continue }
            release(target)
            logger.info("thawed \(app) (pid \(ref.pid))")
        }
        if !deferredThaws.isEmpty {
            whenSettled(timeout: Self.thawWait) { [weak self] _ in self?.thawDeferred() }
        }
    }

    /// Thaws everything (at shutdown: nothing stays frozen after the daemon).
    func thawAll() {
        let count = frozen.count
        let targets = Set(holders.keys).union(deferredThaws)
        frozen.removeAll()
        holders.removeAll()
        deferredThaws.removeAll()
        for target in targets.sorted(by: { $0.description < $1.description }) { thawNow(target) }
        journal?.save()
        if count > 0 { logger.info("thawed \(count) frozen processes at shutdown") }
    }

    /// The process is gone: it holds its target no more (which is thawed if nothing else holds it).
    func forget(_ ref: ProcessRef) {
        guard let target = frozen.removeValue(forKey: ref) else { return }
        release(target)
    }

    /// `new` takes `old`'s place (a launch that goes on as another process
    /// of its cgroup): what froze `old` holds for `new`, with no thaw between.
    func replace(_ old: ProcessRef, with new: ProcessRef) {
        guard let target = frozen.removeValue(forKey: old) else { return }
        if frozen[new] == nil { frozen[new] = target } else { release(target) }
    }

    /// The process with this pid is gone (a launched app that exited).
    func forget(pid: Int32) {
        for ref in frozen.keys where ref.pid == pid { forget(ref) }
    }

    /// Thaws what an earlier run left frozen (it died without thawing). Call once, at start.
    func thawLeftovers() {
        guard let journal else { return }
        let leftovers = journal.takeLeftovers()
        for entry in leftovers {
            FreezeJournal.thaw(entry, logger: logger) { name in
                systemd?.setFrozen(unit: name, false) { [logger] result in
                    if case .failure(let error) = result { logger.debug("cannot thaw unit \(name): \(error.message)") }
                }
            }
        }
        if !leftovers.isEmpty {
            logger.notice("thawed \(leftovers.count) apps left frozen by a daemon that stopped without thawing them")
        }
    }

    private func hold(_ target: Target, ref: ProcessRef) {
        holders[target, default: 0] += 1
        // It was still frozen, waiting for its thaw: it simply stays so.
        if deferredThaws.remove(target) != nil { return }
        guard holders[target] == 1 else { return }
        freezeNow(target, ref: ref)
    }

    private func release(_ target: Target) {
        guard let count = holders[target] else { return }
        if count > 1 {
            holders[target] = count - 1
            return
        }
        holders[target] = nil
        if inFlight {
            deferredThaws.insert(target)
        } else {
            thawNow(target)
        }
    }

    private var inFlight: Bool { !pending.isEmpty || unitCalls > 0 }

    private func thawDeferred() {
        let due = deferredThaws
        deferredThaws.removeAll()
        for target in due.sorted(by: { $0.description < $1.description }) { thawNow(target) }
    }

    private func freezeNow(_ target: Target, ref: ProcessRef) {
        switch target {
        case .unit(let name):
            guard let systemd else { return }
            unitCalls += 1
            systemd.setFrozen(unit: name, true) { [weak self] result in
                guard let self else { return }
                self.unitCalls -= 1
                if case .failure(let error) = result { self.unitFailed(name, error) }
                if !self.inFlight { self.settle(complete: true) }
            }
            record(target, .unit(name))
        case .cgroup(let path):
            do throws(Cgroup.Failure) {
                try Cgroup(path: path).setFrozen(true)
                watchUntilFrozen(Cgroup(path: path))
                record(target, .cgroup(path))
            } catch {
                logger.warning("\(error); freezing pid \(ref.pid) with SIGSTOP instead")
                retarget(target, to: { .process($0) })
            }
        case .process(let ref):
            if processes.stop(ref, true), let start = FreezeJournal.startTime(of: ref.pid) {
                record(target, .process(pid: ref.pid, startTime: start))
            }
        }
    }

    private func thawNow(_ target: Target) {
        switch target {
        case .unit(let name):
            // Without the bus the user manager cannot be asked: the unit stays
            // listed, for the next start (on the bus's return) to thaw.
            if let systemd, !systemd.bus.isOpen {
                logger.warning("cannot thaw unit \(name): the bus is gone; the next start thaws it")
                return
            }
            systemd?.setFrozen(unit: name, false) { [logger] result in
                if case .failure(let error) = result { logger.warning("cannot thaw unit \(name): \(error.message)") }
            }
        case .cgroup(let path):
            stopWatching(path)
            do throws(Cgroup.Failure) {
                try Cgroup(path: path).setFrozen(false)
            } catch {
                if error.errno != ENOENT { logger.warning("\(error)") }
            }
        case .process(let ref):
            _ = processes.stop(ref, false)
        }
        if let entry = recorded.removeValue(forKey: target) { journal?.remove(entry) }
    }

    private func record(_ target: Target, _ entry: FreezeJournal.Entry) {
        recorded[target] = entry
        journal?.add(entry)
    }

    /// systemd would not freeze the unit: its processes are stopped instead.
    private func unitFailed(_ name: String, _ error: BusError) {
        let target = Target.unit(name)
        if let entry = recorded.removeValue(forKey: target) { journal?.remove(entry) }
        guard holders[target] != nil else { return }
        logger.warning("cannot freeze unit \(name): \(error.message); stopping its processes with SIGSTOP instead")
        retarget(target, to: { .process($0) })
    }

    /// Moves every process frozen through `old` to a target of its own, and freezes that.
    private func retarget(_ old: Target, to new: (ProcessRef) -> Target) {
        holders[old] = nil
        for (ref, current) in frozen where current == old {
            let target = new(ref)
            frozen[ref] = target
            holders[target, default: 0] += 1
            if holders[target] == 1 { freezeNow(target, ref: ref) }
        }
    }

    /// Where the process lives: a unit of the user manager, a cgroup of the app's own, or neither.
    private func target(of ref: ProcessRef, app: AppKey) -> Target {
        if let launched = launcher.process(ref: ref) {
            switch launched.placement {
            case .systemdScope: return systemd != nil ? .unit(launched.unit) : .process(ref)
            case .cgroup: return launched.cgroupPath.map { .cgroup($0) } ?? .process(ref)
            case .process: return .process(ref)
            }
        }
        // A caller the daemon identified by its Flatpak or its systemd unit: its own scope, if named for the app.
        guard case .app(let id) = app, let hierarchy,
              let text = try? String(contentsOfFile: "/proc/\(ref.pid)/cgroup", encoding: .utf8),
              let path = CgroupHierarchy.unifiedPath(fromProcCgroup: text),
              let unit = path.split(separator: "/").last.map(String.init),
              SandboxInspector.appID(fromUnit: unit) == id,
              let directory = hierarchy.directory(of: path)
        else { return .process(ref) }
        if userManager { return .unit(unit) }
        return access(directory + "/cgroup.freeze", W_OK) == 0 ? .cgroup(directory) : .process(ref)
    }

    // MARK: Settling

    /// Calls `done(true)` once every freeze asked for so far has completed,
    /// or `done(false)` after `timeout` µs; at once when none is in flight.
    func whenSettled(timeout: UInt64, _ done: @escaping (Bool) -> Void) {
        guard inFlight else {
            journal?.flush()
            return done(true)
        }
        settledWaiters.append((bgt_monotonic_usec() &+ timeout, done))
        if settleTimer == nil {
            settleTimer = try? loop.makeTimer { [weak self] in self?.settle(complete: false) }
        }
        settleTimer?.arm(at: settledWaiters.map(\.deadline).min())
    }

    private func watchUntilFrozen(_ cgroup: Cgroup) {
        guard pending[cgroup.path] == nil, let fd = cgroup.openEvents() else { return }
        if Cgroup.readEvents(fd: fd)?["frozen"] == "1" {
            close(fd)
            return
        }
        let watch = try? loop.watch(fd: fd, events: UInt32(EPOLLPRI.rawValue)) { [weak self] _ in
            self?.eventsChanged(cgroup.path)
        }
        pending[cgroup.path] = (fd, watch)
        if recheckTimer?.armedAt == nil {
            if recheckTimer == nil { recheckTimer = try? loop.makeTimer { [weak self] in self?.recheck() } }
            recheckDelay = Self.recheckDelays.first
            recheckTimer?.arm(at: bgt_monotonic_usec() + recheckDelay)
        }
    }

    /// Reads every pending cgroup's events again, and comes back later while any is still freezing.
    private func recheck() {
        for path in pending.keys.sorted() { eventsChanged(path) }
        guard !pending.isEmpty else { return }
        recheckDelay = min(recheckDelay * 2, Self.recheckDelays.last)
        recheckTimer?.arm(at: bgt_monotonic_usec() + recheckDelay)
    }

    private func eventsChanged(_ path: String) {
        guard let entry = pending[path] else { return }
        // Unreadable: the cgroup is gone, which settles it as well.
        if let events = Cgroup.readEvents(fd: entry.fd), events["frozen"] != "1" { return }
        stopWatching(path)
    }

    private func stopWatching(_ path: String) {
        guard let entry = pending.removeValue(forKey: path) else { return }
        let watch = entry.watch
        // After the current callback, which may be this watch's.
        loop.later { watch?.cancel() }
        close(entry.fd)
        if !inFlight, !settledWaiters.isEmpty { loop.later { [weak self] in self?.settle(complete: true) } }
    }

    /// Answers the waiters: all of them once nothing is in flight, else
    /// (the timer) those whose time is up.
    private func settle(complete: Bool) {
        let done = complete || !inFlight
        let now = bgt_monotonic_usec()
        let due = settledWaiters.filter { done || $0.deadline <= now }
        settledWaiters.removeAll { done || $0.deadline <= now }
        settleTimer?.arm(at: settledWaiters.map(\.deadline).min())
        if !due.isEmpty { journal?.flush() }
        for waiter in due { waiter.done(done) }
    }
}
