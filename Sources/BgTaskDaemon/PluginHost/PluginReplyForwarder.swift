import BgTaskPluginABI
import Glibc
import SDBus

/// Hands the answer of a plugin's call to another service back to the
/// plugin, exactly once, from the loop (`bgt_host_api.method_call_send`).
enum PluginReplyForwarder {
    /// Sends `call` for `host`; `reply` gets the answer with `userdata`, unless
    /// the plugin has stopped by then. Returns 0, or -EIO (with the host's
    /// last error saying why) when the call could not be sent.
    static func send(
        _ call: Message, timeout: UInt64, host: LoadedPlugin, reply: bgt_reply_fn, userdata: UnsafeMutableRawPointer?
    ) -> Int32 {
        do throws(BusError) {
            try host.services.callAsync(call, timeout: timeout) { [weak host] result in
                // A plugin that is gone (stopped) gets nothing; what it does
                // with the answer is one batch, as an event is.
                guard let host else { return }
                host.fromLoop {
                    switch result {
                    case .success(let message):
                        reply(userdata, PluginHostAPI.borrowed(message), nil, nil)
                    case .failure(let error):
                        error.name.withCString { name in error.message.withCString { reply(userdata, nil, name, $0) } }
                    }
                }
            }
            return 0
        } catch {
            return host.fail(EIO, "cannot send the call: \(error.message)")
        }
    }
}
