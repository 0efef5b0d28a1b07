import BgTaskProtocol
/// A strict JSON reader (RFC 8259) for push payloads: it checks the whole
/// text and keeps only what ``PushPayload`` needs, the top-level `aps`
/// object's `content-available` and `alert`.
///
/// Why not `JSONSerialization`: it builds a Foundation object for every value
/// of the payload only for bgtaskd to read two of them, and that was a fifth
/// of the daemon's time per `DeliverPush`. This reader allocates nothing but
/// the alert's strings. `PushPayloadParserTests` checks it against
/// `JSONSerialization` on thousands of mangled payloads: both accept the same
/// texts and find the same values.
///
/// Nesting depth and lone surrogates are checked before (see
/// ``PushPayload``), so the recursion here is at most 32 deep.
struct PushPayloadParser {
    /// A value's kind, for error messages.
    enum Kind: String {
        case object = "an object", array = "an array", string = "a string", number = "a number"
        case boolean = "a boolean", null = "null"
    }

    /// What the payload's `aps` holds.
    struct Fields {
        var topKind: Kind = .object
        var hasAPS = false
        var apsKind: Kind = .object
        /// `content-available`: nil if absent, else the number (booleans count as 1 and 0).
        var contentAvailable: Double?
        var contentAvailableKind: Kind?
        var alertKind: Kind?
        /// The alert when it is a string.
        var alertText: String?
        /// An alert object's `title` and `body`: their kinds, and their text when strings.
        var titleKind: Kind?
        var title: String?
        var bodyKind: Kind?
        var body: String?
    }

    struct Invalid: Error {
        var reason: String
    }

    private let bytes: [UInt8]
    private var index = 0
    private(set) var fields = Fields()

    init(_ bytes: [UInt8]) {
        self.bytes = bytes
    }

    /// Reads the whole text; throws why it is not JSON.
    mutating func parse() throws(Invalid) {
        skipSpace()
        fields.topKind = try value(role: .top)
        skipSpace()
        guard index == bytes.count else { throw invalid("unexpected text after the value") }
    }

    /// Where a value sits, for what to keep of it.
    private enum Role { case top, aps, contentAvailable, alert, alertTitle, alertBody, other }

    private mutating func value(role: Role) throws(Invalid) -> Kind {
        guard index < bytes.count else { throw invalid("the text ends where a value should be") }
        switch bytes[index] {
        case UInt8(ascii: "{"):
            try object(role: role)
            return .object
        case UInt8(ascii: "["):
            try array()
            return .array
        case UInt8(ascii: "\""):
            let keep = role == .alert || role == .alertTitle || role == .alertBody
            let text = try string(keep: keep)
            switch role {
            case .alert: fields.alertText = text
            case .alertTitle: fields.title = text
            case .alertBody: fields.body = text
            default: break
            }
            return .string
        case UInt8(ascii: "t"):
            try literal("true")
            if role == .contentAvailable { fields.contentAvailable = 1 }
            return .boolean
        case UInt8(ascii: "f"):
            try literal("false")
            if role == .contentAvailable { fields.contentAvailable = 0 }
            return .boolean
        case UInt8(ascii: "n"):
            try literal("null")
            return .null
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"):
            let number = try self.number()
            if role == .contentAvailable { fields.contentAvailable = number }
            return .number
        default:
            throw invalid("unexpected character '\(Self.show(bytes[index]))'")
        }
    }

    private mutating func object(role: Role) throws(Invalid) {
        index += 1
        skipSpace()
        if peek(UInt8(ascii: "}")) {
            index += 1
            return
        }
        while true {
            guard peek(UInt8(ascii: "\"")) else { throw invalid("an object key must be a string") }
            let key = try string(keep: role == .top || role == .aps || role == .alert)
            skipSpace()
            guard peek(UInt8(ascii: ":")) else { throw invalid("expected ':' after an object key") }
            index += 1
            skipSpace()
            let member: Role = switch (role, key) {
            case (.top, "aps"): .aps
            case (.aps, "content-available"): .contentAvailable
            case (.aps, "alert"): .alert
            case (.alert, "title"): .alertTitle
            case (.alert, "body"): .alertBody
            default: .other
            }
            // A later duplicate key replaces what an earlier one said, as in a dictionary.
            switch member {
            case .aps:
                fields.hasAPS = true
                (fields.contentAvailable, fields.contentAvailableKind, fields.alertKind, fields.alertText) = (nil, nil, nil, nil)
                (fields.titleKind, fields.title, fields.bodyKind, fields.body) = (nil, nil, nil, nil)
            case .contentAvailable: fields.contentAvailable = nil
            case .alert: (fields.alertText, fields.titleKind, fields.title, fields.bodyKind, fields.body) = (nil, nil, nil, nil, nil)
            case .alertTitle: fields.title = nil
            case .alertBody: fields.body = nil
            default: break
            }
            let kind = try value(role: member)
            switch member {
            case .aps: fields.apsKind = kind
            case .contentAvailable: fields.contentAvailableKind = kind
            case .alert: fields.alertKind = kind
            case .alertTitle: fields.titleKind = kind
            case .alertBody: fields.bodyKind = kind
            default: break
            }
            skipSpace()
            guard index < bytes.count else { throw invalid("the text ends inside an object") }
            if bytes[index] == UInt8(ascii: ",") {
                index += 1
                skipSpace()
            } else if bytes[index] == UInt8(ascii: "}") {
                index += 1
                return
            } else {
                throw invalid("expected ',' or '}' in an object, found '\(Self.show(bytes[index]))'")
            }
        }
    }

    private mutating func array() throws(Invalid) {
        index += 1
        skipSpace()
        if peek(UInt8(ascii: "]")) {
            index += 1
            return
        }
        while true {
            _ = try value(role: .other)
            skipSpace()
            guard index < bytes.count else { throw invalid("the text ends inside an array") }
            if bytes[index] == UInt8(ascii: ",") {
                index += 1
                skipSpace()
            } else if bytes[index] == UInt8(ascii: "]") {
                index += 1
                return
            } else {
                throw invalid("expected ',' or ']' in an array, found '\(Self.show(bytes[index]))'")
            }
        }
    }

    /// Reads a string; returns its text only when `keep` (else "").
    private mutating func string(keep: Bool) throws(Invalid) -> String {
        index += 1
        let start = index
        var escaped = false
        // Fast pass: find the end; plain strings need no decoding.
        while index < bytes.count {
            let byte = bytes[index]
            if byte == UInt8(ascii: "\"") { break }
            if byte < 0x20 { throw invalid("a control character must be escaped inside a string") }
            if byte == UInt8(ascii: "\\") {
                escaped = true
                index += 1
                guard index < bytes.count else { break }
                switch bytes[index] {
                case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"), UInt8(ascii: "b"), UInt8(ascii: "f"),
                     UInt8(ascii: "n"), UInt8(ascii: "r"), UInt8(ascii: "t"):
                    break
                case UInt8(ascii: "u"):
                    guard index + 4 < bytes.count, (1...4).allSatisfy({ Self.hexValue(bytes[index + $0]) != nil }) else {
                        throw invalid("\\u must be followed by four hex digits")
                    }
                    index += 4
                default:
                    throw invalid("invalid escape '\\\(Self.show(bytes[index]))' in a string")
                }
            }
            index += 1
        }
        guard index < bytes.count else { throw invalid("the text ends inside a string") }
        let end = index
        index += 1
        guard keep else { return "" }
        guard escaped else { return String(decoding: bytes[start..<end], as: UTF8.self) }
        return Self.unescape(bytes[start..<end])
    }

    /// Decodes the escapes of a string already checked by ``string(keep:)``
    /// (surrogates are paired: see ``PushPayload``).
    private static func unescape(_ raw: ArraySlice<UInt8>) -> String {
        var out: [UInt8] = []
        out.reserveCapacity(raw.count)
        var i = raw.startIndex
        func unit(at j: Int) -> UInt32 {
            (1...4).reduce(UInt32(0)) { $0 << 4 | UInt32(hexValue(raw[j + $1])!) }
        }
        while i < raw.endIndex {
            let byte = raw[i]
            guard byte == UInt8(ascii: "\\") else {
                out.append(byte)
                i += 1
                continue
            }
            let kind = raw[i + 1]
            switch kind {
            case UInt8(ascii: "b"): out.append(0x08)
            case UInt8(ascii: "f"): out.append(0x0C)
            case UInt8(ascii: "n"): out.append(0x0A)
            case UInt8(ascii: "r"): out.append(0x0D)
            case UInt8(ascii: "t"): out.append(0x09)
            case UInt8(ascii: "u"):
                var scalar = unit(at: i + 1)
                if (0xD800...0xDBFF).contains(scalar), i + 11 < raw.endIndex, raw[i + 6] == UInt8(ascii: "\\") {
                    let low = unit(at: i + 7)
                    scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
                    i += 6
                }
                UTF8.encode(Unicode.Scalar(scalar) ?? "\u{FFFD}") { out.append($0) }
                i += 6
                continue
            default: out.append(kind)
            }
            i += 2
        }
        return String(decoding: out, as: UTF8.self)
    }

    private mutating func number() throws(Invalid) -> Double {
        let start = index
        if peek(UInt8(ascii: "-")) { index += 1 }
        guard index < bytes.count, Self.isDigit(bytes[index]) else { throw invalid("a number needs digits") }
        if bytes[index] == UInt8(ascii: "0") {
            index += 1
            if index < bytes.count, Self.isDigit(bytes[index]) { throw invalid("a number must not start with 0") }
        } else {
            while index < bytes.count, Self.isDigit(bytes[index]) { index += 1 }
        }
        if peek(UInt8(ascii: ".")) {
            index += 1
            guard index < bytes.count, Self.isDigit(bytes[index]) else { throw invalid("a number needs digits after '.'") }
            while index < bytes.count, Self.isDigit(bytes[index]) { index += 1 }
        }
        if peek(UInt8(ascii: "e")) || peek(UInt8(ascii: "E")) {
            index += 1
            if peek(UInt8(ascii: "+")) || peek(UInt8(ascii: "-")) { index += 1 }
            guard index < bytes.count, Self.isDigit(bytes[index]) else { throw invalid("a number needs digits in its exponent") }
            while index < bytes.count, Self.isDigit(bytes[index]) { index += 1 }
        }
        let text = String(decoding: bytes[start..<index], as: UTF8.self)
        guard let value = Double(text), value.isFinite else { throw invalid("the number \(text.prefix(40)) is out of range") }
        return value
    }

    private mutating func literal(_ word: StaticString) throws(Invalid) {
        let count = word.utf8CodeUnitCount
        guard index + count <= bytes.count,
              word.withUTF8Buffer({ $0.elementsEqual(bytes[index..<(index + count)]) }) else {
            throw invalid("unexpected character '\(Self.show(bytes[index]))'")
        }
        index += count
    }

    private mutating func skipSpace() {
        while index < bytes.count {
            switch bytes[index] {
            case 0x20, 0x09, 0x0A, 0x0D: index += 1
            default: return
            }
        }
    }

    private func peek(_ byte: UInt8) -> Bool { index < bytes.count && bytes[index] == byte }

    private func invalid(_ what: String) -> Invalid {
        Invalid(reason: "\(what) (at byte \(index))")
    }

    private static func isDigit(_ byte: UInt8) -> Bool { byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9") }

    private static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
        default: nil
        }
    }

    private static func show(_ byte: UInt8) -> String {
        byte >= 0x20 && byte < 0x7F ? String(UnicodeScalar(byte)) : "\\u{\(String(byte, radix: 16))}"
    }
}
