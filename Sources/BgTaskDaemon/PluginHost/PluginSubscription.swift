import BgTaskPluginABI
import SDBus

/// One signal subscription of a plugin (`bgt_host_api.signal_subscribe`):
/// what it matches, and the plugin's function to call with each signal.
final class PluginSubscription {
    let bus: UInt32
    let sender: String?
    let path: String?
    let interface: String?
    let member: String?
    let arg0: String?
    /// The plugin; a subscription never outlives it (it is dropped at stop).
    private(set) weak var host: LoadedPlugin?
    private let function: bgt_signal_fn
    private let userdata: UnsafeMutableRawPointer?
    /// The match on the bus; dropping it removes the match.
    var slot: Slot?

    init(
        host: LoadedPlugin, bus: UInt32, sender: String?, path: String?, interface: String?, member: String?, arg0: String?,
        function: bgt_signal_fn, userdata: UnsafeMutableRawPointer?
    ) {
        self.host = host
        self.bus = bus
        self.sender = sender
        self.path = path
        self.interface = interface
        self.member = member
        self.arg0 = arg0
        self.function = function
        self.userdata = userdata
    }

    /// A signal matched: the plugin handles it as one batch, like an event.
    func deliver(_ message: Message) {
        guard let host else { return }
        host.fromLoop { function(userdata, PluginHostAPI.borrowed(message)) }
    }

    /// The bus went away: the plugin hears it once, with no message.
    func lost() {
        slot = nil
        guard let host else { return }
        host.fromLoop { function(userdata, nil) }
    }
}
