/// Makes text safe to put in one log line or table cell. Apps choose much of what is
/// logged (region ids, URLs, session ids): a line break in it would forge a
/// line of its own, under systemd one with the `<N>` priority it chooses, and
/// an escape sequence would restyle the terminal, and a bidirectional override
/// would show the rest of the line reversed (a URL read backwards). Such
/// characters are therefore written visibly, as Swift writes them; all else
/// is kept.
public enum LogText {
    /// `text` with every control character escaped: C0 (tab, CR and LF
    /// included), DEL, C1, the line and paragraph separators, and the
    /// bidirectional marks, embeddings, overrides and isolates.
    public static func escaped(_ text: String) -> String {
        guard text.unicodeScalars.contains(where: needsEscape) else { return text }
        var result = ""
        result.unicodeScalars.reserveCapacity(text.unicodeScalars.count + 8)
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\t": result += "\\t"
            case "\n": result += "\\n"
            case "\r": result += "\\r"
            case _ where needsEscape(scalar): result += "\\u{\(String(scalar.value, radix: 16, uppercase: true))}"
            default: result.unicodeScalars.append(scalar)
            }
        }
        return result
    }

    /// Whether `scalar` can break, style or reorder a line.
    private static func needsEscape(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar.value {
        case 0x00...0x1F, 0x7F...0x9F, 0x2028, 0x2029: true
        case 0x061C, 0x200E, 0x200F, 0x202A...0x202E, 0x2066...0x2069: true
        default: false
        }
    }
}
