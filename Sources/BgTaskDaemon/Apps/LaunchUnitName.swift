import BgTaskCore

/// Names for launched apps' scopes, in the XDG convention
/// `app-<launcher>-<app id>-<random>.scope` that
/// ``SandboxInspector/appID(fromUnit:)`` reads back (docs/DESIGN.md §3).
enum LaunchUnitName {
    /// The launcher part of the name.
    static let launcher = "bgtaskd"

    /// `app-bgtaskd-<escaped id>-<random hex>.scope`.
    static func make(for appID: AppID, random: UInt64 = .random(in: 0...UInt64(UInt32.max))) -> String {
        let hex = String(random, radix: 16)
        return "app-\(launcher)-\(escape(appID.rawValue))-\(String(repeating: "0", count: max(0, 8 - hex.count)) + hex).scope"
    }

    /// systemd's unit-name escaping (`unit_name_escape`) of one name part:
    /// every byte but ASCII letters, digits, ':', '_' and a non-leading '.'
    /// becomes `\xNN`. For a valid app id only '-' changes (to `\x2d`), so the
    /// dashes that separate the parts of the unit name stay unambiguous.
    static func escape(_ text: String) -> String {
        var result = ""
        for (index, byte) in text.utf8.enumerated() {
            let plain: Bool
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
                UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: ":"), UInt8(ascii: "_"):
                plain = true
            case UInt8(ascii: "."):
                plain = index > 0
            default:
                plain = false
            }
            if plain {
                result.unicodeScalars.append(Unicode.Scalar(byte))
            } else {
                let hex = String(byte, radix: 16)
                result += "\\x" + (hex.count == 1 ? "0" + hex : hex)
            }
        }
        return result
    }
}
