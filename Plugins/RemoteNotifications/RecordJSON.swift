import BgTaskCore
import Foundation

// Implementation notes
//
// DeliverPush stores a record before it replies: the push, with the app's
// bucket and counters beside it (`appState`). JSONEncoder spent about as much of the daemon's time on them as
// SQLite did on storing them (Codable goes through boxed containers and
// generic metadata for every field), which capped durable pushes at about
// 1,500 per second. This writes the same JSON by hand, with the keys
// Codable's synthesized conformances use, so JSONDecoder reads it back (at
// start-up) exactly as before and records from older runs stay readable.
//
// Should PushRecord, TokenBucket or PushInbox.Counts change (a field added,
// renamed, given custom coding keys), the hand-written form would silently
// lose it. So `RecordJSON.init` checks, once, that it still writes what
// JSONEncoder writes: for samples with every field set, the same set of keys,
// each type's stored properties (by reflection) those it knows, and a
// JSONDecoder round trip back to an equal value. If any check fails, every
// record is written with JSONEncoder as before, and a warning says so.

/// Writes the plugin's records (pushes, per-app state) as JSON.
struct RecordJSON {
    /// Whether the hand-written form passed the start-up check.
    let isHandWritten: Bool
    /// Why it did not, for the log.
    let problem: String?
    private let encoder = JSONEncoder()

    init() {
        do {
            try Self.check()
            isHandWritten = true
            problem = nil
        } catch {
            isHandWritten = false
            problem = "\(error)"
        }
    }

    func encode(_ push: PushRecord) throws -> [UInt8] {
        isHandWritten ? Self.write(push) : Array(try encoder.encode(push))
    }

    func encode(_ state: AppRecord) throws -> [UInt8] {
        isHandWritten ? Self.write(state) : Array(try encoder.encode(state))
    }

    /// A push with its app's state beside it, as `"appState"` (see ``StoredPush``).
    func encode(_ push: PushRecord, appState: AppRecord) throws -> [UInt8] {
        Self.splice(try encode(push), appState: try encode(appState))
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

    static func write(_ push: PushRecord) -> [UInt8] {
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

    static func write(_ state: AppRecord) -> [UInt8] {
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

    // MARK: The start-up check

    struct Mismatch: Error, CustomStringConvertible {
        var description: String
    }

    /// Throws unless the hand-written form is what JSONEncoder writes, field for field (see the notes above).
    static func check() throws {
        let push = PushRecord(
            id: "p1-\"quoted\"\\\n\t\u{1}é", app: "org.example.App", payload: "{\"aps\":{\"alert\":\"a \\\"b\\\" \u{2028} c/d\"}}",
            priority: 10, expiration: 1_900_000_000, collapseID: "c/1", receivedAt: 1_700_000_000_123_456,
            sequence: 42, hasAlert: true, isSilent: false, state: .held)
        var bucket = TokenBucket(capacity: 3, period: 3600, now: 1_700_000_000_000_000)
        _ = bucket.take(at: 1_700_000_000_500_001)
        // Counts has no public initializer.
        var counts = try JSONDecoder().decode(PushInbox.Counts.self, from: Data(
            "{\"received\":0,\"delivered\":0,\"expired\":0,\"overflowed\":0,\"collapsed\":0,\"offences\":0}".utf8))
        (counts.received, counts.delivered, counts.expired, counts.overflowed, counts.collapsed, counts.offences) = (1_234_567_890, 0, 4, 3, 2, 1)
        let state = AppRecord(bucket: bucket, counts: counts, version: 7)

        try expectProperties(of: push, [
            "id", "app", "payload", "priority", "expiration", "collapseID", "receivedAt", "sequence", "hasAlert", "isSilent", "state",
        ])
        try expectProperties(of: bucket, ["capacity", "period", "tokens", "updatedAt"])
        try expectProperties(of: counts, ["received", "delivered", "expired", "overflowed", "collapsed", "offences"])
        try expectProperties(of: state, ["bucket", "counts", "version"])

        let encoder = JSONEncoder()
        let decoder = JSONDecoder()
        try expectSameKeys(write(push), Array(try encoder.encode(push)), "PushRecord")
        try expectSameKeys(write(state), Array(try encoder.encode(state)), "AppRecord")
        guard try decoder.decode(PushRecord.self, from: Data(write(push))) == push else {
            throw Mismatch(description: "a PushRecord does not read back equal")
        }
        let decoded = try decoder.decode(AppRecord.self, from: Data(write(state)))
        guard decoded.bucket == bucket, decoded.counts == counts, decoded.version == state.version else {
            throw Mismatch(description: "an app record does not read back equal")
        }
        let stored = try decoder.decode(StoredPush.self, from: Data(splice(write(push), appState: write(state))))
        guard stored.push == push, stored.appState?.version == state.version else {
            throw Mismatch(description: "a push with its app's state does not read back")
        }
    }

    private static func expectProperties(of value: Any, _ names: [String]) throws {
        let found = Mirror(reflecting: value).children.compactMap(\.label)
        guard found == names else {
            throw Mismatch(description: "\(type(of: value)) has the stored properties \(found), not \(names)")
        }
    }

    /// Both texts are JSON objects with the same keys, nested objects included.
    private static func expectSameKeys(_ mine: [UInt8], _ theirs: [UInt8], _ what: String) throws {
        func keys(_ bytes: [UInt8]) throws -> [String] {
            guard let object = try JSONSerialization.jsonObject(with: Data(bytes)) as? [String: Any] else {
                throw Mismatch(description: "\(what) is not a JSON object")
            }
            return object.flatMap { key, value in
                [key] + ((value as? [String: Any])?.keys.map { key + "." + $0 } ?? [])
            }.sorted()
        }
        let (a, b) = (try keys(mine), try keys(theirs))
        guard a == b else { throw Mismatch(description: "\(what) is written with the keys \(a); JSONEncoder writes \(b)") }
    }
}

/// What is stored per app besides its pushes (collection `apps`, and beside
/// each push record as `appState`).
struct AppRecord: Codable {
    var bucket: TokenBucket
    var counts: PushInbox.Counts
    /// Which save of the app's state this is: at start-up the highest wins,
    /// wherever it was written. Nil in records of earlier versions.
    var version: UInt64?
}

/// A record of the `pushes` collection: the push, and its app's state beside
/// it (absent in records of earlier versions), read in one pass.
struct StoredPush: Decodable {
    var push: PushRecord
    var appState: AppRecord?

    private enum Key: String, CodingKey { case appState }

    init(from decoder: any Decoder) throws {
        push = try PushRecord(from: decoder)
        // A state that cannot be read costs the state, never the push.
        appState = (try? decoder.container(keyedBy: Key.self).decodeIfPresent(AppRecord.self, forKey: .appState)) ?? nil
    }
}
