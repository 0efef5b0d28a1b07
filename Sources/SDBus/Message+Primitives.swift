import CSystemd
import Glibc

// The plugin ABI hands plugins a message handle with C accessor functions
// (bgtaskd_plugin.h). These are those accessors' Swift side: one basic value
// or container step at a time, with sd-bus's own return convention (>= 0 on
// success, 0 at the end of a container, a negative errno on failure), so the
// host can pass the result through unchanged.
extension Message {
    /// Reads one basic value of `type` into `value` (a pointer of the matching C type).
    public func readBasic(_ type: CChar, into value: UnsafeMutableRawPointer?) -> Int32 {
        sd_bus_message_read_basic(handle, type, value)
    }

    /// Appends one basic value of `type` from `value`.
    public func appendBasic(_ type: CChar, from value: UnsafeRawPointer?) -> Int32 {
        wrote(sd_bus_message_append_basic(handle, type, value))
    }

    /// Enters a container to read it (`contents` may be NULL to accept any).
    public func enter(_ type: CChar, _ contents: UnsafePointer<CChar>?) -> Int32 {
        sd_bus_message_enter_container(handle, type, contents)
    }

    /// Leaves the container being read.
    public func exit() -> Int32 { sd_bus_message_exit_container(handle) }

    /// The type of the next value (0 at the end) and, for a container, its contents.
    public func peek(_ type: UnsafeMutablePointer<CChar>?, _ contents: UnsafeMutablePointer<UnsafePointer<CChar>?>?) -> Int32 {
        sd_bus_message_peek_type(handle, type, contents)
    }

    /// Skips values of `signature` (NULL: the next one).
    public func skip(_ signature: UnsafePointer<CChar>?) -> Int32 { sd_bus_message_skip(handle, signature) }

    /// Opens a container to write into.
    public func open(_ type: CChar, _ contents: UnsafePointer<CChar>?) -> Int32 {
        wrote(sd_bus_message_open_container(handle, type, contents))
    }

    /// Closes the container being written.
    public func close() -> Int32 { wrote(sd_bus_message_close_container(handle)) }

    /// A new, empty method return to this call.
    public func newMethodReturn() throws(BusError) -> Message {
        var reply: OpaquePointer?
        let r = sd_bus_message_new_method_return(handle, &reply)
        if r < 0 { throw BusError.errno(r, "creating a reply") }
        return Message(adopting: reply!)
    }

    /// Queues the message on the connection it was made for; a negative errno
    /// on failure, -EBADMSG for a message a write to which failed (``isSpoiled``).
    public func send() -> Int32 {
        guard !isSpoiled else { return -EBADMSG }
        return min(sd_bus_send(sd_bus_message_get_bus(handle), handle, nil), 0)
    }
}

extension Message {
    /// Whether the bus may start the destination's service to deliver this call.
    public func setAutoStart(_ autoStart: Bool) {
        sd_bus_message_set_auto_start(handle, autoStart ? 1 : 0)
    }
}
