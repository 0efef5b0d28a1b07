import BgTaskProtocol
import Foundation

// Implementation notes
//
// DeliverPush stores a record before it replies: the push, with the app's
// bucket and counters beside it (`appState`). JSONEncoder spent about as much
// of the daemon's time on them as SQLite did on storing them (Codable goes
// through boxed containers and generic metadata for every field), which capped
// durable pushes at about 1,500 per second. This writes the same JSON by hand,
// with the keys Codable's synthesized conformances use, so JSONDecoder reads it
// back (at start-up) exactly as before and records from older runs stay
// readable. PushRecordJSONTests prove, field for field, that it still writes
// what JSONEncoder writes: change PushRecord, TokenBucket, PushInbox.Counts or
// PushAppState and that test fails until this file follows.

/// Writes the remote-notification plugin's records (pushes, per-app state) as JSON.
public enum PushRecordJSON {
    /// A push with its app's state beside it, as `"appState"` (see ``StoredPush``).
    public static func encode(_ push: PushRecord, appState: PushAppState) -> [UInt8] {
        splice(write(push), appState: write(appState))
    }

    /// A push's JSON object with `"appState":` and the state's object added as its last member.
    static func splice(_ push: [UInt8], appState: [UInt8]) -> [UInt8] {
        var bytes = push
        guard bytes.last == UInt8(ascii: "}") else { return bytes }
        bytes.removeLast()
        bytes.append(contentsOf: ",\"appState\":".utf8)
        bytes.append(contentsOf: appState)
        bytes.append(UInt8(ascii: "}"))
        return bytes
    }

    // MARK: The hand-written form

    public static func write(_ push: PushRecord) -> [UInt8] {
        var out = Writer()
        out.open()
        out.field("id", string: push.id)
        out.field("app", string: push.app)
        out.field("payload", string: push.payload)
        out.field("priority", unsigned: UInt64(push.priority))
        if let expiration = push.expiration { out.field("expiration", unsigned: expiration) }
        if let collapse = push.collapseID { out.field("collapseID", string: collapse) }
        out.field("receivedAt", unsigned: push.receivedAt)
        out.field("sequence", unsigned: push.sequence)
        out.field("hasAlert", bool: push.hasAlert)
        out.field("isSilent", bool: push.isSilent)
        out.field("state", string: push.state.rawValue)
        out.close()
        return out.bytes
    }

    public static func write(_ state: PushAppState) -> [UInt8] {
        var out = Writer()
        out.open()
        out.key("bucket")
        out.open()
        out.field("capacity", double: state.bucket.capacity)
        out.field("period", double: state.bucket.period)
        out.field("tokens", double: state.bucket.tokens)
        out.field("updatedAt", unsigned: state.bucket.updatedAt)
        out.close()
        out.key("counts")
        out.open()
        out.field("received", signed: state.counts.received)
        out.field("delivered", signed: state.counts.delivered)
        out.field("expired", signed: state.counts.expired)
        out.field("overflowed", signed: state.counts.overflowed)
        out.field("collapsed", signed: state.counts.collapsed)
        out.field("offences", signed: state.counts.offences)
        out.close()
        if let version = state.version { out.field("version", unsigned: version) }
        out.close()
        return out.bytes
    }

    /// A JSON object, written field by field.
    private struct Writer {
        var bytes: [UInt8] = []
        private var first = true

        init() { bytes.reserveCapacity(256) }

        mutating func open() {
            bytes.append(UInt8(ascii: "{"))
            first = true
        }

        mutating func close() {
            bytes.append(UInt8(ascii: "}"))
            first = false
        }

        mutating func key(_ name: StaticString) {
            if !first { bytes.append(UInt8(ascii: ",")) }
            first = false
            bytes.append(UInt8(ascii: "\""))
            name.withUTF8Buffer { bytes.append(contentsOf: $0) }
            bytes.append(contentsOf: [UInt8(ascii: "\""), UInt8(ascii: ":")])
        }

        mutating func field(_ name: StaticString, string: String) {
            key(name)
            append(string: string)
        }

        mutating func field(_ name: StaticString, unsigned: UInt64) {
            key(name)
            append(digits: unsigned)
        }

        mutating func field(_ name: StaticString, signed: Int) {
            key(name)
            if signed < 0 { bytes.append(UInt8(ascii: "-")) }
            append(digits: UInt64(signed.magnitude))
        }

        /// Decimal digits without a String in between (records are written on every push).
        mutating func append(digits value: UInt64) {
            var scratch: (UInt64, UInt64, UInt64) = (0, 0, 0)  // 24 bytes: room for UInt64.max's 20 digits
            withUnsafeMutableBytes(of: &scratch) { buffer in
                var rest = value, end = buffer.count
                repeat {
                    end -= 1
                    buffer[end] = UInt8(ascii: "0") + UInt8(rest % 10)
                    rest /= 10
                } while rest > 0
                bytes.append(contentsOf: buffer[end...])
            }
        }

        mutating func field(_ name: StaticString, bool: Bool) {
            key(name)
            bytes.append(contentsOf: (bool ? "true" : "false").utf8)
        }

        /// Swift's shortest round-trip form (`3.0`, `1e-05`), which is valid JSON and parses back to the same value.
        mutating func field(_ name: StaticString, double: Double) {
            key(name)
            // Whole numbers (a bucket's capacity and period, usually) as digits and ".0", as Swift writes them, without a String.
            if double.rounded() == double, double.magnitude < 1e15 {
                if double < 0 { bytes.append(UInt8(ascii: "-")) }
                append(digits: UInt64(double.magnitude))
                bytes.append(contentsOf: [UInt8(ascii: "."), UInt8(ascii: "0")])
                return
            }
            // JSONEncoder refuses non-finite numbers; none can occur here (capacity ≤ 1e6, tokens ≤ capacity, period from the bucket).
            bytes.append(contentsOf: (double.isFinite ? "\(double)" : "0").utf8)
        }

        /// A JSON string: `"` and `\` escaped, control characters as `\u00XX`, the rest as UTF-8.
        mutating func append(string: String) {
            bytes.append(UInt8(ascii: "\""))
            for byte in string.utf8 {
                switch byte {
                case UInt8(ascii: "\""), UInt8(ascii: "\\"):
                    bytes.append(UInt8(ascii: "\\"))
                    bytes.append(byte)
                case 0x0A: bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "n")])
                case 0x0D: bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "r")])
                case 0x09: bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "t")])
                case 0..<0x20:
                    let hex = Array("0123456789abcdef".utf8)
                    bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "u"), UInt8(ascii: "0"), UInt8(ascii: "0"),
                                              hex[Int(byte >> 4)], hex[Int(byte & 0xF)]])
                default:
                    bytes.append(byte)
                }
            }
            bytes.append(UInt8(ascii: "\""))
        }
    }
}
