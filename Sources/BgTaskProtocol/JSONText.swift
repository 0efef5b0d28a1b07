/// JSON text written by hand where a whole encoder is not wanted (trace
/// lines, push payloads built from command-line pieces).
public enum JSONText {
    /// `text` as a JSON string literal: `"` and `\` escaped, control
    /// characters as `\n`, `\r`, `\t` or `\u00XX`, everything else as is.
    public static func quoted(_ text: String) -> String {
        // Ids and app ids need no escape: one copy, not a scalar at a time.
        if !needsEscape(text) { return "\"" + text + "\"" }
        var out = "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            case _ where scalar.value < 0x20:
                let hex = String(scalar.value, radix: 16)
                out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out + "\""
    }

    /// Appends `text` as a JSON string literal (as ``quoted(_:)``) to `bytes`:
    /// records built byte by byte make no intermediate strings.
    public static func appendQuoted(_ text: String, to bytes: inout [UInt8]) {
        guard needsEscape(text) else {
            bytes.append(UInt8(ascii: "\""))
            bytes.append(contentsOf: text.utf8)
            bytes.append(UInt8(ascii: "\""))
            return
        }
        bytes.append(contentsOf: quoted(text).utf8)
    }

    private static func needsEscape(_ text: String) -> Bool {
        text.utf8.contains { $0 == UInt8(ascii: "\"") || $0 == UInt8(ascii: "\\") || $0 < 0x20 }
    }
}
