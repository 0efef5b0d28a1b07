import BgTaskProtocol
@testable import BgTaskPushCore
import Foundation
import Testing

/// The hand-written payload reader against `JSONSerialization`, which it
/// replaced for speed: on thousands of mangled payloads both must accept the
/// same texts and find the same `content-available` and `alert`.
@Suite struct PushPayloadParserTests {
    /// What the earlier `JSONSerialization`-based reading made of a payload
    /// that passed the depth and surrogate checks.
    enum Reading: Equatable {
        case accepted(contentAvailable: Bool, alert: PushPayload.Alert?)
        case notJSON
        case refused(String)
    }

    static func reference(_ json: String) -> Reading {
        guard let object = try? JSONSerialization.jsonObject(with: Data(json.utf8), options: [.fragmentsAllowed]) else {
            return .notJSON
        }
        guard let top = object as? [String: Any] else { return .refused("top") }
        guard let apsValue = top["aps"] else { return .refused("no aps") }
        guard let aps = apsValue as? [String: Any] else { return .refused("aps") }
        let contentAvailable: Bool
        switch aps["content-available"] {
        case nil: contentAvailable = false
        case let number as NSNumber where number == 0 || number == 1: contentAvailable = number == 1
        default: return .refused("content-available")
        }
        let alert: PushPayload.Alert?
        switch aps["alert"] {
        case nil: alert = nil
        case let text as String: alert = .init(title: nil, body: text)
        case let fields as [String: Any]:
            for key in ["title", "body"] where fields[key] != nil && !(fields[key] is String) { return .refused("alert.\(key)") }
            alert = .init(title: fields["title"] as? String, body: fields["body"] as? String)
        default: return .refused("alert")
        }
        return .accepted(contentAvailable: contentAvailable, alert: alert)
    }

    /// The same reading by ``PushPayload``, or nil when its own checks (depth, surrogates) refused first.
    static func reading(_ json: String) -> Reading? {
        do {
            let payload = try PushPayload(json: json, maximumBytes: 1 << 20)
            return .accepted(contentAvailable: payload.contentAvailable, alert: payload.alert)
        } catch {
            let message = error.message
            if message.contains("not valid UTF-8") || message.contains("deeper than") { return nil }
            if message.contains("not valid JSON") { return .notJSON }
            for (needle, name) in [("must be a JSON object", "top"), ("no \"aps\"", "no aps"), ("\"aps\" must", "aps"),
                                   ("content-available", "content-available"), ("alert.title", "alert.title"),
                                   ("alert.body", "alert.body"), ("\"aps.alert\" must", "alert")]
            where message.contains(needle) {
                return .refused(name)
            }
            return .refused(message)
        }
    }

    static let seeds = [
        #"{"aps":{"content-available":1},"content-id":42}"#,
        #"{"aps":{"alert":{"title":"Rain","body":"at 5 \u00e9\ud83d\ude00"}},"list":[1,-2.5e3,true,false,null,{"a":[]}]}"#,
        #" { "aps" : { "alert" : "Hi \"there\"\n\t\/", "content-available" : 0 } , "x" : 0.5 } "#,
        #"{"aps":{"content-available":true,"alert":{"body":"b"}},"aps":{"alert":"second"}}"#,
        #"{"n":[0,1,12,1.0,1E2,1e-2,-0,123456789012345678901234567890],"aps":{"content-available":1.0}}"#,
        #"{"aps":{"alert":{"title":null,"body":"x","title":"t"}},"s":"\\\b\f\r"}"#,
    ]

    @Test func agreesWithJSONSerializationOnMangledPayloads() {
        var state: UInt64 = 0x9E37_79B9_7F4A_7C15
        func random(_ bound: Int) -> Int {
            state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            return Int((state >> 33) % UInt64(bound))
        }
        let alphabet = Array(#"{}[]":,0123456789.eE+-tfnrulsa \/bxu"#.utf8) + [0x0A, 0x09, 0x5C, 0x01, 0xC3, 0xA9]
        var compared = 0, disagreements: [String] = []
        for seed in Self.seeds {
            #expect(Self.reading(seed) == Self.reference(seed), "\(seed)")
            for _ in 0..<3000 {
                var bytes = Array(seed.utf8)
                for _ in 0...random(3) where !bytes.isEmpty {
                    let at = random(bytes.count)
                    switch random(4) {
                    case 0: bytes.remove(at: at)
                    case 1: bytes.insert(alphabet[random(alphabet.count)], at: at)
                    case 2: bytes[at] = alphabet[random(alphabet.count)]
                    default:
                        let end = min(bytes.count, at + 1 + random(8))
                        bytes.insert(contentsOf: bytes[at..<end], at: random(bytes.count))
                    }
                }
                // Only texts a D-Bus string can carry: valid UTF-8.
                guard let json = String(validating: bytes, as: UTF8.self), !json.contains("\0") else { continue }
                guard let mine = Self.reading(json) else { continue }
                compared += 1
                let theirs = Self.reference(json)
                // JSONSerialization also takes a comma before a closing bracket; that is not JSON.
                if mine == .notJSON, Self.hasTrailingComma(json) { continue }
                if mine != theirs, disagreements.count < 10 { disagreements.append("\(json) → \(mine) vs \(theirs)") }
            }
        }
        #expect(disagreements.isEmpty, "\(disagreements.joined(separator: "\n"))")
        #expect(compared > 10_000)
    }

    /// Whether a ',' is followed (after white space) by '}' or ']' outside strings.
    static func hasTrailingComma(_ json: String) -> Bool {
        var inString = false, escaped = false, afterComma = false
        for byte in json.utf8 {
            if inString {
                if escaped { escaped = false } else if byte == UInt8(ascii: "\\") { escaped = true } else if byte == UInt8(ascii: "\"") { inString = false }
                continue
            }
            switch byte {
            case UInt8(ascii: "\""): inString = true; afterComma = false
            case UInt8(ascii: ","): afterComma = true
            case UInt8(ascii: "}"), UInt8(ascii: "]"): if afterComma { return true }
            case 0x20, 0x09, 0x0A, 0x0D: break
            default: afterComma = false
            }
        }
        return false
    }

    @Test func aTrailingCommaIsNotJSON() {
        for json in [#"{"aps":{},}"#, #"{"aps":{"x":[1,2,]}}"#] {
            let error = #expect(throws: BgTaskError.self) { try PushPayload(json: json, maximumBytes: 4096) }
            #expect(error?.message.contains("not valid JSON") == true, "\(json)")
        }
    }

    @Test(arguments: ["01", "1.", ".5", "-", "+1", "-01", "1e", "1e+", "1E-7", "-0.0e0", "NaN", "Infinity", "tru", "nul", "True",
                      #""\x""#, #""\u12""#, #""\u00zz""#, "\"a\u{01}b\"", "[1 2]", "{\"a\" 1}", "{1:2}", "[", "\"", "1 1", "[,]", "{,}",
                      "123456789012345678901234567890123456789", "1e308", "-1e308", "1e309", "4.9e-324", "1e-400"])
    func edgeValuesAgreeWithJSONSerialization(_ value: String) {
        let json = #"{"aps":{"content-available":1},"v":"# + value + "}"
        #expect(Self.reading(json) == Self.reference(json), "\(json)")
    }

    @Test func escapesAreDecoded() throws {
        let payload = try PushPayload(json: #"{"aps":{"alert":{"title":"a\"b\\c\/d\n\u00e9\ud83d\ude00","body":"plain"}}}"#, maximumBytes: 4096)
        #expect(payload.alert == .init(title: "a\"b\\c/d\né😀", body: "plain"))
    }

    /// A push is stored to be sent later: text sd-bus will not send (a
    /// noncharacter, or NUL in an alert) made it undeliverable for good.
    @Test(arguments: [
        "{\"aps\":{\"content-available\":1},\"x\":\"\u{FFFE}\"}",
        "{\"aps\":{\"alert\":\"a" + String(Unicode.Scalar(0xFDD0)!) + "\"}}",
        #"{"aps":{"alert":{"title":"\ufffe"}}}"#,
        #"{"aps":{"alert":{"body":"a\u0000b"}}}"#,
        #"{"aps":{"alert":"\udbff\udfff"}}"#,
    ])
    func textDBusCannotCarryIsRefused(_ json: String) {
        let error = #expect(throws: BgTaskError.self) { try PushPayload(json: json, maximumBytes: 4096) }
        #expect(error?.code == .invalidArgs && error?.message.contains("cannot carry") == true, "\(String(describing: error))")
    }

    @Test func aLaterDuplicateKeyWins() throws {
        let payload = try PushPayload(json: #"{"aps":{"alert":7},"aps":{"alert":"ok","content-available":1}}"#, maximumBytes: 4096)
        #expect(payload.alert?.body == "ok" && payload.contentAvailable)
    }
}
