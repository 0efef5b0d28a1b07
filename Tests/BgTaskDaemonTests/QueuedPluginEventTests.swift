import BgTaskPluginABI
@testable import BgTaskDaemon
import Testing

/// The C form of an event handed to a plugin: its strings, and NULL where
/// the event has none.
@Suite struct QueuedPluginEventTests {
    @Test func theCFormCarriesEveryStringAndNullForTheMissingOnes() {
        let event = QueuedPluginEvent(
            type: BGT_EVENT_TOKEN_READY, app: "org.example.Places", connection: ":1.42", state: nil,
            token: "0123456789abcdef0123456789abcdef", reason: "", realtimeMicroseconds: 17)
        var seen = 0
        event.withCEvent { pointer in
            let c = pointer.pointee
            #expect(c.struct_size == UInt32(MemoryLayout<bgt_event>.size))
            #expect(c.type == UInt32(BGT_EVENT_TOKEN_READY))
            #expect(c.app_id.map { String(cString: $0) } == "org.example.Places")
            #expect(c.connection.map { String(cString: $0) } == ":1.42")
            #expect(c.state == nil)
            #expect(c.token.map { String(cString: $0) } == "0123456789abcdef0123456789abcdef")
            #expect(c.reason.map { String(cString: $0) } == "")
            #expect(c.realtime_usec == 17)
            seen += 1
        }
        #expect(seen == 1)
    }
}
