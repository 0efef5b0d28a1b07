@testable import BgTaskDaemon
import Testing

/// The one decoder of byte escapes behind unit names and mountinfo fields.
struct EscapedTextTests {
    @Test func hexAndOctalEscapes() {
        #expect(EscapedText.decode("a\\x2db\\x2ec", marker: "\\x", digits: 2, radix: 16) == "a-b.c")
        #expect(EscapedText.decode("/mnt/cg\\040x\\134", marker: "\\", digits: 3, radix: 8) == "/mnt/cg x\\")
    }

    @Test(arguments: ["", "plain", "a\\x2", "a\\xzz", "\\", "a\\04", "a\\999"])
    func whatIsNoWholeEscapeStays(_ text: String) {
        let decoded = text.contains("x")
            ? EscapedText.decode(text, marker: "\\x", digits: 2, radix: 16)
            : EscapedText.decode(text, marker: "\\", digits: 3, radix: 8)
        #expect(decoded == text)
    }
}
