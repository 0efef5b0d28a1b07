import BgTaskCore
import BgTaskProtocol
import CBgTaskShim
import Glibc
import Logging
import SDBus

// Implementation notes
//
// dbus-daemon 1.14 cannot hand over a caller's pidfd, and asking it for
// credentials is a round trip, so each unique name is looked up once, on its
// first call, and cached until the name leaves the bus (unique names are never
// reused). The lookup never blocks the loop:
//
//   1. watch the name for disconnection (the AddMatch goes out first, so a
//      disconnect after step 2 cannot be missed);
//   2. GetConnectionCredentials → uid and pid;
//   3. pidfd_open(pid), then read the sandbox and cgroup under /proc/PID;
//   4. GetConnectionUnixProcessID again: if the name still maps to the same
//      pid, the pidfd and what /proc said belong to the caller (had the
//      process died, its connection would be gone).
//
// Calls arriving meanwhile wait for the lookup, up to a limit.

/// Who is calling: credentials, process handle and app id per unique name.
final class CallerRegistry {
    typealias Waiter = (Result<CallerIdentity, BusError>) -> Void

    private enum Entry {
        case resolving([Waiter])
        case known(CallerIdentity)
    }

    private let bus: Bus
    private let loop: EventLoop
    private let processes: ProcessTable
    private let logger: Logger
    private let trustedUID: UInt32
    private var entries: [String: Entry] = [:]
    private var watches: [String: Slot] = [:]
    /// Calls one connection may have waiting while its credentials are looked up.
    private let maxWaiting = 256
    /// Callers refused since the daemon last ran out of file descriptors;
    /// nil while it has not (one log line per burst, not one per caller).
    private var refusedForDescriptors: Int?
    /// When a caller was last refused for want of a descriptor (monotonic µs).
    private(set) var lastRefusalForDescriptors: UInt64?

    /// Called when a known caller leaves the bus.
    var onDisconnect: (CallerIdentity) -> Void = { _ in }
    /// The app of the daemon's launch a process belongs to (the launched
    /// process, or one in that launch's cgroup), if any.
    var launchedAppID: (Int32) -> AppID? = { _ in nil }

    init(bus: Bus, loop: EventLoop, processes: ProcessTable, trustedUID: UInt32, logger: Logger) {
        self.bus = bus
        self.loop = loop
        self.processes = processes
        self.trustedUID = trustedUID
        self.logger = logger
    }

    /// Connections with cached credentials.
    var knownCount: Int { entries.count }

    /// The cached identity of `sender`, if its lookup finished.
    func identity(of sender: String) -> CallerIdentity? {
        if case .known(let identity) = entries[sender] { return identity }
        return nil
    }

    /// Runs `body` with the identity of the message's sender: at once when it
    /// is cached, else when the lookup finishes.
    func withCaller(of message: Message, _ body: @escaping Waiter) {
        guard let sender = message.sender else {
            body(.failure(.failed("the call has no sender")))
            return
        }
        switch entries[sender] {
        case .known(let identity):
            body(.success(identity))
        case .resolving(var waiters):
            guard waiters.count < maxWaiting else {
                body(.failure(BusError(name: BgTaskError.Code.limitExceeded.rawValue, message: "too many calls while this connection's credentials are looked up")))
                return
            }
            entries[sender] = nil  // keeps the array uniquely referenced while appending
            waiters.append(body)
            entries[sender] = .resolving(waiters)
        case nil:
            entries[sender] = .resolving([body])
            resolve(sender)
        }
    }

    private func resolve(_ sender: String) {
        do throws(BusError) {
            watches[sender] = try bus.watchDisconnect(of: sender) { [unowned self] in self.gone(sender) }
            let call = try dbusCall("GetConnectionCredentials", sender)
            try bus.callAsync(call) { [unowned self] result in self.credentialsArrived(sender, result) }
        } catch {
            fail(sender, error)
        }
    }

    private func credentialsArrived(_ sender: String, _ result: Result<Message, BusError>) {
        guard case .resolving = entries[sender] else { return }
        let uid: UInt32
        let pid: UInt32
        do throws(BusError) {
            let credentials = try result.get().readOptions()
            guard case .uint32(let u) = credentials["UnixUserID"], case .uint32(let p) = credentials["ProcessID"] else {
                throw BusError.failed("the bus did not report the caller's uid and pid")
            }
            uid = u
            pid = p
        } catch {
            return fail(sender, error)
        }
        let process: ProcessRef
        do {
            process = try processes.open(pid: Int32(bitPattern: pid))
        } catch where error.errno == EMFILE || error.errno == ENFILE {
            return fail(sender, outOfDescriptors(error))
        } catch {
            return fail(sender, .failed("the caller's process is gone (\(error))"))
        }
        if let refused = refusedForDescriptors {
            refusedForDescriptors = nil
            logger.notice("file descriptors are available again; \(refused) callers were refused meanwhile")
        }
        let finding = SandboxInspector.inspect(pid: process.pid)
        do throws(BusError) {
            let recheck = try dbusCall("GetConnectionUnixProcessID", sender)
            try bus.callAsync(recheck) { [unowned self] result in
                self.recheckArrived(sender, result, uid: uid, process: process, finding: finding)
            }
        } catch {
            processes.release(process)
            fail(sender, error)
        }
    }

    private func recheckArrived(
        _ sender: String, _ result: Result<Message, BusError>, uid: UInt32, process: ProcessRef,
        finding: SandboxInspector.Finding
    ) {
        guard case .resolving(let waiters) = entries[sender] else {
            processes.release(process)
            return
        }
        guard let pid = try? result.get().readUInt32(), Int32(bitPattern: pid) == process.pid,
              processes.isAlive(process) else {
            processes.release(process)
            return fail(sender, .failed("the caller's process changed while it was being identified"))
        }
        var finding = finding
        // A process of a launch is named so also where its cgroup's name
        // gave the same app id: a copy the user starts is told apart by it.
        if let launched = launchedAppID(process.pid), finding.appID == nil || finding.appID == launched {
            finding.appID = launched
            finding.source = .launched
        }
        let identity = CallerIdentity(
            connection: ConnectionID(sender), process: process, uid: uid,
            appID: finding.appID, appIDSource: finding.source, isSandboxed: finding.isSandboxed,
            isTrusted: !finding.isSandboxed && uid == trustedUID)
        entries[sender] = .known(identity)
        logger.debug("caller identified", metadata: [
            "sender": "\(sender)", "pid": "\(process.pid)", "uid": "\(uid)",
            "app": "\(identity.appID?.rawValue ?? "-")", "trusted": "\(identity.isTrusted)",
        ])
        for waiter in waiters { waiter(.success(identity)) }
    }

    /// Every caller needs a pidfd: without one it cannot be identified, so it
    /// is refused with the bus's own error for a resource limit, and the first
    /// refusal of a burst is logged.
    private func outOfDescriptors(_ error: ProcessError) -> BusError {
        if refusedForDescriptors == nil {
            var limit = rlimit()
            getrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &limit)
            let reason = String(cString: strerror(error.errno))
            let text = "out of file descriptors (\(reason); the limit is \(limit.rlim_cur)): new callers are refused "
                + "until some leave; raise LimitNOFILE to serve more at once"
            logger.error("\(text)")
        }
        refusedForDescriptors = (refusedForDescriptors ?? 0) + 1
        lastRefusalForDescriptors = bgt_monotonic_usec()
        return BusError(
            name: "org.freedesktop.DBus.Error.LimitsExceeded",
            message: "bgtaskd has no file descriptor left to identify this caller (it serves too many processes at once); try again later")
    }

    private func fail(_ sender: String, _ error: BusError) {
        guard case .resolving(let waiters) = entries[sender] else { return }
        entries[sender] = nil
        dropWatch(sender)
        logger.debug("caller lookup failed", metadata: ["sender": "\(sender)", "error": "\(error)"])
        for waiter in waiters { waiter(.failure(error)) }
    }

    /// The name left the bus.
    private func gone(_ sender: String) {
        let entry = entries.removeValue(forKey: sender)
        dropWatch(sender)
        switch entry {
        case .known(let identity):
            if let process = identity.process { processes.release(process) }
            onDisconnect(identity)
        case .resolving(let waiters):
            for waiter in waiters { waiter(.failure(.failed("the caller left the bus"))) }
        case nil:
            break
        }
    }

    /// Drops the disconnect watch after the current callback (it may be the one running).
    private func dropWatch(_ sender: String) {
        guard let slot = watches.removeValue(forKey: sender) else { return }
        loop.later { slot.cancel() }
    }

    private func dbusCall(_ member: String, _ name: String) throws(BusError) -> Message {
        let call = try bus.newMethodCall(
            destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus",
            interface: "org.freedesktop.DBus", member: member)
        try call.append(name)
        return call
    }
}
