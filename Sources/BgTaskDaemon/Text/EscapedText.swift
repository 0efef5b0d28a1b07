/// Undoes the byte escapes the kernel and systemd write into names: a marker
/// followed by a fixed number of digits in a radix (`\x2d` in unit names,
/// `\040` in mountinfo). Anything that is not a whole escape stays as it is.
enum EscapedText {
    static func decode(_ text: some StringProtocol, marker: String, digits: Int, radix: Int) -> String {
        let marker = Array(marker.utf8)
        let utf8 = Array(text.utf8)
        guard !marker.isEmpty, utf8.count >= marker.count + digits else { return String(text) }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(utf8.count)
        var i = 0
        while i < utf8.count {
            let end = i + marker.count + digits
            if end <= utf8.count, Array(utf8[i..<(i + marker.count)]) == marker,
               let value = UInt8(String(decoding: utf8[(i + marker.count)..<end], as: UTF8.self), radix: radix) {
                bytes.append(value)
                i = end
            } else {
                bytes.append(utf8[i])
                i += 1
            }
        }
        return String(decoding: bytes, as: UTF8.self)
    }
}
