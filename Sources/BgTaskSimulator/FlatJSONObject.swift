/// A JSON object whose values are all scalars: what one trace line is. A
/// small hand-written reader, because a trace has tens of thousands of lines
/// and the errors should say exactly what is wrong.
struct FlatJSONObject {
    enum Value: Equatable {
        case string(String)
        case number(Double)
        case bool(Bool)
        case null

        var typeName: String {
            switch self {
            case .string: "a string"
            case .number: "a number"
            case .bool: "a boolean"
            case .null: "null"
            }
        }
    }

    private(set) var fields: [(key: String, value: Value)] = []

    subscript(key: String) -> Value? {
        fields.first(where: { $0.key == key })?.value
    }

    /// Reads `bytes[range]` (one line, UTF-8); throws a message naming the column.
    init(_ bytes: [UInt8], _ range: Range<Int>) throws(ScanError) {
        var reader = Reader(bytes: bytes, index: range.lowerBound, end: range.upperBound, start: range.lowerBound)
        reader.skipSpace()
        try reader.expect(UInt8(ascii: "{"), "expected a JSON object starting with '{'")
        reader.skipSpace()
        if reader.peek == UInt8(ascii: "}") {
            reader.index += 1
        } else {
            while true {
                reader.skipSpace()
                guard reader.peek == UInt8(ascii: "\"") else { throw reader.error("expected a quoted field name") }
                let key = try reader.string()
                reader.skipSpace()
                try reader.expect(UInt8(ascii: ":"), "expected ':' after \"\(key)\"")
                reader.skipSpace()
                let value = try reader.value(for: key)
                if self[key] != nil { throw reader.error("field \"\(key)\" appears twice") }
                fields.append((key, value))
                reader.skipSpace()
                if reader.peek == UInt8(ascii: ",") { reader.index += 1; continue }
                try reader.expect(UInt8(ascii: "}"), "expected ',' or '}'")
                break
            }
        }
        reader.skipSpace()
        if reader.index < reader.end { throw reader.error("unexpected text after the object") }
    }

    struct ScanError: Error {
        var message: String
    }

    private struct Reader {
        let bytes: [UInt8]
        var index: Int
        let end: Int
        let start: Int

        var peek: UInt8? { index < end ? bytes[index] : nil }

        func error(_ message: String) -> ScanError {
            ScanError(message: "bad JSON at column \(index - start + 1): \(message)")
        }

        mutating func skipSpace() {
            while let c = peek, c == 0x20 || c == 0x09 || c == 0x0D { index += 1 }
        }

        mutating func expect(_ byte: UInt8, _ message: String) throws(ScanError) {
            guard peek == byte else { throw error(message) }
            index += 1
        }

        mutating func value(for key: String) throws(ScanError) -> Value {
            guard let c = peek else { throw error("expected a value for \"\(key)\"") }
            switch c {
            case UInt8(ascii: "\""): return .string(try string())
            case UInt8(ascii: "t"): try literal("true"); return .bool(true)
            case UInt8(ascii: "f"): try literal("false"); return .bool(false)
            case UInt8(ascii: "n"): try literal("null"); return .null
            case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return .number(try number())
            case UInt8(ascii: "{"), UInt8(ascii: "["): throw error("\"\(key)\": nested objects and arrays are not part of a trace")
            default: throw error("expected a value for \"\(key)\"")
            }
        }

        mutating func literal(_ word: String) throws(ScanError) {
            for byte in word.utf8 {
                guard peek == byte else { throw error("expected '\(word)'") }
                index += 1
            }
        }

        mutating func number() throws(ScanError) -> Double {
            let from = index
            while let c = peek, c == UInt8(ascii: "-") || c == UInt8(ascii: "+") || c == UInt8(ascii: ".")
                || c == UInt8(ascii: "e") || c == UInt8(ascii: "E") || (c >= UInt8(ascii: "0") && c <= UInt8(ascii: "9"))
            {
                index += 1
            }
            let text = String(decoding: bytes[from..<index], as: UTF8.self)
            guard let value = Double(text), value.isFinite else {
                index = from
                throw error("'\(text)' is not a number")
            }
            return value
        }

        mutating func string() throws(ScanError) -> String {
            index += 1  // the opening quote
            let from = index
            // Fast path: no escapes.
            while let c = peek, c != UInt8(ascii: "\""), c != UInt8(ascii: "\\") {
                if c < 0x20 { throw error("control character in a string") }
                index += 1
            }
            guard let c = peek else { throw error("unterminated string") }
            var out = String(decoding: bytes[from..<index], as: UTF8.self)
            if c == UInt8(ascii: "\"") {
                index += 1
                return out
            }
            var scalars = String.UnicodeScalarView()
            while true {
                guard let c = peek else { throw error("unterminated string") }
                if c == UInt8(ascii: "\"") { index += 1; break }
                if c != UInt8(ascii: "\\") {
                    // Copy a run of plain bytes.
                    let run = index
                    while let d = peek, d != UInt8(ascii: "\""), d != UInt8(ascii: "\\") {
                        if d < 0x20 { throw error("control character in a string") }
                        index += 1
                    }
                    scalars.append(contentsOf: String(decoding: bytes[run..<index], as: UTF8.self).unicodeScalars)
                    continue
                }
                index += 1
                guard let e = peek else { throw error("unterminated string") }
                index += 1
                switch e {
                case UInt8(ascii: "\""): scalars.append("\"")
                case UInt8(ascii: "\\"): scalars.append("\\")
                case UInt8(ascii: "/"): scalars.append("/")
                case UInt8(ascii: "b"): scalars.append("\u{08}")
                case UInt8(ascii: "f"): scalars.append("\u{0C}")
                case UInt8(ascii: "n"): scalars.append("\n")
                case UInt8(ascii: "r"): scalars.append("\r")
                case UInt8(ascii: "t"): scalars.append("\t")
                case UInt8(ascii: "u"):
                    var code = try hex4()
                    if (0xD800..<0xDC00).contains(code) {
                        // A surrogate pair.
                        guard peek == UInt8(ascii: "\\") else { throw error("lone surrogate in \\u escape") }
                        index += 1
                        try expect(UInt8(ascii: "u"), "lone surrogate in \\u escape")
                        let low = try hex4()
                        guard (0xDC00..<0xE000).contains(low) else { throw error("bad surrogate pair") }
                        code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00)
                    }
                    guard let scalar = Unicode.Scalar(code) else { throw error("bad \\u escape") }
                    scalars.append(scalar)
                default: throw error("bad escape '\\\(Character(Unicode.Scalar(e)))'")
                }
            }
            out.unicodeScalars.append(contentsOf: scalars)
            return out
        }

        mutating func hex4() throws(ScanError) -> UInt32 {
            var code: UInt32 = 0
            for _ in 0..<4 {
                guard let c = peek, let digit = Self.hexValue(c) else { throw error("bad \\u escape") }
                code = code << 4 | digit
                index += 1
            }
            return code
        }

        static func hexValue(_ c: UInt8) -> UInt32? {
            switch c {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): UInt32(c - UInt8(ascii: "0"))
            case UInt8(ascii: "a")...UInt8(ascii: "f"): UInt32(c - UInt8(ascii: "a") + 10)
            case UInt8(ascii: "A")...UInt8(ascii: "F"): UInt32(c - UInt8(ascii: "A") + 10)
            default: nil
            }
        }
    }
}
