import BgTaskCore
import CBgTaskShim
import Glibc
import Logging
import SDBus

// Implementation notes
//
// The engine decides which app is suspended and names the processes the
// daemon can tie to it; this carries the freeze out, choosing per process:
//
//   1. a systemd unit of the user manager (a launched app's transient scope,
//      or the app scope/service a desktop launcher made): the manager's
//      FreezeUnit/ThawUnit, as systemd owns that cgroup;
//   2. a cgroup v2 directory of the app's own (one the launcher made, or a
//      writable app scope): `cgroup.freeze`, done when `cgroup.events`
//      reads `frozen 1`;
//   3. otherwise SIGSTOP / SIGCONT through the pidfd, the last resort (a
//      stopped process still takes SIGKILL; the engine thaws before SIGTERM).
//
// Each is logged with the way it was done. What is frozen is remembered per
// process, so that it is thawed the same way, forgotten when the process is
// gone, and thawed at shutdown: an app never stays frozen because the daemon
// stopped. `whenSettled` reports when the freezes asked for have completed
// (the cgroup kind completes asynchronously), for the sleep path, which may
// release logind's delay lock only then.

/// Freezes and thaws apps' processes for the engine's `freeze`/`thaw` actions.
final class Freezer {
    /// How a process was frozen.
    enum Method: String, Sendable {
        case systemdUnit = "systemd unit"
        case cgroup = "cgroup.freeze"
        case stop = "SIGSTOP"
    }

    private struct Frozen {
        var method: Method
        var cgroup: Cgroup?
        var unit: String?
        var app: AppKey
    }

    private let loop: EventLoop
    private let launcher: AppLauncher
    private let processes: ProcessTable
    private let systemd: SystemdUserManager?
    private let hierarchy: CgroupHierarchy?
    private let logger: Logger
    private var frozen: [ProcessRef: Frozen] = [:]
    /// Cgroups asked to freeze that have not reported `frozen 1` yet, by path, with their watch.
    private var pending: [String: (fd: Int32, watch: EventSource?)] = [:]
    private var settledWaiters: [(deadline: UInt64, done: (Bool) -> Void)] = []
    private var settleTimer: SDBus.Timer?
    /// Thaws held back until the freezes in flight have completed, so that
    /// an app whose turn ends is really still before the next one runs.
    private var deferredThaws: [ProcessRef: Frozen] = [:]
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

    init(
        loop: EventLoop, launcher: AppLauncher, processes: ProcessTable, systemd: SystemdUserManager?,
        hierarchy: CgroupHierarchy?, logger: Logger
    ) {
        self.loop = loop
        self.launcher = launcher
        self.processes = processes
        self.systemd = systemd
        self.hierarchy = hierarchy
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
        for ref in refs {
            // Its thaw had not happened yet: it simply stays frozen.
            if let entry = deferredThaws.removeValue(forKey: ref) { frozen[ref] = entry }
        }
        for ref in refs where frozen[ref] == nil {
            guard let entry = freeze(ref, app: app) else { continue }
            frozen[ref] = entry
            let place = entry.unit ?? entry.cgroup?.path ?? "pid \(ref.pid)"
            logger.info("froze \(app) (pid \(ref.pid)) with \(entry.method.rawValue): \(place)")
        }
    }

    /// Thaws at once, or, while freezes are in flight (cgroups not yet
    /// `frozen 1`), as soon as they complete (at most ``thawWait`` later).
    func thaw(_ app: AppKey, _ refs: [ProcessRef]) {
        for ref in refs {
            guard let entry = frozen.removeValue(forKey: ref) else { continue }
            if pending.isEmpty {
                thaw(ref, entry)
                logger.info("thawed \(app) (pid \(ref.pid))")
            } else {
                deferredThaws[ref] = entry
            }
        }
        if !deferredThaws.isEmpty {
            whenSettled(timeout: Self.thawWait) { [weak self] _ in self?.thawDeferred() }
        }
    }

    private func thawDeferred() {
        let due = deferredThaws
        deferredThaws.removeAll()
        for (ref, entry) in due.sorted(by: { $0.key.serial < $1.key.serial }) {
            thaw(ref, entry)
            logger.info("thawed \(entry.app) (pid \(ref.pid))")
        }
    }

    /// Thaws everything (at shutdown: nothing stays frozen after the daemon).
    func thawAll() {
        let all = frozen.merging(deferredThaws) { a, _ in a }
        frozen.removeAll()
        deferredThaws.removeAll()
        for (ref, entry) in all { thaw(ref, entry) }
        if !all.isEmpty { logger.info("thawed \(all.count) frozen processes at shutdown") }
    }

    /// The process is gone: nothing to thaw any more.
    func forget(_ ref: ProcessRef) {
        frozen[ref] = nil
        deferredThaws[ref] = nil
    }

    /// The process with this pid is gone (a launched app that exited).
    func forget(pid: Int32) {
        for ref in frozen.keys where ref.pid == pid { frozen[ref] = nil }
        for ref in deferredThaws.keys where ref.pid == pid { deferredThaws[ref] = nil }
    }

    private func freeze(_ ref: ProcessRef, app: AppKey) -> Frozen? {
        let place = placement(of: ref, app: app)
        if let unit = place.unit, let systemd {
            systemd.setFrozen(unit: unit, true) { [logger] result in
                if case .failure(let error) = result { logger.warning("cannot freeze unit \(unit): \(error.message)") }
            }
            return Frozen(method: .systemdUnit, unit: unit, app: app)
        }
        if let cgroup = place.cgroup {
            do throws(Cgroup.Failure) {
                try cgroup.setFrozen(true)
                watchUntilFrozen(cgroup)
                return Frozen(method: .cgroup, cgroup: cgroup, app: app)
            } catch {
                logger.warning("\(error); freezing pid \(ref.pid) with SIGSTOP instead")
            }
        }
        guard processes.stop(ref, true) else { return nil }
        return Frozen(method: .stop, app: app)
    }

    private func thaw(_ ref: ProcessRef, _ entry: Frozen) {
        switch entry.method {
        case .systemdUnit:
            guard let unit = entry.unit else { return }
            systemd?.setFrozen(unit: unit, false) { [logger] result in
                if case .failure(let error) = result { logger.warning("cannot thaw unit \(unit): \(error.message)") }
            }
        case .cgroup:
            guard let cgroup = entry.cgroup else { return }
            stopWatching(cgroup)
            do throws(Cgroup.Failure) {
                try cgroup.setFrozen(false)
            } catch {
                if error.errno != ENOENT { logger.warning("\(error)") }
            }
        case .stop:
            _ = processes.stop(ref, false)
        }
    }

    /// Where the process lives: a unit of the user manager, a cgroup of the app's own, or neither.
    private func placement(of ref: ProcessRef, app: AppKey) -> (unit: String?, cgroup: Cgroup?) {
        if let launched = launcher.process(pid: ref.pid) {
            switch launched.placement {
            case .systemdScope: return (launched.unit, nil)
            case .cgroup: return (nil, launched.cgroupPath.map { Cgroup(path: $0) })
            case .process: return (nil, nil)
            }
        }
        // A caller the daemon identified by its Flatpak or its systemd unit: its own scope, if named for the app.
        guard case .app(let id) = app, let hierarchy,
              let text = try? String(contentsOfFile: "/proc/\(ref.pid)/cgroup", encoding: .utf8),
              let path = CgroupHierarchy.unifiedPath(fromProcCgroup: text),
              let unit = path.split(separator: "/").last.map(String.init),
              SandboxInspector.appID(fromUnit: unit) == id,
              let directory = hierarchy.directory(of: path)
        else { return (nil, nil) }
        if userManager { return (unit, nil) }
        return access(directory + "/cgroup.freeze", W_OK) == 0 ? (nil, Cgroup(path: directory)) : (nil, nil)
    }

    // MARK: Settling

    /// Calls `done(true)` once every cgroup freeze asked for so far has
    /// completed, or `done(false)` after `timeout` µs; at once when none is pending.
    func whenSettled(timeout: UInt64, _ done: @escaping (Bool) -> Void) {
        guard !pending.isEmpty else { return done(true) }
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
            self?.eventsChanged(cgroup)
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
        for path in pending.keys.sorted() { eventsChanged(Cgroup(path: path)) }
        guard !pending.isEmpty else { return }
        recheckDelay = min(recheckDelay * 2, Self.recheckDelays.last)
        recheckTimer?.arm(at: bgt_monotonic_usec() + recheckDelay)
    }

    private func eventsChanged(_ cgroup: Cgroup) {
        guard let entry = pending[cgroup.path] else { return }
        // Unreadable: the cgroup is gone, which settles it as well.
        if let events = Cgroup.readEvents(fd: entry.fd), events["frozen"] != "1" { return }
        stopWatching(cgroup)
        if pending.isEmpty { settle(complete: true) }
    }

    private func stopWatching(_ cgroup: Cgroup) {
        guard let entry = pending.removeValue(forKey: cgroup.path) else { return }
        let watch = entry.watch
        // After the current callback, which may be this watch's.
        loop.later { watch?.cancel() }
        close(entry.fd)
        if pending.isEmpty, !settledWaiters.isEmpty { loop.later { [weak self] in self?.settle(complete: true) } }
    }

    /// Answers the waiters: all of them once nothing is in flight, else
    /// (the timer) those whose time is up.
    private func settle(complete: Bool) {
        let done = complete || pending.isEmpty
        let now = bgt_monotonic_usec()
        let due = settledWaiters.filter { done || $0.deadline <= now }
        settledWaiters.removeAll { done || $0.deadline <= now }
        settleTimer?.arm(at: settledWaiters.map(\.deadline).min())
        for waiter in due { waiter.done(done) }
    }
}
