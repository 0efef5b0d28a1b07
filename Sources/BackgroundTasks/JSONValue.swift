import BgTaskProtocol

/// Any JSON value: what a push's custom keys hold (``RemoteNotification/data``).
///
/// Numbers are `Double`s, as JavaScript and `JSONSerialization` read them, so
/// integers beyond 2^53 lose precision; decode the payload into your own type
/// with ``RemoteNotification/decode(_:using:)`` when that matters.
///
/// ```swift
/// // {"aps":{"content-available":1},"content-id":42,"tags":["news"]}
/// if let id = notification.data["content-id"]?.intValue { await download(id) }
/// if case .array(let tags)? = notification.data["tags"] { print(tags.compactMap(\.stringValue)) }
/// ```
public enum JSONValue: Sendable, Hashable, Codable, CustomStringConvertible {
    /// A string.
    ///
    /// ```swift
    /// notification.data["kind"] == .string("message")
    /// ```
    case string(String)

    /// A number (integers included).
    ///
    /// ```swift
    /// notification.data["content-id"] == .number(42)
    /// ```
    case number(Double)

    /// `true` or `false`.
    ///
    /// ```swift
    /// notification.data["urgent"] == .bool(true)
    /// ```
    case bool(Bool)

    /// `null`.
    ///
    /// ```swift
    /// notification.data["thread"] == .null
    /// ```
    case null

    /// An array.
    ///
    /// ```swift
    /// if case .array(let items)? = notification.data["ids"] { print(items.count) }
    /// ```
    case array([JSONValue])

    /// An object.
    ///
    /// ```swift
    /// if case .object(let sender)? = notification.data["sender"] { print(sender["name"] ?? .null) }
    /// ```
    case object([String: JSONValue])

    // MARK: Reading

    /// The string, if this is one.
    ///
    /// ```swift
    /// let kind = notification.data["kind"]?.stringValue ?? "unknown"
    /// ```
    public var stringValue: String? {
        if case .string(let text) = self { text } else { nil }
    }

    /// The number, if this is one.
    ///
    /// ```swift
    /// let score = notification.data["score"]?.doubleValue
    /// ```
    public var doubleValue: Double? {
        if case .number(let number) = self { number } else { nil }
    }

    /// The number as an `Int`, if this is a number with no fraction that fits.
    ///
    /// ```swift
    /// let id = notification.data["content-id"]?.intValue   // 42
    /// ```
    public var intValue: Int? {
        guard case .number(let number) = self, number.rounded(.towardZero) == number else { return nil }
        return Int(exactly: number)
    }

    /// The flag, if this is `true` or `false`.
    ///
    /// ```swift
    /// let urgent = notification.data["urgent"]?.boolValue ?? false
    /// ```
    public var boolValue: Bool? {
        if case .bool(let flag) = self { flag } else { nil }
    }

    /// Whether this is `null`.
    ///
    /// ```swift
    /// if notification.data["thread"]?.isNull == true { /* no thread */ }
    /// ```
    public var isNull: Bool { self == .null }

    /// An object's member; nil when this is not an object or has no such key.
    ///
    /// ```swift
    /// let name = notification.data["sender"]?["name"]?.stringValue
    /// ```
    public subscript(key: String) -> JSONValue? {
        if case .object(let members) = self { members[key] } else { nil }
    }

    /// An array's element; nil when this is not an array or the index is out of range.
    ///
    /// ```swift
    /// let first = notification.data["ids"]?[0]?.intValue
    /// ```
    public subscript(index: Int) -> JSONValue? {
        guard case .array(let items) = self, items.indices.contains(index) else { return nil }
        return items[index]
    }

    // MARK: Codable

    /// Reads any JSON value.
    ///
    /// ```swift
    /// let value = try JSONDecoder().decode(JSONValue.self, from: Data(#"{"a":[1,true,null]}"#.utf8))
    /// ```
    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        if container.decodeNil() {
            self = .null
        } else if let flag = try? container.decode(Bool.self) {
            self = .bool(flag)
        } else if let number = try? container.decode(Double.self) {
            self = .number(number)
        } else if let text = try? container.decode(String.self) {
            self = .string(text)
        } else if let items = try? container.decode([JSONValue].self) {
            self = .array(items)
        } else if let members = try? container.decode([String: JSONValue].self) {
            self = .object(members)
        } else {
            throw DecodingError.dataCorruptedError(in: container, debugDescription: "not a JSON value")
        }
    }

    /// Writes the value as itself (a number as a number, and so on).
    ///
    /// ```swift
    /// let data = try JSONEncoder().encode(JSONValue.object(["content-id": .number(42)]))
    /// ```
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        switch self {
        case .string(let text): try container.encode(text)
        case .number(let number): try container.encode(number)
        case .bool(let flag): try container.encode(flag)
        case .null: try container.encodeNil()
        case .array(let items): try container.encode(items)
        case .object(let members): try container.encode(members)
        }
    }

    // MARK: Text

    /// The value as compact JSON text, object keys sorted
    /// (`{"a":[1,true,null]}`); non-finite numbers, which JSON cannot hold,
    /// as `null`.
    ///
    /// ```swift
    /// print(notification.data["sender"] ?? .null)   // {"id":7,"name":"Ana"}
    /// ```
    public var description: String {
        var text = ""
        write(to: &text)
        return text
    }

    private func write(to text: inout String) {
        switch self {
        case .string(let string): Self.quote(string, into: &text)
        case .number(let number):
            if !number.isFinite {
                text += "null"
            } else if number.rounded(.towardZero) == number, let whole = Int64(exactly: number) {
                text += String(whole)
            } else {
                text += "\(number)"
            }
        case .bool(let flag): text += flag ? "true" : "false"
        case .null: text += "null"
        case .array(let items):
            text += "["
            for (index, item) in items.enumerated() {
                if index > 0 { text += "," }
                item.write(to: &text)
            }
            text += "]"
        case .object(let members):
            text += "{"
            for (index, key) in members.keys.sorted().enumerated() {
                if index > 0 { text += "," }
                Self.quote(key, into: &text)
                text += ":"
                members[key]!.write(to: &text)
            }
            text += "}"
        }
    }

    private static func quote(_ string: String, into text: inout String) {
        text += JSONText.quoted(string)
    }
}
