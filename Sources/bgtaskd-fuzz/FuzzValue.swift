import BgTaskProtocol
import SDBus

/// A value for one argument of a call, with a short description for the
/// report and, when it is not an ordinary value, what makes it extreme.
struct FuzzValue {
    var value: BusValue
    /// `d nan`, `s 1 MiB of "x"`, `a{sv} expiration=t 18446744073710` …
    var label: String
    /// nil for an ordinary value; "" when the argument itself is extreme;
    /// an option key (`expiration`) when one entry of an `a{sv}` is.
    var extremeKey: String?

    init(_ value: BusValue, _ label: String, extreme: String? = "") {
        self.value = value
        self.label = label
        self.extremeKey = extreme
    }

    /// An ordinary value: what a well-behaved client would send.
    static func ordinary(_ value: BusValue, _ label: String) -> FuzzValue {
        FuzzValue(value, label, extreme: nil)
    }

    var isExtreme: Bool { extremeKey != nil }

    /// Whether sd-bus would refuse to send it: its strings hold Unicode
    /// noncharacters, which D-Bus allows and sd-bus does not (systemd's
    /// `unichar_is_valid`). Such calls go out through ``WireConnection``.
    var needsRawTransport: Bool { Self.needsRaw(value) }

    private static func needsRaw(_ value: BusValue) -> Bool {
        switch value {
        case .string(let text): text.unicodeScalars.contains { DBusText.isNoncharacter($0.value) }
        case .array(_, let values), .structure(let values): values.contains(where: needsRaw)
        case .dictionary(_, _, let entries): entries.contains { needsRaw($0.key) || needsRaw($0.value) }
        case .variant(let inner): needsRaw(inner)
        default: false
        }
    }
}
