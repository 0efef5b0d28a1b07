import BgTaskProtocol
import Foundation
import Testing

/// Strings written into hand-made JSON records come back as they were.
@Suite struct JSONTextTests {
    @Test func plainTextIsQuotedAsIsAndTheRestEscaped() throws {
        #expect(JSONText.quoted("org.example.App") == "\"org.example.App\"")
        #expect(JSONText.quoted("") == "\"\"")
        #expect(JSONText.quoted("a\"b\\c\nd\u{1}") == "\"a\\\"b\\\\c\\nd\\u0001\"")
        for text in ["l19a2-7", "café ☕︎", "\"", "\\", "tab\there", "\u{1f}", "x\"\u{0}y"] {
            let decoded = try JSONDecoder().decode(String.self, from: Data(JSONText.quoted(text).utf8))
            #expect(decoded == text)
        }
    }

    @Test func appendingGivesTheSameBytesAsQuoting() {
        for text in ["org.example.App", "", "a\"b\\c\nd\u{1}", "café ☕︎", "\u{1f}", "x\"\u{0}y"] {
            var bytes: [UInt8] = Array("[".utf8)
            JSONText.appendQuoted(text, to: &bytes)
            #expect(bytes == Array(("[" + JSONText.quoted(text)).utf8))
        }
    }
}
