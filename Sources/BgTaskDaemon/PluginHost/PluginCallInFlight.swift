import BgTaskCore
import BgTaskPluginABI
import Glibc
import SDBus

/// A D-Bus call handed to a plugin (`bgt_call`): its message, who made it,
/// and whether it has been answered. A call that goes away unanswered (the
/// plugin neither replied nor kept it, or dropped it later) is answered with
/// `Failed`, so no caller ever waits for nothing.
final class PluginCallInFlight {
    let message: Message
    let plugin: String
    /// Stable storage for `call_caller` (valid while the call lives).
    let caller: UnsafeMutablePointer<bgt_caller> = .allocate(capacity: 1)
    private var strings: [UnsafeMutablePointer<CChar>] = []
    private(set) var replied = false
    /// The host whose outbox holds the reply while the call's writes commit.
    private(set) weak var host: LoadedPlugin?
    /// The signature the method declared for its reply: sd-bus will not send
    /// a reply of another (the caller would wait for its timeout).
    var replySignature: String?

    init(message: Message, identity: CallerIdentity, appID: AppID?, host: LoadedPlugin) {
        self.message = message
        self.plugin = host.name
        self.host = host
        caller.initialize(to: bgt_caller())
        caller.pointee.connection = UnsafePointer(keep(identity.connection.uniqueName))
        caller.pointee.app_id = appID.map { UnsafePointer(keep($0.rawValue)) }
        caller.pointee.pid = identity.process?.pid ?? 0
        caller.pointee.uid = identity.uid ?? UInt32.max
        caller.pointee.trusted = identity.isTrusted ? 1 : 0
        caller.pointee.sandboxed = identity.isSandboxed ? 1 : 0
    }

    private func keep(_ text: String) -> UnsafeMutablePointer<CChar> {
        let pointer = strdup(text)!
        strings.append(pointer)
        return pointer
    }

    /// The opaque handle plugins see.
    var handle: OpaquePointer { OpaquePointer(Unmanaged.passUnretained(self).toOpaque()) }

    static func from(_ handle: OpaquePointer?) -> PluginCallInFlight? {
        handle.map { Unmanaged<PluginCallInFlight>.fromOpaque(UnsafeRawPointer($0)).takeUnretainedValue() }
    }

    /// Marks the call answered; false if it already was.
    func markReplied() -> Bool {
        if replied { return false }
        replied = true
        return true
    }

    deinit {
        if !replied {
            message.replyError(.failed("the \(plugin) plugin did not answer this call"))
        }
        for pointer in strings { free(pointer) }
        caller.deallocate()
    }
}
