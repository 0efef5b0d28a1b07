import BgTaskCore
import CBgTaskShim
import Glibc
import Logging

/// Race-free handles (pidfds) for every process the daemon deals with: those
/// behind client connections and those it launched itself. The one table of
/// processes: the launcher, the freezer and the enforcement of deadlines all
/// name a process by the ``ProcessRef`` it hands out.
///
/// One handle per process, shared by its holders (its connections, and the
/// launcher until it has reaped its child). A handle is closed when its last
/// holder is gone, unless the process was sent SIGTERM and its SIGKILL is
/// still pending. Signals go through the pidfd, so they reach
/// exactly the process that was checked, never one that reused its pid.
final class ProcessTable {
    private struct Handle {
        var pidfd: Int32
        var holders: Int
        var awaitingKill: Bool
        /// The process's uid and socket inodes when it was identified: where
        /// its connections can be found if it is gone (``ConnectionHolders``).
        var uid: uid_t
        var sockets: [UInt64]
        /// Its process group and start time when it was identified: an heir
        /// is a process it forked, in its group and started after it.
        var lineage: ConnectionHolders.Lineage?
    }

    /// The daemon's own bus connection (its socket), to learn which sockets
    /// reach the bus; -1 until the daemon sets it.
    var busFD: Int32 = -1
    /// The name of the socket the daemon's bus connection reaches (see
    /// ``ConnectionHolders/serverName(ofConnection:)``), learnt when first
    /// needed: at start-up the bus may not have accepted the connection yet.
    private var knownServerName: String?

    /// The bus's server socket name, or nil when it cannot be told (then
    /// heirs of a connection are not looked for).
    var busServerName: String? {
        if knownServerName == nil, busFD >= 0 { knownServerName = ConnectionHolders.serverName(ofConnection: busFD) }
        return knownServerName
    }

    /// The bus daemon's pid (its end of the daemon's own connection), learnt when first needed.
    private var knownBusPID: Int32?

    /// The bus daemon: it holds a client's socket that was sent in a message
    /// until the recipient reads it, and is never anyone's heir.
    private var busPID: Int32? {
        if knownBusPID == nil, busFD >= 0 {
            let pid = bgt_socket_peer_pid(busFD)
            if pid > 0 { knownBusPID = pid }
        }
        return knownBusPID
    }

    private var handles: [ProcessRef: Handle] = [:]
    private var byPID: [Int32: ProcessRef] = [:]
    private var lastSerial: UInt64 = 0
    private let logger: Logger
    private let ownPID = getpid()

    init(logger: Logger) {
        self.logger = logger
    }

    deinit {
        for handle in handles.values { close(handle.pidfd) }
    }

    var count: Int { handles.count }

    /// A handle for `pid` for one more holder; throws when the process is gone.
    func open(pid: Int32) throws(ProcessError) -> ProcessRef {
        if let ref = byPID[pid], let handle = handles[ref] {
            if bgt_pidfd_exited(handle.pidfd) == 0 {
                handles[ref]!.holders += 1
                // A connection made since is among its sockets now.
                handles[ref]!.sockets = ConnectionHolders.socketInodes(of: pid)
                return ref
            }
            // The process behind the old handle is gone; its pid was reused.
            byPID[pid] = nil
        }
        let fd = bgt_pidfd_open(pid)
        guard fd >= 0 else { throw ProcessError(pid: pid, errno: -fd) }
        lastSerial += 1
        let ref = ProcessRef(pid: pid, serial: lastSerial)
        var status = stat()
        let uid = stat("/proc/\(pid)", &status) == 0 ? status.st_uid : uid_t.max
        let sockets = ConnectionHolders.socketInodes(of: pid)
        handles[ref] = Handle(pidfd: fd, holders: 1, awaitingKill: false, uid: uid, sockets: sockets,
                              lineage: ConnectionHolders.lineage(of: pid))
        byPID[pid] = ref
        return ref
    }

    /// A child the daemon just spawned, with the pidfd it was spawned with (the
    /// table takes it over): held by the launcher until it has reaped it.
    func adopt(pid: Int32, pidfd: Int32) -> ProcessRef {
        if let old = byPID[pid], let handle = handles[old], bgt_pidfd_exited(handle.pidfd) == 0 {
            // Cannot be: a live process already had our child's pid. Keep the older handle's holders apart.
            logger.error("pid \(pid) is in the process table twice")
        }
        lastSerial += 1
        let ref = ProcessRef(pid: pid, serial: lastSerial)
        handles[ref] = Handle(pidfd: pidfd, holders: 1, awaitingKill: false, uid: getuid(), sockets: [], lineage: nil)
        byPID[pid] = ref
        return ref
    }

    /// The pidfd of a process still in the table (valid until its last holder lets go).
    func pidfd(of ref: ProcessRef) -> Int32? { handles[ref]?.pidfd }

    /// One holder of the process (a connection, or the launcher) is gone.
    func release(_ ref: ProcessRef) {
        guard handles[ref] != nil else { return }
        handles[ref]!.holders -= 1
        closeIfUnused(ref)
    }

    /// Whether the process still runs (false once its handle is closed).
    func isAlive(_ ref: ProcessRef) -> Bool {
        guard let handle = handles[ref] else { return false }
        return bgt_pidfd_exited(handle.pidfd) == 0
    }

    /// Whether the process is known to have exited (false while it runs, and
    /// for one whose handle is not held here: that is not known).
    func hasExited(_ ref: ProcessRef) -> Bool {
        guard let handle = handles[ref] else { return false }
        return bgt_pidfd_exited(handle.pidfd) != 0
    }

    /// Keeps the handle of a process that is to be sent SIGTERM (once its
    /// connections took `TaskExpired` in) open even if its last connection
    /// goes meanwhile: an app that closed its connection on `TaskExpired`
    /// was never signalled. The SIGKILL after the grace ends the hold, as
    /// for any SIGTERM.
    func holdForTermination(_ ref: ProcessRef) {
        guard handles[ref] != nil else { return }
        handles[ref]!.awaitingKill = true
    }

    /// Sends SIGTERM, or SIGKILL if the process is still alive. Returns whether a signal was sent.
    @discardableResult
    func signal(_ ref: ProcessRef, _ signal: ProcessSignal) -> Bool {
        guard let handle = handles[ref] else { return false }
        defer { closeIfUnused(ref) }
        switch signal {
        case .terminate: handles[ref]!.awaitingKill = true
        case .kill: handles[ref]!.awaitingKill = false
        }
        guard ref.pid != ownPID, ref.pid > 1 else {
            logger.error("refusing to signal pid \(ref.pid)")
            return false
        }
        let number = signal == .terminate ? SIGTERM : SIGKILL
        if bgt_pidfd_exited(handle.pidfd) != 0 { return signalHeirs(of: ref, handle, number) }
        let r = bgt_pidfd_send_signal(handle.pidfd, number)
        if r < 0 {
            if r == -ESRCH { return signalHeirs(of: ref, handle, number) }
            logger.error("cannot signal pid \(ref.pid): \(String(cString: strerror(-r)))")
            return false
        }
        return true
    }

    /// Stops (SIGSTOP) or continues (SIGCONT) the process: freezing's last
    /// resort. Returns whether the signal went out.
    ///
    /// A process that leads a session of its own (every process the daemon
    /// launches does) is signalled with its process group: what it started
    /// is in that group, and stopping the leader alone left its children
    /// running (a "frozen" app using CPU).
    func stop(_ ref: ProcessRef, _ stopped: Bool) -> Bool {
        guard let handle = handles[ref], ref.pid != ownPID, ref.pid > 1 else { return false }
        let signal = stopped ? SIGSTOP : SIGCONT
        guard bgt_pidfd_send_signal(handle.pidfd, signal) >= 0 else { return false }
        // Only while the pidfd says it lives: its pid, read again by the group calls, is still its own.
        Self.signalGroup(ledBy: ref.pid, signal) { bgt_pidfd_exited(handle.pidfd) == 0 }
        return true
    }

    /// Sends `signal` to the process group of `pid` when `pid` leads its
    /// session and its group, and that is not the daemon's own.
    /// `stillItself` says, after the group is looked up, that `pid` is
    /// still the process meant (a pidfd that has not exited, a start time).
    static func signalGroup(ledBy pid: Int32, _ signal: Int32, stillItself: () -> Bool) {
        guard pid > 1, getsid(pid) == pid, getpgid(pid) == pid, getpgid(0) != pid, stillItself() else { return }
        kill(-pid, signal)
    }

    /// The process is gone but its connection may live on in a child that
    /// inherited it: signal whoever holds the connection now.
    private func signalHeirs(of ref: ProcessRef, _ handle: Handle, _ number: Int32) -> Bool {
        guard !handle.sockets.isEmpty else { return false }
        guard let server = busServerName else {
            logger.notice("pid \(ref.pid) is gone and its connection may live on in a child, but which sockets reach the bus cannot be told here (no NETLINK_SOCK_DIAG)")
            return false
        }
        guard let lineage = handle.lineage else {
            logger.notice("pid \(ref.pid) is gone, and what it forked cannot be told (its process group and start were not read): no heir is signalled")
            return false
        }
        let connections = ConnectionHolders.connections(among: handle.sockets, to: server)
        guard let heirs = heirs(holding: connections, uid: handle.uid, of: lineage) else {
            logger.notice("pid \(ref.pid) is gone; its bus connections live on in different processes it forked, and which of them holds the one meant cannot be told: none is signalled")
            return false
        }
        if heirs.isEmpty {
            // It said nothing: a daemon(3)-style heir (setsid and a second
            // fork) ran on, and the log stopped at "task expired".
            logger.notice("""
                pid \(ref.pid) is gone, and no process it forked in its process group holds its bus connection \
                (one that left the group with setsid cannot be told from another process): none is signalled
                """)
        }
        var sent = false
        for pid in heirs {
            let fd = bgt_pidfd_open(pid)
            guard fd >= 0 else { continue }
            defer { close(fd) }
            if bgt_pidfd_send_signal(fd, number) >= 0 {
                sent = true
                logger.notice("pid \(ref.pid) is gone; its bus connection lives on in pid \(pid), which inherited it: signal \(number) sent there")
            }
        }
        return sent
    }

    /// The processes sure to hold the connection meant, one of
    /// `connections`, among those that could have inherited it: of `uid`,
    /// in the gone owner's process group and started no earlier than it
    /// (what it forked), not the daemon, pid 1 or the bus daemon. A socket
    /// handed to any other process in a message makes no heir of it.
    /// Connections no such process holds cannot be the one meant (someone
    /// holds that). Of the rest: with one, every holder; with more, those
    /// that hold them all; nil when no process does.
    private func heirs(holding connections: [UInt64], uid: uid_t, of lineage: ConnectionHolders.Lineage) -> [Int32]? {
        let excluded: Set<Int32> = [ownPID, busPID ?? -1]
        let held = Set(connections).map { connection in
            Set(ConnectionHolders.processes(holding: [connection], uid: uid).filter { pid in
                guard pid > 1, !excluded.contains(pid), let candidate = ConnectionHolders.lineage(of: pid) else { return false }
                return candidate.processGroup == lineage.processGroup && candidate.startTime >= lineage.startTime
            })
        }.filter { !$0.isEmpty }
        guard let first = held.first else { return [] }
        let sure = held.dropFirst().reduce(first) { $0.intersection($1) }
        return sure.isEmpty ? nil : sure.sorted()
    }

    private func closeIfUnused(_ ref: ProcessRef) {
        guard let handle = handles[ref], handle.holders <= 0, !handle.awaitingKill else { return }
        close(handle.pidfd)
        handles[ref] = nil
        if byPID[ref.pid] == ref { byPID[ref.pid] = nil }
    }
}

/// A process handle could not be opened.
struct ProcessError: Error, CustomStringConvertible {
    var pid: Int32
    var errno: Int32

    var description: String { "pid \(pid): \(String(cString: strerror(errno)))" }
}
