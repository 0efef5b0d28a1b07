/// JSON text written by hand where a whole encoder is not wanted (trace
/// lines, push payloads built from command-line pieces).
public enum JSONText {
    /// `text` as a JSON string literal: `"` and `\` escaped, control
    /// characters as `\n`, `\r`, `\t` or `\u00XX`, everything else as is.
    public static func quoted(_ text: String) -> String {
        // Ids and app ids need no escape: one copy, not a scalar at a time.
        if !text.utf8.contains(where: { $0 == UInt8(ascii: "\"") || $0 == UInt8(ascii: "\\") || $0 < 0x20 }) {
            return "\"" + text + "\""
        }
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
}
