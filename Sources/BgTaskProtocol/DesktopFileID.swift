/// The rules of a desktop-file id (`org.example.Weather`): the desktop entry
/// specification asks ids to follow D-Bus well-known name rules, and bgtaskd
/// enforces them, so an id is always safe in a unit name, a file name and a log line.
public enum DesktopFileID {
    /// Why `text` is not a valid id, or nil when it is.
    public static func problem(with text: String) -> String? {
        let bytes = Array(text.utf8)
        if bytes.isEmpty { return "it is empty" }
        if bytes.count > 255 { return "it is longer than 255 bytes" }
        var elements = 0
        var elementLength = 0
        for byte in bytes {
            switch byte {
            case UInt8(ascii: "."):
                if elementLength == 0 { return "it has an empty element" }
                elements += 1
                elementLength = 0
            case UInt8(ascii: "0")...UInt8(ascii: "9"):
                if elementLength == 0 { return "an element starts with a digit" }
                elementLength += 1
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
                UInt8(ascii: "_"), UInt8(ascii: "-"):
                elementLength += 1
            default:
                return "it may contain only letters, digits, '_', '-' and '.'"
            }
        }
        if elementLength == 0 { return "it has an empty element" }
        if elements + 1 < 2 { return "it needs at least two elements separated by '.'" }
        return nil
    }
}
