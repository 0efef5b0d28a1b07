@testable import BgTaskDaemon
import Logging
import Testing

/// The daemon's log lines: one per event, whatever the event holds.
struct StandardErrorLogHandlerTests {
    func event(_ message: String, metadata: Logger.Metadata? = nil) -> LogEvent {
        LogEvent(level: .notice, message: "\(message)", metadata: metadata, source: nil, file: #fileID, function: #function, line: #line)
    }

    @Test func aMessageWithLineBreaksIsOneLine() {
        let plain = StandardErrorLogHandler(label: "bgtaskd", level: .debug, environment: [:])
        #expect(plain.line(for: event("region a\r\nbgtaskd: notice: FORGED entered"))
            == "bgtaskd: notice: region a\\r\\nbgtaskd: notice: FORGED entered\n")
        // Under systemd a line starting with <N> would be an entry of priority N.
        let journal = StandardErrorLogHandler(label: "bgtaskd", level: .debug, environment: ["JOURNAL_STREAM": "8:1"])
        #expect(journal.line(for: event("x\n<2>FORGED\u{1b}[31m")) == "<5>x\\n<2>FORGED\\u{1B}[31m\n")
    }

    @Test func metadataIsEscapedLikeTheMessage() {
        let handler = StandardErrorLogHandler(label: "bgtaskd", level: .debug, environment: ["JOURNAL_STREAM": "8:1"])
        let line = handler.line(for: event("m", metadata: ["id": "a\nb", "k\r": "\u{2028}", "place": "Zürich"]))
        #expect(line == "<5>m id=a\\nb k\\r=\\u{2028} place=Zürich\n")
    }
}
