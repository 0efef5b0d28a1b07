/// What text sd-bus carries in a D-Bus string. The D-Bus specification
/// allows any valid UTF-8 but NUL; sd-bus also refuses the Unicode
/// noncharacters (U+FDD0–U+FDEF, and every code point ending in FFFE or
/// FFFF), on sending as on receiving. Text the daemon stores to send later
/// (a push's payload, an alert's title) is checked with this when it comes
/// in, or it could never be sent.
public enum DBusText {
    /// Whether `scalar` is a Unicode noncharacter.
    public static func isNoncharacter(_ scalar: UInt32) -> Bool {
        (0xFDD0...0xFDEF).contains(scalar) || scalar & 0xFFFE == 0xFFFE
    }

    /// The first scalar of `text` that sd-bus cannot send in a string (NUL
    /// or a noncharacter); nil when all of it can go.
    public static func unsendable(in text: String) -> Unicode.Scalar? {
        // Every string a message carries passes here: bytes first. A NUL is a 0
        // byte, and every noncharacter's UTF-8 starts with 0xEF or 0xF0…0xF4.
        var text = text
        let maybe = text.withUTF8 { bytes in bytes.contains { $0 == 0 || $0 >= 0xEF } }
        guard maybe else { return nil }
        return text.unicodeScalars.first { $0.value == 0 || isNoncharacter($0.value) }
    }

    /// How a scalar is named in an error: `U+FFFE`.
    public static func name(_ scalar: Unicode.Scalar) -> String {
        let hex = String(scalar.value, radix: 16, uppercase: true)
        return "U+" + String(repeating: "0", count: max(0, 4 - hex.count)) + hex
    }
}
