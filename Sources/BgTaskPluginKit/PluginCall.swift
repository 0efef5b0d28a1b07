public import BgTaskProtocol
import BgTaskPluginABI

/// A D-Bus call of one of the plugin's methods. Reply once, now or later:
/// keeping this object keeps the call; dropping it unanswered makes the host
/// answer `Failed`.
public final class PluginCall {
    let api: UnsafePointer<bgt_host_api>
    let handle: OpaquePointer
    /// The method's interface and name.
    public let interface: String
    public let member: String
    /// Who called.
    public let caller: Caller

    /// The caller of a method.
    public struct Caller: Sendable, Equatable {
        /// The caller's unique bus name.
        public var connection: String
        /// The caller's app id, nil when it has none.
        public var appID: String?
        public var pid: Int32
        public var uid: UInt32
        /// Unsandboxed and of the daemon's user (root on the system bus).
        public var isTrusted: Bool
        public var isSandboxed: Bool
    }

    init(api: UnsafePointer<bgt_host_api>, handle: OpaquePointer, interface: String, member: String) {
        self.api = api
        self.handle = handle
        self.interface = interface
        self.member = member
        let c = api.pointee.call_caller(handle)!.pointee
        caller = Caller(
            connection: c.connection.map { String(cString: $0) } ?? "", appID: c.app_id.map { String(cString: $0) },
            pid: c.pid, uid: c.uid, isTrusted: c.trusted != 0, isSandboxed: c.sandboxed != 0)
        api.pointee.call_retain(handle)
    }

    deinit { api.pointee.call_release(handle) }

    /// The call's arguments, to read in order.
    public var arguments: PluginMessage {
        PluginMessage(api: api, handle: api.pointee.call_arguments(handle)!)
    }

    /// Sends the reply that `body` writes.
    public func reply(_ body: (PluginMessage) throws(ModeError) -> Void = { _ throws(ModeError) in }) throws(ModeError) {
        guard let reply = api.pointee.reply_new(handle) else { throw ModeError.failed("cannot create a reply") }
        do {
            try body(PluginMessage(api: api, handle: reply))
        } catch {
            api.pointee.message_free(reply)
            throw error
        }
        if api.pointee.reply_send(handle, reply) < 0 { throw ModeError.failed("cannot send the reply") }
    }

    /// Answers with an error.
    public func fail(_ error: ModeError) {
        _ = error.name.withCString { name in
            error.message.withCString { message in api.pointee.reply_error(handle, name, message) }
        }
    }
}
