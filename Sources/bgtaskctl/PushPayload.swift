import BgTaskProtocol
import Foundation

/// The APNs-style payload `bgtaskctl push` sends, built from its options the
/// way Houston's `apn push` builds one:
///
///     bgtaskctl push APP -n -d content-id=42
///     {"aps":{"content-available":1},"content-id":42}
///
/// `aps` comes first, with `alert` (a string, or `{"title":…,"body":…}` when
/// a title is given) and then `content-available`; the custom keys follow in
/// the order given. The text is written here rather than by a JSON encoder so
/// that custom values that are JSON go out exactly as typed (no reordered
/// keys, no large integers rounded through Double).
struct PushPayload {
    /// One custom top-level key and its value as JSON text.
    struct DataItem: Equatable {
        var key: String
        var json: String
    }

    var contentAvailable = false
    var alertBody: String?
    var alertTitle: String?
    var data: [DataItem] = []

    /// The payload as compact JSON text.
    var json: String {
        var aps: [String] = []
        if let alertTitle {
            var fields = ["\"title\":" + JSONText.quoted(alertTitle)]
            if let alertBody { fields.append("\"body\":" + JSONText.quoted(alertBody)) }
            aps.append("\"alert\":{" + fields.joined(separator: ",") + "}")
        } else if let alertBody {
            aps.append("\"alert\":" + JSONText.quoted(alertBody))
        }
        if contentAvailable { aps.append("\"content-available\":1") }
        var members = ["\"aps\":{" + aps.joined(separator: ",") + "}"]
        for item in data { members.append(JSONText.quoted(item.key) + ":" + item.json) }
        return "{" + members.joined(separator: ",") + "}"
    }

    /// What kind of push this makes: an alert, a silent push (wakes the app,
    /// shows nothing), or a deferred one (neither: it waits for the app's
    /// next wake).
    var kind: String {
        if alertBody != nil || alertTitle != nil { return "alert" }
        return contentAvailable ? "silent" : "deferred"
    }

    // MARK: -d KEY=VALUE

    /// Reads the `-d` arguments into custom keys.
    ///
    /// Each is `KEY=VALUE`, split at the first `=`. VALUE is taken as JSON
    /// when it is valid JSON (`42`, `true`, `null`, `"text"`, `[1,2]`,
    /// `{"a":1}`), else as a string; a number no double holds (`1e400`) is
    /// refused rather than sent as a string. As Houston's `-d`, one argument may also
    /// hold several pairs separated by commas (`a=1,b=2`), unless its VALUE is
    /// valid JSON as a whole (`ids=[1,2]`) or a piece has no `=`
    /// (`text=hello,world` is one string).
    static func dataItems(from arguments: [String]) throws(PayloadError) -> [DataItem] {
        var items: [DataItem] = []
        for argument in arguments {
            for pair in try pairs(in: argument) {
                if pair.key == "aps" {
                    throw PayloadError("-d \(argument): the key 'aps' is the payload's own; use -n, -a and -t to set it")
                }
                if items.contains(where: { $0.key == pair.key }) {
                    throw PayloadError("-d \(argument): the key '\(pair.key)' is given twice")
                }
                if isOutOfRangeNumber(pair.value) {
                    // Sent as a string it would change type unseen; the daemon refuses it as a number.
                    throw PayloadError("-d \(argument): the number \(pair.value) is beyond what a double holds, and apps read JSON"
                        + " numbers as doubles; quote it to send a string: \(pair.key)='\"\(pair.value)\"'")
                }
                items.append(DataItem(key: pair.key, json: jsonText(for: pair.value)))
            }
        }
        return items
    }

    private static func pairs(in argument: String) throws(PayloadError) -> [(key: String, value: String)] {
        guard let first = try split(argument, whole: argument) else {
            throw PayloadError("-d \(argument): expected KEY=VALUE, such as content-id=42")
        }
        // One pair when its value is JSON as a whole or the commas do not separate pairs.
        if isJSON(first.value) || !argument.contains(",") { return [first] }
        let pieces = argument.split(separator: ",", omittingEmptySubsequences: false).map(String.init)
        guard pieces.allSatisfy({ $0.contains("=") }) else { return [first] }
        var result: [(key: String, value: String)] = []
        for piece in pieces {
            guard let pair = try split(piece, whole: argument) else { return [first] }
            result.append(pair)
        }
        return result
    }

    private static func split(_ text: String, whole: String) throws(PayloadError) -> (key: String, value: String)? {
        guard let equals = text.firstIndex(of: "=") else { return nil }
        let key = String(text[..<equals])
        if key.isEmpty { throw PayloadError("-d \(whole): the key before '=' is empty") }
        return (key, String(text[text.index(after: equals)...]))
    }

    /// VALUE as JSON text: itself when it is valid JSON, else a JSON string.
    static func jsonText(for value: String) -> String {
        numberValue(value) != nil || isJSON(value) ? value.trimmingCharacters(in: .whitespacesAndNewlines) : JSONText.quoted(value)
    }

    /// Whether `text` is written as a JSON number (RFC 8259's grammar) whose
    /// value no double holds, such as `1e400`.
    static func isOutOfRangeNumber(_ text: String) -> Bool {
        guard let value = numberValue(text) else { return false }
        return !value.isFinite
    }

    /// The value of `text` written as a JSON number, nil when it is not one.
    /// Read here rather than by `JSONDecoder`, which refuses some numbers the
    /// daemon takes (`1e-400`, read as 0).
    private static func numberValue(_ text: String) -> Double? {
        let trimmed = text.trimmingCharacters(in: .whitespacesAndNewlines)
        guard trimmed.wholeMatch(of: /-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?/) != nil else { return nil }
        return Double(trimmed) ?? .infinity
    }

    /// Whether `text` is one valid JSON value (strict: no NaN, no trailing commas).
    static func isJSON(_ text: String) -> Bool {
        let trimmed = text.trimmingCharacters(in: .whitespacesAndNewlines)
        guard !trimmed.isEmpty else { return false }
        return (try? JSONDecoder().decode(AnyJSON.self, from: Data(trimmed.utf8))) != nil
    }

    /// Accepts any JSON value; used only to check that text parses.
    private struct AnyJSON: Decodable {
        init(from decoder: any Decoder) throws {
            let container = try decoder.singleValueContainer()
            if container.decodeNil() { return }
            if (try? container.decode(Bool.self)) != nil { return }
            if (try? container.decode(Double.self)) != nil { return }
            if (try? container.decode(String.self)) != nil { return }
            if (try? container.decode([AnyJSON].self)) != nil { return }
            _ = try container.decode([String: AnyJSON].self)
        }
    }
}

/// A `-d` argument (or `--payload`) that cannot make a payload.
struct PayloadError: Error, CustomStringConvertible {
    var description: String

    init(_ description: String) {
        self.description = description
    }
}
