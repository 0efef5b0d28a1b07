import BgTaskPluginABI

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
    /// They are the Swift strings' own bytes, lent for the call: an event
    /// goes to a plugin on every wake, and copying five strings into fresh
    /// C buffers cost more than delivering it.
    func withCEvent(_ body: (UnsafePointer<bgt_event>) -> Void) {
        Self.withCString(app) { app in
            Self.withCString(connection) { connection in
                Self.withCString(state) { state in
                    Self.withCString(token) { token in
                        Self.withCString(reason) { reason in
                            var event = bgt_event()
                            event.struct_size = UInt32(MemoryLayout<bgt_event>.size)
                            event.type = UInt32(type)
                            event.app_id = app
                            event.connection = connection
                            event.state = state
                            event.token = token
                            event.reason = reason
                            event.realtime_usec = realtimeMicroseconds
                            withUnsafePointer(to: &event) { body($0) }
                        }
                    }
                }
            }
        }
    }

    private static func withCString(_ text: String?, _ body: (UnsafePointer<CChar>?) -> Void) {
        guard let text else { return body(nil) }
        text.withCString { body($0) }
    }
}
