/// D-Bus type signatures.
public enum BusSignature {
    /// Splits a signature into its complete types (`"sa{sv}u"` → `["s", "a{sv}", "u"]`);
    /// nil when it is not a valid signature.
    public static func completeTypes(_ signature: String) -> [String]? {
        let characters = Array(signature.utf8)
        var types: [String] = []
        var index = 0
        while index < characters.count {
            guard let end = endOfCompleteType(characters, from: index, depth: 0) else { return nil }
            types.append(String(decoding: characters[index..<end], as: UTF8.self))
            index = end
        }
        return types
    }

    private static let basic = Set("ybnqiuxtdsogh".utf8)

    /// The index just past the complete type starting at `start`.
    private static func endOfCompleteType(_ s: [UInt8], from start: Int, depth: Int) -> Int? {
        guard start < s.count, depth < 64 else { return nil }
        let c = s[start]
        if basic.contains(c) || c == UInt8(ascii: "v") { return start + 1 }
        switch c {
        case UInt8(ascii: "a"):
            if start + 1 < s.count, s[start + 1] == UInt8(ascii: "{") {
                guard let key = endOfCompleteType(s, from: start + 2, depth: depth + 1), key - (start + 2) == 1,
                      basic.contains(s[start + 2]),
                      let value = endOfCompleteType(s, from: key, depth: depth + 1),
                      value < s.count, s[value] == UInt8(ascii: "}") else { return nil }
                return value + 1
            }
            return endOfCompleteType(s, from: start + 1, depth: depth + 1)
        case UInt8(ascii: "("):
            var index = start + 1
            guard index < s.count, s[index] != UInt8(ascii: ")") else { return nil }
            while index < s.count && s[index] != UInt8(ascii: ")") {
                guard let end = endOfCompleteType(s, from: index, depth: depth + 1) else { return nil }
                index = end
            }
            return index < s.count ? index + 1 : nil
        default:
            return nil
        }
    }
}
