import BgTaskProtocol
import Testing

/// What an app puts into a log line stays in that line and cannot style it.
struct LogTextTests {
    @Test func lineBreaksAndEscapeSequencesAreWrittenVisibly() {
        #expect(LogText.escaped("a\r\nbgtaskd: notice: FORGED") == "a\\r\\nbgtaskd: notice: FORGED")
        #expect(LogText.escaped("\u{1}\u{1b}[31m") == "\\u{1}\\u{1B}[31m")
        #expect(LogText.escaped("x\n<2>critical") == "x\\n<2>critical")
        #expect(LogText.escaped("a\tb\0c\u{7F}") == "a\\tb\\u{0}c\\u{7F}")
    }

    @Test func c1ControlsAndUnicodeSeparatorsAreEscapedToo() {
        #expect(LogText.escaped("a\u{85}b\u{9B}31m\u{80}\u{9F}") == "a\\u{85}b\\u{9B}31m\\u{80}\\u{9F}")
        #expect(LogText.escaped("a\u{2028}b\u{2029}c") == "a\\u{2028}b\\u{2029}c")
    }

    /// A region id with a right-to-left override would show the rest of the line backwards.
    @Test func bidirectionalControlsAreEscaped() {
        #expect(LogText.escaped("home\u{202E}gpj.exe") == "home\\u{202E}gpj.exe")
        #expect(LogText.escaped("\u{2066}a\u{2069}\u{200F}\u{61C}") == "\\u{2066}a\\u{2069}\\u{200F}\\u{61C}")
    }

    @Test(arguments: ["", "plain text", "Zürich – 東京 🚲", "C:\\path\\x2d", "\u{A0}\u{A1}é"])
    func ordinaryTextIsKept(_ text: String) {
        #expect(LogText.escaped(text) == text)
    }
}
