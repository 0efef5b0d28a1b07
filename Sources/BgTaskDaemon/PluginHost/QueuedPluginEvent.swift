import BgTaskPluginABI
import Glibc

/// An event for a plugin (`bgt_event`), in Swift until it is handed over.
struct QueuedPluginEvent: Sendable, Equatable {
    var type: Int32
    var app: String?
    var connection: String?
    var state: String?
    var token: String?
    var reason: String?
    var realtimeMicroseconds: UInt64

    /// Calls `body` with the C form; its strings live until `body` returns.
    func withCEvent(_ body: (UnsafePointer<bgt_event>) -> Void) {
        let strings = [app, connection, state, token, reason].map { $0.map { strdup($0)! } }
        defer { for pointer in strings { free(pointer) } }
        var event = bgt_event()
        event.struct_size = UInt32(MemoryLayout<bgt_event>.size)
        event.type = UInt32(type)
        event.app_id = UnsafePointer(strings[0])
        event.connection = UnsafePointer(strings[1])
        event.state = UnsafePointer(strings[2])
        event.token = UnsafePointer(strings[3])
        event.reason = UnsafePointer(strings[4])
        event.realtime_usec = realtimeMicroseconds
        withUnsafePointer(to: &event) { body($0) }
    }
}
