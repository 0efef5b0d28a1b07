import BgTaskProtocol
import CBgTaskShim
import CSystemd
import Glibc

/// A D-Bus message (`sd_bus_message *`), holding one reference.
///
/// Reading walks the body from the front; writing appends to it. Strings read
/// are copied into Swift, so they outlive the message.
public final class Message {
    /// The `sd_bus_message *`.
    public let handle: OpaquePointer

    /// Whether a write to the body failed. sd-bus may have added the value's
    /// type to the signature already (a string that is not valid UTF-8 does
    /// that): the body no longer matches it, and a bus daemon cuts off a
    /// connection that sends such a message. Sending one is refused instead.
    public private(set) var isSpoiled = false

    /// Notes a failed write (a negative `r`) and passes `r` on.
    @discardableResult
    func wrote(_ r: Int32) -> Int32 {
        if r < 0 { isSpoiled = true }
        return r
    }

    /// Takes over a reference the caller owns.
    init(adopting handle: OpaquePointer) {
        self.handle = handle
    }

    /// Adds a reference of its own.
    init(retaining handle: OpaquePointer) {
        self.handle = sd_bus_message_ref(handle)
    }

    deinit { sd_bus_message_unref(handle) }

    // MARK: Header

    /// The sender's unique name (`:1.42`).
    public var sender: String? { sd_bus_message_get_sender(handle).map { String(cString: $0) } }
    public var destination: String? { sd_bus_message_get_destination(handle).map { String(cString: $0) } }
    public var path: String? { sd_bus_message_get_path(handle).map { String(cString: $0) } }
    public var interface: String? { sd_bus_message_get_interface(handle).map { String(cString: $0) } }
    public var member: String? { sd_bus_message_get_member(handle).map { String(cString: $0) } }
    public var signature: String { sd_bus_message_get_signature(handle, 1).map { String(cString: $0) } ?? "" }

    /// The interface, member and signature as sd-bus holds them (valid while
    /// the message lives and is not changed): for checks on hot paths that
    /// must not make strings.
    public func withHeader<R>(_ body: (_ interface: UnsafePointer<CChar>?, _ member: UnsafePointer<CChar>?, _ signature: UnsafePointer<CChar>?) -> R) -> R {
        body(sd_bus_message_get_interface(handle), sd_bus_message_get_member(handle), sd_bus_message_get_signature(handle, 1))
    }

    /// The error this message carries, when it is an error reply.
    public var error: BusError? {
        guard let error = sd_bus_message_get_error(handle), error.pointee.name != nil else { return nil }
        return BusError(error.pointee, fallback: -5, "error reply")
    }

    /// Whether the caller asked for no reply.
    /// Whether the message was made on, or came from, `bus`.
    public func belongs(to bus: Bus) -> Bool { sd_bus_message_get_bus(handle) == bus.handle }

    public var expectsReply: Bool { sd_bus_message_get_expect_reply(handle) > 0 }

    /// Whether this message is a reply (or error) to `call`: it goes to the
    /// call's sender and its reply cookie is the call's cookie (cookies are
    /// counted per sender, so both are needed).
    public func answers(_ call: Message) -> Bool {
        var cookie: UInt64 = 0, replyCookie: UInt64 = 0
        guard sd_bus_message_get_cookie(call.handle, &cookie) >= 0, sd_bus_message_get_reply_cookie(handle, &replyCookie) >= 0,
              cookie == replyCookie else { return false }
        let sender = sd_bus_message_get_sender(call.handle), destination = sd_bus_message_get_destination(handle)
        guard let sender, let destination else { return sender == nil && destination == nil }
        return strcmp(sender, destination) == 0
    }

    /// Sets the destination (unicast signals go to one connection only); a
    /// C string, passed on as it is (Swift strings convert at the call).
    public func setDestination(_ name: UnsafePointer<CChar>) throws(BusError) {
        try check(sd_bus_message_set_destination(handle, name), "setting the destination")
    }

    // MARK: Reading

    private func readBasic<T>(_ type: UInt8, _ initial: T) throws(BusError) -> T {
        var value = initial
        let r = withUnsafeMutablePointer(to: &value) { sd_bus_message_read_basic(handle, CChar(bitPattern: type), $0) }
        if r == 0 { throw BusError.invalidArgs("missing argument of type '\(Character(Unicode.Scalar(type)))'") }
        if r < 0 { throw BusError.invalidArgs(Self.readFailure(r, type: type, signature: signature)) }
        return value
    }

    /// Why reading a value of `type` failed with `r`, in words: a type that
    /// does not match (`-ENXIO`) or a value sd-bus refuses (`-EBADMSG`).
    public static func readFailure(_ r: Int32, type: UInt8, signature: String) -> String {
        let code = Character(Unicode.Scalar(type))
        guard r == -EBADMSG else { return "expected an argument of type '\(code)', the call's arguments are '\(signature)'" }
        switch code {
        case "s": return BgTaskError.unreadableString
        case "o": return "an object path argument is not a valid object path"
        case "g": return "a signature argument is not a valid D-Bus signature"
        default: return "an argument of type '\(code)' is malformed"
        }
    }

    public func readString() throws(BusError) -> String {
        String(cString: try readBasic(UInt8(ascii: "s"), UnsafePointer<CChar>?.none)!)
    }

    public func readObjectPath() throws(BusError) -> String {
        String(cString: try readBasic(UInt8(ascii: "o"), UnsafePointer<CChar>?.none)!)
    }

    public func readUInt32() throws(BusError) -> UInt32 { try readBasic(UInt8(ascii: "u"), UInt32(0)) }

    /// Reads a unix fd (`h`) and returns a duplicate of it (close-on-exec)
    /// that the caller owns: the message's own closes with the message.
    public func readUnixFD() throws(BusError) -> Int32 {
        let fd = try readBasic(UInt8(ascii: "h"), Int32(-1))
        let copy = fcntl(fd, F_DUPFD_CLOEXEC, 3)
        if copy < 0 { throw BusError.errno(-errno, "duplicating a file descriptor") }
        return copy
    }
    public func readInt32() throws(BusError) -> Int32 { try readBasic(UInt8(ascii: "i"), Int32(0)) }
    public func readUInt64() throws(BusError) -> UInt64 { try readBasic(UInt8(ascii: "t"), UInt64(0)) }
    public func readInt64() throws(BusError) -> Int64 { try readBasic(UInt8(ascii: "x"), Int64(0)) }
    public func readDouble() throws(BusError) -> Double { try readBasic(UInt8(ascii: "d"), Double(0)) }
    public func readByte() throws(BusError) -> UInt8 { try readBasic(UInt8(ascii: "y"), UInt8(0)) }
    public func readBool() throws(BusError) -> Bool { try readBasic(UInt8(ascii: "b"), Int32(0)) != 0 }

    /// Enters a container: `type` is `a`, `v`, `r` or `e`; `contents` its inner signature.
    /// Returns false at the end of an enclosing array.
    @discardableResult
    public func enterContainer(_ type: Character, _ contents: String) throws(BusError) -> Bool {
        let r = sd_bus_message_enter_container(handle, CChar(type.asciiValue!), contents)
        if r < 0 { throw BusError.invalidArgs("expected '\(type)\(contents)', got '\(signature)'") }
        return r > 0
    }

    public func exitContainer() throws(BusError) {
        try check(sd_bus_message_exit_container(handle), "leaving a container")
    }

    /// The type of the next value and, for containers, their contents; nil at the end.
    public func peekType() throws(BusError) -> (type: Character, contents: String?)? {
        var type: CChar = 0
        var contents: UnsafePointer<CChar>?
        let r = try check(sd_bus_message_peek_type(handle, &type, &contents), "peeking a type")
        if r == 0 { return nil }
        return (Character(Unicode.Scalar(UInt8(bitPattern: type))), contents.map { String(cString: $0) })
    }

    /// Whether every argument was read.
    public var atEnd: Bool { sd_bus_message_at_end(handle, 1) > 0 }

    /// Skips values of the given signature.
    public func skip(_ signature: String) throws(BusError) {
        try check(sd_bus_message_skip(handle, signature), "skipping '\(signature)'")
    }

    /// Reads a byte array (`ay`).
    public func readBytes() throws(BusError) -> [UInt8] {
        var pointer: UnsafeRawPointer?
        var size = 0
        try check(sd_bus_message_read_array(handle, CChar(UInt8(ascii: "y")), &pointer, &size), "reading 'ay'")
        guard let pointer, size > 0 else { return [] }
        return Array(UnsafeRawBufferPointer(start: pointer, count: size))
    }

    /// Goes back to the first argument (to read a message again).
    public func rewind() throws(BusError) {
        try check(sd_bus_message_rewind(handle, 1), "rewinding")
    }

    // MARK: Writing

    private func appendBasic<T>(_ type: UInt8, _ value: T) throws(BusError) {
        var value = value
        let r = wrote(withUnsafePointer(to: &value) { sd_bus_message_append_basic(handle, CChar(bitPattern: type), $0) })
        try check(r, "appending '\(Character(Unicode.Scalar(type)))'")
    }

    public func append(_ value: String) throws(BusError) {
        try refuseUnsendable(value)
        let r = wrote(value.withCString { sd_bus_message_append_basic(handle, CChar(UInt8(ascii: "s")), $0) })
        try check(r, "appending a string")
    }

    /// Refuses, before sd-bus sees it, a string D-Bus cannot carry: a NUL
    /// (passed as a C string it cut the text short without a word, so an
    /// app id "org.example.A\0x" checked in as "org.example.A"), or a
    /// noncharacter (which sd-bus refused only as EINVAL). A failed append
    /// all the same: the message is never sent (see ``isSpoiled``).
    private func refuseUnsendable(_ value: String) throws(BusError) {
        guard let scalar = DBusText.unsendable(in: value) else { return }
        isSpoiled = true
        throw BusError.invalidArgs("the string holds \(DBusText.name(scalar)), which D-Bus strings cannot carry")
    }

    public func appendObjectPath(_ value: String) throws(BusError) {
        let r = wrote(value.withCString { sd_bus_message_append_basic(handle, CChar(UInt8(ascii: "o")), $0) })
        try check(r, "appending an object path")
    }

    public func append(_ value: UInt32) throws(BusError) { try appendBasic(UInt8(ascii: "u"), value) }
    public func append(_ value: Int32) throws(BusError) { try appendBasic(UInt8(ascii: "i"), value) }
    public func append(_ value: UInt64) throws(BusError) { try appendBasic(UInt8(ascii: "t"), value) }
    public func append(_ value: Int64) throws(BusError) { try appendBasic(UInt8(ascii: "x"), value) }
    public func append(_ value: Double) throws(BusError) { try appendBasic(UInt8(ascii: "d"), value) }
    public func append(_ value: UInt8) throws(BusError) { try appendBasic(UInt8(ascii: "y"), value) }
    public func append(_ value: Bool) throws(BusError) { try appendBasic(UInt8(ascii: "b"), Int32(value ? 1 : 0)) }
    /// Appends a unix fd (`h`): the message sends a duplicate, `fd` stays the caller's.
    public func append(unixFD fd: Int32) throws(BusError) { try appendBasic(UInt8(ascii: "h"), fd) }

    public func openContainer(_ type: Character, _ contents: String) throws(BusError) {
        try check(wrote(sd_bus_message_open_container(handle, CChar(type.asciiValue!), contents)), "opening '\(type)\(contents)'")
    }

    public func closeContainer() throws(BusError) {
        try check(wrote(sd_bus_message_close_container(handle)), "closing a container")
    }

    /// Writes `body` inside a container.
    public func container(_ type: Character, _ contents: String, _ body: () throws(BusError) -> Void) throws(BusError) {
        try openContainer(type, contents)
        try body()
        try closeContainer()
    }

    // MARK: Replies

    /// Sends a method return whose body `body` writes. Does nothing if the
    /// caller asked for no reply.
    public func reply(_ body: (Message) throws(BusError) -> Void = { _ throws(BusError) in }) throws(BusError) {
        guard expectsReply else { return }
        var reply: OpaquePointer?
        try check(sd_bus_message_new_method_return(handle, &reply), "creating a reply")
        let message = Message(adopting: reply!)
        try body(message)
        try check(sd_bus_send(sd_bus_message_get_bus(handle), reply, nil), "sending a reply")
    }

    /// Sends an error reply.
    public func replyError(_ error: BusError) {
        guard expectsReply else { return }
        var e = sd_bus_error()
        _ = error.set(into: &e)
        sd_bus_reply_method_error(handle, &e)
        sd_bus_error_free(&e)
    }
}
