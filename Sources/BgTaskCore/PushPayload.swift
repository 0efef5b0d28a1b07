import Foundation

/// A push's APNs-style payload, validated: an object with an `aps` object;
/// `aps.content-available: 1` asks for a background wake; `aps.alert` (a string,
/// or an object with `title` and `body`) is shown to the user; other top-level
/// keys are the app's data, passed on untouched.
public struct PushPayload: Sendable, Equatable {
    /// The alert to show.
    public struct Alert: Sendable, Equatable {
        public var title: String?
        public var body: String?

        public init(title: String?, body: String?) {
            self.title = title
            self.body = body
        }
    }

    /// The payload as given (delivered to the app as is).
    public let json: String
    public let alert: Alert?
    public let contentAvailable: Bool

    /// Deepest nesting of arrays and objects accepted.
    public static let maximumDepth = 32

    /// A silent push: a background wake with nothing shown.
    public var isSilent: Bool { contentAvailable && alert == nil }

    /// Validates `json`; throws `PayloadTooLarge` over `maximumBytes`, else `InvalidArgs` saying what is wrong.
    public init(json: String, maximumBytes: Int) throws(CoreError) {
        let bytes = Array(json.utf8)
        guard bytes.count <= maximumBytes else {
            throw CoreError(.payloadTooLarge, "the payload is \(bytes.count) bytes; the limit is \(maximumBytes) (RemoteNotifications.MaxPayloadBytes)")
        }
        try Self.scan(bytes)
        let object: Any
        do {
            object = try JSONSerialization.jsonObject(with: Data(bytes), options: [.fragmentsAllowed])
        } catch {
            let reason = (error as NSError).userInfo[NSDebugDescriptionErrorKey] as? String ?? "\(error)"
            throw CoreError(.invalidArgs, "the payload is not valid JSON: \(reason)")
        }
        guard let top = object as? [String: Any] else {
            throw CoreError(.invalidArgs, "the payload must be a JSON object, not \(Self.kind(of: object))")
        }
        guard let apsValue = top["aps"] else {
            throw CoreError(.invalidArgs, "the payload has no \"aps\" object")
        }
        guard let aps = apsValue as? [String: Any] else {
            throw CoreError(.invalidArgs, "\"aps\" must be an object, not \(Self.kind(of: apsValue))")
        }
        switch aps["content-available"] {
        case nil: contentAvailable = false
        case let number as NSNumber where number == 0 || number == 1: contentAvailable = number == 1
        case let other?: throw CoreError(.invalidArgs, "\"aps.content-available\" must be 1 (or 0), not \(Self.kind(of: other))")
        }
        switch aps["alert"] {
        case nil: alert = nil
        case let text as String: alert = Alert(title: nil, body: text)
        case let fields as [String: Any]:
            for key in ["title", "body"] where fields[key] != nil && !(fields[key] is String) {
                throw CoreError(.invalidArgs, "\"aps.alert.\(key)\" must be a string")
            }
            alert = Alert(title: fields["title"] as? String, body: fields["body"] as? String)
        case let other?: throw CoreError(.invalidArgs, "\"aps.alert\" must be a string or an object, not \(Self.kind(of: other))")
        }
        self.json = json
    }

    /// Checks nesting depth and \u escapes before the parser sees the text:
    /// a deep payload is refused without recursing into it.
    private static func scan(_ bytes: [UInt8]) throws(CoreError) {
        var depth = 0
        var inString = false
        var index = 0
        var pendingHighSurrogate = false
        while index < bytes.count {
            let byte = bytes[index]
            if inString {
                if byte == UInt8(ascii: "\\"), index + 1 < bytes.count {
                    if bytes[index + 1] == UInt8(ascii: "u"), index + 5 < bytes.count,
                       let unit = UInt16(String(decoding: bytes[(index + 2)...(index + 5)], as: UTF8.self), radix: 16) {
                        let high = (0xD800...0xDBFF).contains(unit)
                        let low = (0xDC00...0xDFFF).contains(unit)
                        if pendingHighSurrogate != low {
                            throw CoreError(.invalidArgs, "the payload is not valid UTF-8: it escapes a lone UTF-16 surrogate")
                        }
                        pendingHighSurrogate = high
                        index += 6
                        continue
                    }
                    if pendingHighSurrogate { throw CoreError(.invalidArgs, "the payload is not valid UTF-8: it escapes a lone UTF-16 surrogate") }
                    index += 2
                    continue
                }
                if pendingHighSurrogate { throw CoreError(.invalidArgs, "the payload is not valid UTF-8: it escapes a lone UTF-16 surrogate") }
                if byte == UInt8(ascii: "\"") { inString = false }
            } else if byte == UInt8(ascii: "\"") {
                inString = true
            } else if byte == UInt8(ascii: "[") || byte == UInt8(ascii: "{") {
                depth += 1
                if depth > maximumDepth {
                    throw CoreError(.invalidArgs, "the payload nests arrays and objects deeper than \(maximumDepth) levels")
                }
            } else if byte == UInt8(ascii: "]") || byte == UInt8(ascii: "}") {
                depth -= 1
            }
            index += 1
        }
    }

    private static func kind(of value: Any) -> String {
        switch value {
        case is String: "a string"
        case is NSNumber: "a number"
        case is [Any]: "an array"
        case is [String: Any]: "an object"
        case is NSNull: "null"
        default: "another value"
        }
    }
}
