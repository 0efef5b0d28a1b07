import BgTaskPluginABI
import CSystemd
import Glibc

/// Hands the answer of a plugin's call to another service back to the
/// plugin, exactly once, from the loop (`bgt_host_api.method_call_send`).
final class PluginReplyForwarder {
    private let reply: bgt_reply_fn
    private let userdata: UnsafeMutableRawPointer?
    private weak var host: LoadedPlugin?

    private init(reply: bgt_reply_fn, userdata: UnsafeMutableRawPointer?, host: LoadedPlugin) {
        self.reply = reply
        self.userdata = userdata
        self.host = host
    }

    /// Sends `call`; the forwarder lives until sd-bus drops the slot (after the
    /// answer, or with the bus).
    static func send(
        _ call: OpaquePointer, on bus: OpaquePointer, timeout: UInt64, host: LoadedPlugin, reply: bgt_reply_fn,
        userdata: UnsafeMutableRawPointer?
    ) -> Int32 {
        let forwarder = Unmanaged.passRetained(PluginReplyForwarder(reply: reply, userdata: userdata, host: host))
        var slot: OpaquePointer?
        let r = sd_bus_call_async(bus, &slot, call, { message, userdata, _ in
            let forwarder = Unmanaged<PluginReplyForwarder>.fromOpaque(userdata!).takeUnretainedValue()
            // A plugin that is gone (stopped) gets nothing.
            guard forwarder.host != nil else { return 1 }
            if let error = sd_bus_message_get_error(message), error.pointee.name != nil {
                forwarder.reply(forwarder.userdata, nil, error.pointee.name, error.pointee.message)
            } else {
                forwarder.reply(forwarder.userdata, message, nil, nil)
            }
            return 1
        }, forwarder.toOpaque(), timeout)
        guard r >= 0 else {
            forwarder.release()
            return host.fail(-r, "cannot send the call: \(String(cString: strerror(-r)))")
        }
        sd_bus_slot_set_destroy_callback(slot) { userdata in Unmanaged<PluginReplyForwarder>.fromOpaque(userdata!).release() }
        sd_bus_slot_set_floating(slot, 1)
        sd_bus_slot_unref(slot)
        return 0
    }
}
