import CBgTaskShim
import CSystemd
import Glibc

/// A connection to a message bus (`sd_bus *`). Use it from one thread: the
/// thread of the ``EventLoop`` it is attached to, or the caller's for
/// blocking calls.
public final class Bus {
    /// The `sd_bus *`.
    public let handle: OpaquePointer

    /// Which bus to connect to.
    public enum Address: Sendable, Equatable, CustomStringConvertible {
        /// `$DBUS_SESSION_BUS_ADDRESS`, else the user's runtime-dir socket.
        case session
        /// `$DBUS_SYSTEM_BUS_ADDRESS`, else `/run/dbus/system_bus_socket`.
        case system
        /// A D-Bus address such as `unix:path=/tmp/bus`.
        case address(String)

        /// "the session bus", "the system bus", "the bus at unix:path=…".
        public var spelledOut: String {
            switch self {
            case .session: "the session bus"
            case .system: "the system bus"
            case .address(let address): "the bus at \(address)"
            }
        }

        /// Parses `session`, `system` or an address.
        public init(parsing text: String) {
            switch text {
            case "session", "user": self = .session
            case "system": self = .system
            default: self = .address(text)
            }
        }

        /// Why `text` names no bus: it is neither `session`, `user`, `system`
        /// nor a D-Bus address (`transport:key=value,…`, alternatives separated
        /// by `;`); nil when it names one. sd-bus would only say "connection
        /// refused" of `garbage`.
        public static func problem(with text: String) -> String? {
            guard case .address = Address(parsing: text) else { return nil }
            let expected = "expected session, system or a D-Bus address such as unix:path=/tmp/bus"
            if text.isEmpty { return "an empty bus: \(expected)" }
            let entries = text.split(separator: ";")
            let wellFormed = !entries.isEmpty && entries.allSatisfy { entry in
                guard let colon = entry.firstIndex(of: ":"), colon != entry.startIndex else { return false }
                let pairs = entry[entry.index(after: colon)...]
                // Each key=value has a key; a transport with no pairs ("unix:") is left to sd-bus.
                return pairs.isEmpty || pairs.split(separator: ",", omittingEmptySubsequences: false).allSatisfy { ($0.firstIndex(of: "=") ?? $0.startIndex) != $0.startIndex }
            }
            return wellFormed ? nil : "'\(text)' is not a D-Bus address: \(expected)"
        }

        public var description: String {
            switch self {
            case .session: "session"
            case .system: "system"
            case .address(let address): address
            }
        }
    }

    private init(handle: OpaquePointer) {
        self.handle = handle
    }

    /// Connects to a bus (blocking until the connection is up).
    public static func open(_ address: Address, description: String? = nil) throws(BusError) -> Bus {
        var bus: OpaquePointer?
        switch address {
        case .session:
            try check(sd_bus_open_user(&bus), "connecting to the session bus")
        case .system:
            try check(sd_bus_open_system(&bus), "connecting to the system bus")
        case .address(let text):
            try check(sd_bus_new(&bus), "sd_bus_new")
            let result = Bus(handle: bus!)
            try check(sd_bus_set_address(bus, text), "bus address '\(text)'")
            try check(sd_bus_set_bus_client(bus, 1), "sd_bus_set_bus_client")
            try check(sd_bus_start(bus), "connecting to \(text)")
            if let description { sd_bus_set_description(bus, description) }
            return result
        }
        if let description { sd_bus_set_description(bus, description) }
        return Bus(handle: bus!)
    }

    deinit { sd_bus_flush_close_unref(handle) }

    /// Waits until the bus has answered the connection's handshake (its
    /// authentication and `Hello`), for at most `timeout` µs. sd-bus alone
    /// waits 90 s for a bus that takes the connection and never answers,
    /// then reports ENOTCONN; this fails sooner, and says what happened.
    /// Blocks: for start-up and tools, not for a loop that serves callers.
    public func waitUntilReady(timeout: UInt64) throws(BusError) {
        let deadline = bgt_monotonic_usec() &+ timeout
        while sd_bus_is_ready(handle) <= 0 {
            let processed = sd_bus_process(handle, nil)
            if processed < 0 { throw BusError.errno(processed, "connecting to the bus") }
            if processed > 0 { continue }
            let now = bgt_monotonic_usec()
            guard now < deadline else {
                // Closed now: the flush at release would wait out sd-bus's own 90 s.
                sd_bus_close(handle)
                throw BusError(
                    name: "org.freedesktop.DBus.Error.Timeout",
                    message: "the bus took the connection but did not answer its handshake within \(timeout / 1_000_000) s")
            }
            let waited = sd_bus_wait(handle, deadline - now)
            if waited < 0, waited != -EINTR { throw BusError.errno(waited, "connecting to the bus") }
        }
    }

    /// Lets `loop` drive this connection.
    public func attach(to loop: EventLoop, priority: Int32 = 0) throws(BusError) {
        try check(sd_bus_attach_event(handle, loop.handle, priority), "attaching the bus to the loop")
    }

    /// This connection's unique name (`:1.42`).
    /// The connection's socket (for child processes to close, never to use).
    public var fileDescriptor: Int32 { sd_bus_get_fd(handle) }

    public var uniqueName: String {
        var name: UnsafePointer<CChar>?
        sd_bus_get_unique_name(handle, &name)
        return name.map { String(cString: $0) } ?? ""
    }

    /// Takes a well-known name; fails with `EEXIST` when someone else has it (no queueing).
    public func requestName(_ name: String) throws(BusError) {
        let r = sd_bus_request_name(handle, name, 0)
        if r == -EEXIST {
            throw BusError(name: "org.freedesktop.DBus.Error.AddressInUse", message: "\(name) is already owned by another connection")
        }
        try check(r, "requesting \(name)")
    }

    // MARK: Messages

    /// A new method call. The names are C strings, so that a plugin's call,
    /// on its way from one C caller to sd-bus, is not turned into Swift
    /// strings and back; Swift strings convert to them at the call.
    public func newMethodCall(
        destination: UnsafePointer<CChar>?, path: UnsafePointer<CChar>, interface: UnsafePointer<CChar>?,
        member: UnsafePointer<CChar>
    ) throws(BusError) -> Message {
        var message: OpaquePointer?
        try check(sd_bus_message_new_method_call(handle, &message, destination, path, interface, member),
                  "creating a call to \(String(cString: member))")
        return Message(adopting: message!)
    }

    /// A new signal; its names are C strings as ``newMethodCall(destination:path:interface:member:)``'s.
    public func newSignal(path: UnsafePointer<CChar>, interface: UnsafePointer<CChar>, member: UnsafePointer<CChar>) throws(BusError) -> Message {
        var message: OpaquePointer?
        try check(sd_bus_message_new_signal(handle, &message, path, interface, member), "creating signal \(String(cString: member))")
        return Message(adopting: message!)
    }

    /// Whether the connection is still open (not closed, its peer not gone).
    public var isOpen: Bool { sd_bus_is_open(handle) > 0 }

    /// A call whose body could not be written is not sent (``Message/isSpoiled``).
    private func refuseIfSpoiled(_ message: Message) throws(BusError) {
        if message.isSpoiled { throw BusError.errno(-EBADMSG, "call to \(message.member ?? "?") with a value that could not be written") }
    }

    /// Queues a message for sending.
    public func send(_ message: Message) throws(BusError) {
        try refuseIfSpoiled(message)
        try check(sd_bus_send(handle, message.handle, nil), "sending")
    }

    /// Calls a method and waits for the reply (not for use inside a loop callback).
    /// `timeout` is in microseconds; 0 means sd-bus's default (25 s).
    public func call(_ message: Message, timeout: UInt64 = 0) throws(BusError) -> Message {
        try refuseIfSpoiled(message)
        var error = sd_bus_error()
        var reply: OpaquePointer?
        let r = sd_bus_call(handle, message.handle, timeout, &error, &reply)
        defer { sd_bus_error_free(&error) }
        if r < 0 { throw BusError(error, fallback: r, "call to \(message.member ?? "?")") }
        return Message(adopting: reply!)
    }

    /// Calls a method; `completion` gets the reply or the error, on the loop.
    public func callAsync(
        _ message: Message, timeout: UInt64 = 0, _ completion: @escaping (Result<Message, BusError>) -> Void
    ) throws(BusError) {
        try refuseIfSpoiled(message)
        final class Box {
            let completion: (Result<Message, BusError>) -> Void
            init(_ completion: @escaping (Result<Message, BusError>) -> Void) { self.completion = completion }
        }
        let userdata = Unmanaged.passRetained(Box(completion)).toOpaque()
        var slot: OpaquePointer?
        let r = sd_bus_call_async(handle, &slot, message.handle, { reply, userdata, _ in
            let box = Unmanaged<Box>.fromOpaque(userdata!).takeUnretainedValue()
            let message = Message(retaining: reply!)
            if let error = message.error {
                box.completion(.failure(error))
            } else {
                box.completion(.success(message))
            }
            return 1
        }, userdata, timeout)
        if r < 0 {
            Unmanaged<Box>.fromOpaque(userdata).release()
            throw BusError.errno(r, "calling \(message.member ?? "?")")
        }
        // The box lives until sd-bus drops the slot: after the reply, or when the bus goes away.
        sd_bus_slot_set_destroy_callback(slot) { userdata in Unmanaged<Box>.fromOpaque(userdata!).release() }
        sd_bus_slot_set_floating(slot, 1)
        sd_bus_slot_unref(slot)
    }

    /// Dispatches one message that arrived (to matches and objects), without an
    /// event loop; returns whether there was one. For blocking clients.
    public func processPending() throws(BusError) -> Bool {
        try check(sd_bus_process(handle, nil), "processing the bus") > 0
    }

    /// The connection's socket, to poll beside other fds (then ``processPending()``).
    public var fd: Int32 { sd_bus_get_fd(handle) }

    /// Waits up to `timeout` µs for something to arrive (no event loop).
    public func wait(timeout: UInt64) throws(BusError) {
        try check(sd_bus_wait(handle, timeout), "waiting on the bus")
    }

    /// Sends out whatever is queued, blocking until written.
    public func flush() {
        sd_bus_flush(handle)
    }

    // MARK: Matches, properties, tracking

    /// Calls `handler` for every message matching `rule`. With `async` the
    /// AddMatch call does not block (for use inside the loop).
    public func addMatch(_ rule: String, async: Bool = true, _ handler: @escaping (Message) -> Void) throws(BusError) -> Slot {
        final class Box {
            let handler: (Message) -> Void
            init(_ handler: @escaping (Message) -> Void) { self.handler = handler }
        }
        let box = Box(handler)
        var slot: OpaquePointer?
        let callback: sd_bus_message_handler_t = { message, userdata, _ in
            Unmanaged<Box>.fromOpaque(userdata!).takeUnretainedValue().handler(Message(retaining: message!))
            return 0
        }
        let userdata = Unmanaged.passUnretained(box).toOpaque()
        let r = async
            ? sd_bus_add_match_async(handle, &slot, rule, callback, nil, userdata)
            : sd_bus_add_match(handle, &slot, rule, callback, userdata)
        try check(r, "adding match \(rule)")
        return Slot(handle: slot, retained: box)
    }

    /// Emits `PropertiesChanged` for `names`; sd-bus reads the values through the getters.
    public func emitPropertiesChanged(path: String, interface: String, names: [String]) throws(BusError) {
        var cStrings: [UnsafeMutablePointer<CChar>?] = names.map { strdup($0) }
        cStrings.append(nil)
        defer { for pointer in cStrings { free(pointer) } }
        try check(sd_bus_emit_properties_changed_strv(handle, path, interface, &cStrings), "emitting PropertiesChanged")
    }

    /// Calls `onGone` once when the connection `name` leaves the bus
    /// (at once, if it already has). Cancel by dropping the returned slot.
    public func watchDisconnect(of name: String, _ onGone: @escaping () -> Void) throws(BusError) -> Slot {
        final class Box {
            let onGone: () -> Void
            init(_ onGone: @escaping () -> Void) { self.onGone = onGone }
        }
        let box = Box(onGone)
        var track: OpaquePointer?
        try check(sd_bus_track_new(handle, &track, { _, userdata in
            Unmanaged<Box>.fromOpaque(userdata!).takeUnretainedValue().onGone()
            return 0
        }, Unmanaged.passUnretained(box).toOpaque()), "sd_bus_track_new")
        let r = sd_bus_track_add_name(track, name)
        if r < 0 {
            sd_bus_track_unref(track)
            throw BusError.errno(r, "tracking \(name)")
        }
        return Slot(track: track, retained: box)
    }
}

/// Keeps a match, a tracker or an exported object alive; dropping it removes it.
public final class Slot {
    private var handle: OpaquePointer?
    private var track: OpaquePointer?
    private let retained: AnyObject?

    init(handle: OpaquePointer?, retained: AnyObject?) {
        self.handle = handle
        self.retained = retained
    }

    init(track: OpaquePointer?, retained: AnyObject?) {
        self.track = track
        self.retained = retained
    }

    /// Removes the match, tracker or object now.
    public func cancel() {
        if let handle { sd_bus_slot_unref(handle) }
        if let track { sd_bus_track_unref(track) }
        handle = nil
        track = nil
    }

    deinit { cancel() }
}
