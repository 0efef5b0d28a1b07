import BgTaskProtocol
import Glibc
import Logging
import SDBus

/// What a plugin sends while its writes are not yet committed (see
/// ``LoadedPlugin/batch(_:)``). Replies and errors always wait here until the
/// call's transaction has committed: they answer for the whole call. Signals
/// wait once the batch has written something (they may tell of it), or when
/// something already waits that must reach the same connection first; a
/// signal sent before any write goes out at once (a fetch wake's
/// `PerformFetch` does not wait for the bookkeeping written after it).
///
/// This is group commit with the promise kept: a plugin may write several
/// records per call and they reach the disk in one commit, and still nobody
/// hears of a write (a `push_id` in a reply, a `NotificationReceived`) before
/// it is on disk. If the commit fails, the replies become `Failed` errors and
/// the signals are dropped: nothing was kept, so nothing may be promised.
final class PluginOutbox {
    private enum Pending {
        case reply(PluginCallInFlight, Message)
        case error(PluginCallInFlight, BusError)
        case signal(Message)

        /// Where a signal goes; nil for replies and errors.
        var signalDestination: String? {
            if case .signal(let message) = self { message.destination } else { nil }
        }

        /// Who a reply or an error goes to; nil for signals.
        var replyDestination: String? {
            switch self {
            case .reply(let call, _), .error(let call, _): call.message.sender
            case .signal: nil
            }
        }
    }

    private var pending: [Pending] = []
    /// Connections with a reply or error waiting here.
    private var answered: Set<String> = []
    private var heldSignals = 0

    /// Whether a signal to `destination` must wait here: to keep the order of
    /// the signals, and behind a reply to the same connection.
    func mustHold(signalTo destination: String) -> Bool {
        heldSignals > 0 || answered.contains(destination)
    }

    /// Keeps a method return.
    func reply(_ message: Message, to call: PluginCallInFlight) {
        pending.append(.reply(call, message))
        if let sender = call.message.sender { answered.insert(sender) }
    }

    func error(_ error: BusError, to call: PluginCallInFlight) {
        pending.append(.error(call, error))
        if let sender = call.message.sender { answered.insert(sender) }
    }

    /// Keeps a signal whose destination is already set.
    func signal(_ message: Message) {
        pending.append(.signal(message))
        heldSignals += 1
    }

    /// The writes are on disk: sends everything. Signals to connections that
    /// get no reply here go first; everything else keeps the order the plugin
    /// sent it in.
    ///
    /// Signals first because they are what wakes apps (a `NotificationReceived`
    /// starts the app's work; the reply to `DeliverPush` only acknowledges).
    /// No connection can tell: D-Bus orders messages per destination, and a
    /// connection that also gets a reply gets both in the plugin's order.
    func send(logger: Logger) {
        let items: [Pending]
        // (Counted, not asked of each message: reading a destination makes a string.)
        if answered.isEmpty, heldSignals == pending.count {
            // Only signals to connections (an event's batch): in the plugin's order.
            items = pending
        } else {
            let early = pending.filter { $0.signalDestination.map { !answered.contains($0) } ?? false }
            items = early + pending.filter { $0.signalDestination.map { answered.contains($0) } ?? true }
        }
        pending = []
        for item in items {
            switch item {
            case .reply(let call, let message):
                _ = Self.send(message, to: call)
            case .error(let call, let error):
                call.message.replyError(error)
            case .signal(let message):
                let r = message.send()
                if r < 0 { logger.warning("cannot send a plugin's signal: \(String(cString: strerror(-r)))") }
            }
        }
    }

    /// Sends a plugin's reply to `call`; if sd-bus refuses it, the caller gets
    /// `Failed` instead of waiting for its timeout. Returns sd-bus's result.
    static func send(_ reply: Message, to call: PluginCallInFlight) -> Int32 {
        guard call.message.expectsReply else { return 0 }
        let r = reply.send()
        if r < 0 {
            let why = String(cString: strerror(-r))
            call.host?.logger.warning("cannot send the \(call.plugin) plugin's reply to \(call.message.member ?? "a call"): \(why)")
            call.message.replyError(.failed("the \(call.plugin) plugin's reply could not be sent: \(why)"))
        }
        return r
    }

    /// The writes were rolled back: every reply becomes `StorageFailed` saying why; signals are dropped.
    func fail(_ reason: String, plugin: String, logger: Logger) {
        let items = pending
        pending = []
        var dropped = 0
        for item in items {
            switch item {
            case .reply(let call, _):
                call.message.replyError(BusError(
                    name: BgTaskError.Code.storageFailed.rawValue,
                    message: "nothing was done: the \(plugin) plugin's state could not be saved: \(reason)"))
            case .error(let call, let error):
                call.message.replyError(error)
            case .signal:
                dropped += 1
            }
        }
        if dropped > 0 { logger.error("dropped \(dropped) signals of the \(plugin) plugin: its state could not be saved: \(reason)") }
    }
}
