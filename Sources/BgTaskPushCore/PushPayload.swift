public import BgTaskProtocol
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
    public init(json: String, maximumBytes: Int) throws(BgTaskError) {
        let bytes = Array(json.utf8)
        guard bytes.count <= maximumBytes else {
            throw BgTaskError(.payloadTooLarge, "the payload is \(bytes.count) bytes; the limit is \(maximumBytes) (RemoteNotifications.MaxPayloadBytes)")
        }
        try Self.scan(bytes)
        var parser = PushPayloadParser(bytes)
        do {
            try parser.parse()
        } catch {
            throw BgTaskError(.invalidArgs, "the payload is not valid JSON: \(error.reason)")
        }
        let fields = parser.fields
        guard fields.topKind == .object else {
            throw BgTaskError(.invalidArgs, "the payload must be a JSON object, not \(fields.topKind.rawValue)")
        }
        guard fields.hasAPS else {
            throw BgTaskError(.invalidArgs, "the payload has no \"aps\" object")
        }
        guard fields.apsKind == .object else {
            throw BgTaskError(.invalidArgs, "\"aps\" must be an object, not \(fields.apsKind.rawValue)")
        }
        switch (fields.contentAvailableKind, fields.contentAvailable) {
        case (nil, _): contentAvailable = false
        case (_, 0?): contentAvailable = false
        case (_, 1?): contentAvailable = true
        case (.number, let value?):
            // "not a number" read as NaN for 2 or 1e19: say which number it was.
            let shown = value == value.rounded() && abs(value) < 1e15 ? String(Int64(value)) : "\(value)"
            throw BgTaskError(.invalidArgs, "\"aps.content-available\" must be 1 (or 0), not \(shown)")
        case (let kind?, _): throw BgTaskError(.invalidArgs, "\"aps.content-available\" must be 1 (or 0), not \(kind.rawValue)")
        }
        switch fields.alertKind {
        case nil: alert = nil
        case .string: alert = Alert(title: nil, body: fields.alertText)
        case .object:
            for (key, kind) in [("title", fields.titleKind), ("body", fields.bodyKind)] where kind != nil && kind != .string {
                throw BgTaskError(.invalidArgs, "\"aps.alert.\(key)\" must be a string")
            }
            alert = Alert(title: fields.title, body: fields.body)
        case let other?: throw BgTaskError(.invalidArgs, "\"aps.alert\" must be a string or an object, not \(other.rawValue)")
        }
        // Stored now and sent later: text sd-bus cannot send would make the push undeliverable.
        for (what, text) in [("payload", json), ("alert's title", alert?.title), ("alert's text", alert?.body)] {
            guard let text, let scalar = DBusText.unsendable(in: text) else { continue }
            throw BgTaskError(.invalidArgs, "the \(what) holds \(DBusText.name(scalar)), which D-Bus strings here cannot carry")
        }
        self.json = json
    }

    /// Checks nesting depth and \u escapes before the parser sees the text:
    /// a deep payload is refused without recursing into it.
    private static func scan(_ bytes: [UInt8]) throws(BgTaskError) {
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
                            throw BgTaskError(.invalidArgs, "the payload is not valid UTF-8: it escapes a lone UTF-16 surrogate")
                        }
                        pendingHighSurrogate = high
                        index += 6
                        continue
                    }
                    if pendingHighSurrogate { throw BgTaskError(.invalidArgs, "the payload is not valid UTF-8: it escapes a lone UTF-16 surrogate") }
                    index += 2
                    continue
                }
                if pendingHighSurrogate { throw BgTaskError(.invalidArgs, "the payload is not valid UTF-8: it escapes a lone UTF-16 surrogate") }
                if byte == UInt8(ascii: "\"") { inString = false }
            } else if byte == UInt8(ascii: "\"") {
                inString = true
            } else if byte == UInt8(ascii: "[") || byte == UInt8(ascii: "{") {
                depth += 1
                if depth > maximumDepth {
                    throw BgTaskError(.invalidArgs, "the payload nests arrays and objects deeper than \(maximumDepth) levels")
                }
            } else if byte == UInt8(ascii: "]") || byte == UInt8(ascii: "}") {
                depth -= 1
            }
            index += 1
        }
    }
}
