import BgTaskProtocol
import CBgTaskShim
import SDBus

/// The fuzzer's connections to the bus, one per role, and what the daemon
/// told each (task ids, wake tokens), so that later calls can use real
/// state. Calls are blocking, one at a time, each with its own timeout, so
/// that the call a crash or hang follows is known exactly.
final class ClientPool {
    let address: String
    /// Seconds a call may take before it counts as unanswered.
    let timeout: Double
    private var buses: [FuzzCall.Role: Bus] = [:]
    private var matches: [FuzzCall.Role: [Slot]] = [:]
    private var wire: WireConnection?
    /// Tokens each role got with PerformFetch and NotificationReceived, newest last.
    private(set) var fetchTokens: [FuzzCall.Role: [String]] = [:]
    private(set) var pushTokens: [FuzzCall.Role: [String]] = [:]
    /// Tasks each role began and did not end.
    private(set) var taskIDs: [FuzzCall.Role: [UInt32]] = [:]

    init(address: String, timeout: Double) {
        self.address = address
        self.timeout = timeout
    }

    /// Whether `role` has a connection now (an app role must check in on a new one).
    func isOpen(_ role: FuzzCall.Role) -> Bool {
        role == .fresh || role == .anonymous || buses[role] != nil
    }

    /// Closes every connection: the daemon drops their tasks and forgets them.
    func reset() {
        matches.removeAll()
        buses.removeAll()
        wire = nil
        fetchTokens.removeAll()
        pushTokens.removeAll()
        taskIDs.removeAll()
    }

    /// Sends `call` and waits for its answer.
    func send(_ call: FuzzCall) -> CallOutcome {
        if call.needsRawTransport { return sendRaw(call) }
        let bus: Bus
        do throws(BusError) {
            bus = try connection(for: call.role)
        } catch {
            return .notSent("cannot connect: \(error)")
        }
        let message: Message
        do throws(BusError) {
            message = try bus.newMethodCall(
                destination: call.destination, path: call.path, interface: call.interface, member: call.member)
            for argument in call.arguments { try message.append(value: argument.value) }
        } catch {
            return .notSent("sd-bus refused to build it: \(error)")
        }
        let start = Monotonic.seconds()
        let outcome: CallOutcome
        do throws(BusError) {
            let reply = try bus.call(message, timeout: UInt64(timeout * 1_000_000))
            observe(call, reply)
            outcome = .returned(signature: reply.signature)
        } catch {
            var classified = CallOutcome.classify(errorName: error.name, message: error.message)
            // sd-bus names its own failures System.Error.<errno>, and so does a peer
            // answering with an errno it has no name for: an open connection means an answer.
            if case .notSent = classified, sd_bus_is_open(bus.handle) > 0 {
                classified = .error(name: error.name, message: error.message)
            }
            outcome = resolve(classified, elapsed: Monotonic.seconds() - start)
            if case .notSent = outcome { drop(call.role) }
        }
        drainSignals(call.role)
        if call.role == .fresh { buses[.fresh] = nil }
        return outcome
    }

    /// sd-bus names a timeout and a vanished peer alike on some paths: the
    /// time the call took tells them apart.
    private func resolve(_ outcome: CallOutcome, elapsed: Double) -> CallOutcome {
        switch outcome {
        case .noReply where elapsed >= timeout * 0.95: .timeout
        case .timeout where elapsed < timeout * 0.5: .noReply(name: "org.freedesktop.DBus.Error.NoReply", message: "answered early with a timeout")
        default: outcome
        }
    }

    private func sendRaw(_ call: FuzzCall) -> CallOutcome {
        let connection: WireConnection
        if let wire {
            connection = wire
        } else {
            do throws(HarnessError) {
                connection = try WireConnection(address: address, timeout: timeout)
            } catch {
                return .notSent("cannot connect by hand: \(error)")
            }
            wire = connection
        }
        let start = Monotonic.seconds()
        switch connection.call(
            destination: call.destination, path: call.path, interface: call.interface, member: call.member,
            body: call.arguments.map(\.value), timeout: timeout) {
        case .methodReturn(let signature): return .returned(signature: signature)
        case .error(let name, let message):
            return resolve(CallOutcome.classify(errorName: name, message: message), elapsed: Monotonic.seconds() - start)
        case .timeout: return .timeout
        case .closed:
            wire = nil
            return .notSent("the bus closed the hand-spoken connection")
        }
    }

    /// The role's connection, opened (with its signal matches) when needed.
    private func connection(for role: FuzzCall.Role) throws(BusError) -> Bus {
        if role != .fresh, let bus = buses[role] { return bus }
        let bus = try Bus.open(.address(address), description: "bgtaskd-fuzz")
        buses[role] = bus
        if case .app = role {
            // Wakes are unicast to the app's connection; their tokens feed CompleteFetch and CompleteNotification.
            matches[role] = [
                try bus.addMatch("type='signal',interface='\(BgTaskNames.fetch)',member='PerformFetch'", async: false) {
                    [weak self] message in
                    if let token = try? message.readString() { self?.fetchTokens[role, default: []].append(token) }
                },
                try bus.addMatch("type='signal',interface='\(BgTaskNames.remoteNotifications)',member='NotificationReceived'", async: false) {
                    [weak self] message in
                    if let token = try? message.readString() { self?.pushTokens[role, default: []].append(token) }
                },
            ]
        }
        return bus
    }

    private func drop(_ role: FuzzCall.Role) {
        matches[role] = nil
        buses[role] = nil
        taskIDs[role] = nil
    }

    /// Dispatches the signals that arrived while the role waited for replies.
    private func drainSignals(_ role: FuzzCall.Role) {
        guard let bus = buses[role] else { return }
        var rounds = 0
        while rounds < 256, (try? bus.processPending()) == true { rounds += 1 }
        // Old tokens are spent or expired by now; keep the newest.
        if let count = fetchTokens[role]?.count, count > 64 { fetchTokens[role]?.removeFirst(count - 64) }
        if let count = pushTokens[role]?.count, count > 64 { pushTokens[role]?.removeFirst(count - 64) }
    }

    /// Remembers the tasks a role began and ended.
    private func observe(_ call: FuzzCall, _ reply: Message) {
        guard call.isWellFormed else { return }
        switch call.member {
        case "BeginBackgroundTask":
            if let id = try? reply.readUInt32() {
                taskIDs[call.role, default: []].append(id)
                if taskIDs[call.role]!.count > 200 { taskIDs[call.role]!.removeFirst() }
            }
        case "EndBackgroundTask":
            if case .uint32(let id) = call.arguments.first?.value { taskIDs[call.role]?.removeAll { $0 == id } }
        default:
            break
        }
    }

    /// Takes a token the role was given (the most recent), if any.
    func takeToken(fetch: Bool, role: FuzzCall.Role) -> String? {
        fetch ? fetchTokens[role]?.popLast() : pushTokens[role]?.popLast()
    }
}
