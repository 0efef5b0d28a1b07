import BgTaskProtocol
import Foundation
import SDBus
import Synchronization

// Implementation notes
//
// sd-bus and sd-event objects may be used from one thread only. Each manager
// therefore has a thread of its own running an sd-event loop with the bus
// attached, and every sd-bus object is created, used and released on that
// thread. Other threads reach it only through the Inbox (an eventfd the loop
// watches): an async method posts a job that builds the call and issues it with
// `callAsync`; the reply callback, on the loop thread, decodes the reply and
// resumes the caller's continuation. The host app's threads, actors and main
// loop never run sd-bus code, and the SDK never runs app code except the
// handlers the app registered (on this thread, so they must be short).
//
// Every call has a timeout (10 s, not sd-bus's 25 s) and every call waiting
// for a reply is listed in `pending`, so that no caller waits forever: a reply,
// a timeout, a lost connection or close() each resume it exactly once.
//
// Closing: close() shuts the gate under its lock and posts one last job. Every
// job posted before it runs first (the inbox is FIFO) and none can be posted
// after it, so no job is ever left unrun. The last job fails the calls still
// waiting and stops the loop; the thread then releases the bus and the loop.
//
// Signals: the daemon sends its signals to this connection only, but any
// client can send us a signal with the same path, interface and member. A
// signal is dispatched only when its sender is the current owner of the
// daemon's name, learnt with GetNameOwner at connect and followed through
// NameOwnerChanged. (The match rules cannot say sender='org.bgtaskd…': on
// dbus-daemon sd-bus compares a rule's sender with the message's unique name,
// so such a rule never matches locally.) The match rules belong to the bus,
// not to the daemon, so they outlive a daemon restart: the bus announces the
// new owner (NameOwnerChanged) before that owner can send anything, and its
// signals are dispatched from then on, to the same handlers.

/// The bus connection behind one ``BackgroundTaskManager``: a thread running
/// an sd-event loop, the bus on it, a generic "call a method, decode the
/// reply" helper, and a table of signal handlers keyed by interface and member.
///
/// `@unchecked Sendable` because the compiler cannot see the confinement that
/// makes it safe: `uniqueName` is written once on the loop thread before
/// ``open(_:)`` returns the connection and never again, `inbox` is `Sendable` and `gate`
/// is a `Mutex`; every other stored property is read and written only on the
/// loop thread, by loop callbacks and inbox jobs, which run one at a time.
final class BusConnection: @unchecked Sendable {
    /// Where a method call goes.
    struct Target: Sendable {
        var destination: String
        var path: String
        var interface: String

        /// The daemon's core interface.
        static let manager = Target(destination: BgTaskNames.busName, path: BgTaskNames.objectPath, interface: BgTaskNames.manager)
        /// The fetch mode's interface (present when the daemon loaded its fetch plugin).
        static let fetch = Target(destination: BgTaskNames.busName, path: BgTaskNames.objectPath, interface: BgTaskNames.fetch)
        /// The remote-notification mode's interface (present when the daemon loaded that plugin).
        static let remoteNotifications = Target(
            destination: BgTaskNames.busName, path: BgTaskNames.objectPath, interface: BgTaskNames.remoteNotifications)
        /// The location mode's interface (present when the daemon loaded that plugin).
        static let location = Target(destination: BgTaskNames.busName, path: BgTaskNames.objectPath, interface: BgTaskNames.location)
        static let transfers = Target(destination: BgTaskNames.busName, path: BgTaskNames.objectPath, interface: BgTaskNames.transfers)
        /// The bus itself.
        static let busDriver = Target(
            destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus", interface: "org.freedesktop.DBus")

        /// The same object and interface at one connection (a unique name):
        /// a call that must reach that daemon process and no later one.
        func at(_ destination: String) -> Target {
            Target(destination: destination, path: path, interface: interface)
        }
    }

    /// A signal of the daemon's object, by interface and member.
    struct SignalKey: Hashable, Sendable {
        var interface: String
        var member: String
    }

    /// Reads a signal's arguments and acts on them (on the loop thread). A
    /// signal whose arguments do not read is dropped.
    typealias SignalHandler = @Sendable (Message) throws(BusError) -> Void
    /// Finishes one call: the reply or why there is none (on the loop thread).
    private typealias Completion = (Result<Message, BackgroundTasksError>) -> Void

    /// How long a call may wait for its reply, in µs.
    static let callTimeout: UInt64 = 10_000_000

    /// This connection's unique name on the bus (`:1.42`), known once connected.
    private(set) var uniqueName = ""
    private let inbox: Inbox
    /// True while jobs may be posted; shut once by ``close()``.
    private let gate = Mutex(true)

    // Loop-thread state (see the type's comment).
    private var loop: EventLoop?
    private var bus: Bus?
    private var isConnected = true
    private var matches: [String: Slot] = [:]
    private var signalHandlers: [SignalKey: SignalHandler] = [:]
    private var ownerObservers: [@Sendable (String?) -> Void] = []
    private var serviceOwner: String?
    private var pending: [UInt64: Completion] = [:]
    /// Ends the connecting if the bus does not answer in time (see ``start(_:_:)``).
    private var connectWatchdog: SDBus.Timer?
    private var lastCallToken: UInt64 = 0

    private init(loop: EventLoop, bus: Bus, inbox: Inbox) {
        self.loop = loop
        self.bus = bus
        self.inbox = inbox
    }

    // MARK: Opening and closing

    /// Starts the thread, connects and learns who owns the daemon's name.
    static func open(_ address: BusAddress) async throws(BackgroundTasksError) -> BusConnection {
        let result = await withCheckedContinuation { (continuation: CheckedContinuation<Result<BusConnection, BackgroundTasksError>, Never>) in
            let thread = Thread { run(address, reportingTo: continuation) }
            thread.name = "BackgroundTasks"
            thread.start()
        }
        return try result.get()
    }

    /// The body of the connection's thread.
    private static func run(_ address: BusAddress, reportingTo opened: CheckedContinuation<Result<BusConnection, BackgroundTasksError>, Never>) {
        let connection: BusConnection
        do throws(BusError) {
            let loop = try EventLoop()
            // Blocks until the bus has answered Hello; this thread has nothing else to do yet.
            let bus = try Bus.open(address.busAddress, description: "BackgroundTasks")
            try bus.attach(to: loop)
            connection = BusConnection(loop: loop, bus: bus, inbox: try loop.makeInbox())
        } catch {
            opened.resume(returning: .failure(BackgroundTasksError(connecting: error)))
            return
        }
        connection.start(address) { result in
            switch result {
            case .success:
                // Read once the bus has answered: before, sd-bus blocks for its 90 s authentication timeout.
                connection.uniqueName = connection.bus?.uniqueName ?? ""
                opened.resume(returning: .success(connection))
            case .failure(let error):
                connection.close()
                opened.resume(returning: .failure(error))
            }
        }
        do {
            try connection.loop?.run()
        } catch {
            // sd_event_loop fails only when the loop itself is broken; fall through to the cleanup.
        }
        connection.finish()
    }

    /// Subscribes to what the connection needs and asks for the daemon's
    /// owner; `completion` runs once the answer is in.
    /// Whatever fails here fails the connecting: `.daemonUnavailable`, naming the bus
    /// (a TCP bus with nobody listening failed as `.disconnected`, at the match).
    private func start(_ address: BusAddress, _ completion: @escaping (Result<Void, BackgroundTasksError>) -> Void) {
        func connecting(_ name: String, _ message: String) -> BackgroundTasksError {
            BackgroundTasksError(connecting: BusError(name: name, message: "connecting to \(address.busAddress.spelledOut): \(message)"))
        }
        do throws(BusError) {
            // The match goes out before GetNameOwner, so no owner change can fall between them.
            try addMatch(
                "type='signal',sender='org.freedesktop.DBus',path='/org/freedesktop/DBus',"
                    + "interface='org.freedesktop.DBus',member='NameOwnerChanged',arg0='\(BgTaskNames.busName)'"
            ) { [unowned self] message in nameOwnerChanged(message) }
            // sd-bus's own notice that the connection is gone (local: never sent to the bus).
            try addMatch(
                "type='signal',path='/org/freedesktop/DBus/Local',interface='org.freedesktop.DBus.Local',member='Disconnected'"
            ) { [unowned self] _ in disconnected() }
        } catch {
            return completion(.failure(connecting(error.name, error.message)))
        }
        // sd-bus keeps no call's timeout while it authenticates, and gives up on that
        // only after 90 s: a socket that accepts and never answers held connect() so
        // long. Whatever comes first, the answer or this, completes the connecting.
        var completed = false
        let finish = { [self] (result: Result<Void, BackgroundTasksError>) in
            guard !completed else { return }
            completed = true
            connectWatchdog?.arm(at: nil)
            connectWatchdog = nil
            completion(result)
        }
        connectWatchdog = try? loop?.makeTimer {
            finish(.failure(connecting("org.freedesktop.DBus.Error.Timeout", "no answer within \(Self.callTimeout / 1_000_000) s")))
        }
        connectWatchdog?.arm(at: (loop?.now ?? 0) + Self.callTimeout)
        issue(.busDriver, "GetNameOwner", arguments: { (call) throws(BusError) in try call.append(BgTaskNames.busName) }) { [self] result in
            switch result {
            case .success(let reply):
                // A NameOwnerChanged may have arrived first; it said the same.
                serviceOwner = try? reply.readString()
                finish(.success(()))
            case .failure(let error) where error.code == .daemonUnavailable:
                // Not running (yet): D-Bus activation may start it on the first call.
                serviceOwner = nil
                finish(.success(()))
            case .failure(let error):
                finish(.failure(connecting(error.name, error.message)))
            }
        }
    }

    /// Closes the connection: calls still waiting fail with `.disconnected`,
    /// later ones at once, and the daemon closes this connection's tasks.
    /// Safe from any thread, any number of times.
    func close() {
        gate.withLock { open in
            guard open else { return }
            open = false
            inbox.post { self.shutdown() }
        }
    }

    /// The last job: no other job can follow it.
    private func shutdown() {
        disconnected()
        loop?.exit()
    }

    /// After the loop stopped, on its thread: releases every sd-bus object here.
    private func finish() {
        gate.withLock { $0 = false }
        disconnected()
        signalHandlers.removeAll()
        ownerObservers.removeAll()
        for slot in matches.values { slot.cancel() }
        matches.removeAll()
        bus = nil  // flushes, closes and frees the connection
        loop = nil
    }

    /// The connection is gone (or going): fail every waiting call.
    private func disconnected() {
        isConnected = false
        let waiting = pending
        pending.removeAll()
        for completion in waiting.values { completion(.failure(.closed)) }
    }

    // MARK: Running code on the loop thread

    /// Runs `job` on the loop thread; false when the connection is closed
    /// (then `job` never runs).
    @discardableResult
    func submit(_ job: @escaping @Sendable () -> Void) -> Bool {
        gate.withLock { open in
            if open { inbox.post(job) }
            return open
        }
    }

    // MARK: Calls

    /// Calls `member` on `target` (the daemon's Manager unless said otherwise) and decodes the reply with `decode`, which
    /// runs on the loop thread before the caller resumes (so state it sets up
    /// there is in place before any signal that follows the reply).
    func call<Value: Sendable>(
        _ member: String, on target: Target = .manager,
        arguments: @escaping @Sendable (Message) throws(BusError) -> Void = { (_) throws(BusError) in },
        decode: @escaping @Sendable (Message) throws(BusError) -> Value
    ) async throws(BackgroundTasksError) -> Value {
        let result = await withCheckedContinuation { (continuation: CheckedContinuation<Result<Value, BackgroundTasksError>, Never>) in
            let posted = submit {
                self.issue(target, member, arguments: arguments) { result in
                    continuation.resume(returning: result.flatMap { (reply) -> Result<Value, BackgroundTasksError> in
                        do throws(BusError) {
                            return .success(try decode(reply))
                        } catch {
                            return .failure(BackgroundTasksError(badReplyTo: member, error))
                        }
                    })
                }
            }
            if !posted { continuation.resume(returning: .failure(.closed)) }
        }
        return try result.get()
    }

    /// Calls `member` on `target` without waiting: `completion` runs once the
    /// reply (or why there is none) is in, on the loop thread, or at once on
    /// the calling thread when the connection is closed already. For callers
    /// that cannot suspend, such as a completion handler the app calls.
    func callInBackground(
        _ member: String, on target: Target = .manager,
        arguments: @escaping @Sendable (Message) throws(BusError) -> Void = { (_) throws(BusError) in },
        completion: @escaping @Sendable (Result<Void, BackgroundTasksError>) -> Void
    ) {
        callInBackground(member, on: target, arguments: arguments, decode: { (_) throws(BusError) in }, completion: completion)
    }

    /// As the other `callInBackground`, with the reply decoded by `decode`
    /// (on the loop thread) before `completion` gets it.
    func callInBackground<Value: Sendable>(
        _ member: String, on target: Target = .manager,
        arguments: @escaping @Sendable (Message) throws(BusError) -> Void = { (_) throws(BusError) in },
        decode: @escaping @Sendable (Message) throws(BusError) -> Value,
        completion: @escaping @Sendable (Result<Value, BackgroundTasksError>) -> Void
    ) {
        let posted = submit {
            self.issue(target, member, arguments: arguments) { result in
                completion(result.flatMap { (reply) -> Result<Value, BackgroundTasksError> in
                    do throws(BusError) {
                        return .success(try decode(reply))
                    } catch {
                        return .failure(BackgroundTasksError(badReplyTo: member, error))
                    }
                })
            }
        }
        if !posted { completion(.failure(.closed)) }
    }

    /// Sends a call from the loop thread; `completion` runs exactly once.
    private func issue(
        _ target: Target, _ member: String, arguments: (Message) throws(BusError) -> Void,
        _ completion: @escaping Completion
    ) {
        guard isConnected, let bus else { return completion(.failure(.closed)) }
        lastCallToken += 1
        let token = lastCallToken
        do throws(BusError) {
            let call = try bus.newMethodCall(
                destination: target.destination, path: target.path, interface: target.interface, member: member)
            try arguments(call)
            pending[token] = completion
            try bus.callAsync(call, timeout: Self.callTimeout) { [self] result in
                // Nil when the call was already failed (the connection went away).
                guard let completion = pending.removeValue(forKey: token) else { return }
                completion(result.mapError { BackgroundTasksError($0) })
            }
        } catch {
            pending[token] = nil
            completion(.failure(BackgroundTasksError(error)))
        }
    }

    // MARK: Signals

    /// Calls `handler` for every `member` signal of `interface` on the
    /// daemon's object that the daemon itself sent. One handler per signal;
    /// a later one replaces it.
    func subscribe(interface: String, member: String, _ handler: @escaping SignalHandler) {
        submit {
            let rule = "type='signal',path='\(BgTaskNames.objectPath)',interface='\(interface)'"
            if self.matches[rule] == nil {
                _ = try? self.addMatch(rule) { [unowned self] message in self.dispatch(message) }
            }
            self.signalHandlers[SignalKey(interface: interface, member: member)] = handler
        }
    }

    /// Calls `observer` with the daemon's new unique name whenever its bus
    /// name changes hands, and with nil when the daemon leaves the bus.
    func observeServiceOwner(_ observer: @escaping @Sendable (String?) -> Void) {
        submit { self.ownerObservers.append(observer) }
    }

    /// Adds a match rule (once per rule) that lives until ``finish()``.
    @discardableResult
    private func addMatch(_ rule: String, _ handler: @escaping (Message) -> Void) throws(BusError) -> Slot {
        guard let bus else { throw BusError(name: "org.freedesktop.DBus.Error.Disconnected", message: "closed") }
        let slot = try bus.addMatch(rule, handler)
        matches[rule] = slot
        return slot
    }

    private func dispatch(_ message: Message) {
        guard let owner = serviceOwner, message.sender == owner,
              let interface = message.interface, let member = message.member,
              let handler = signalHandlers[SignalKey(interface: interface, member: member)] else { return }
        try? handler(message)
    }

    private func nameOwnerChanged(_ message: Message) {
        guard message.sender == "org.freedesktop.DBus",
              let name = try? message.readString(), name == BgTaskNames.busName,
              (try? message.readString()) != nil, let newOwner = try? message.readString() else { return }
        let owner = newOwner.isEmpty ? nil : newOwner
        guard owner != serviceOwner else { return }
        serviceOwner = owner
        for observer in ownerObservers { observer(owner) }
    }
}
