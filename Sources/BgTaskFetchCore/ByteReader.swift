import BgTaskProtocol
/// Reads little-endian values from bytes, failing at the end instead of trapping.
struct ByteReader {
    let bytes: [UInt8]
    var offset = 0

    mutating func byte() throws(BgTaskError) -> UInt8 {
        guard offset < bytes.count else { throw BgTaskError(.failed, "truncated record") }
        defer { offset += 1 }
        return bytes[offset]
    }

    mutating func integer<T: FixedWidthInteger>(_: T.Type) throws(BgTaskError) -> T {
        let size = MemoryLayout<T>.size
        guard offset + size <= bytes.count else { throw BgTaskError(.failed, "truncated record") }
        var value: T = 0
        for index in 0..<size { value |= T(bytes[offset + index]) << (8 * index) }
        offset += size
        return value
    }
}

extension [UInt8] {
    mutating func append<T: FixedWidthInteger>(integer value: T) {
        // Little-endian, in one copy (byte by byte, this was a hot spot of every fetch's record).
        Swift.withUnsafeBytes(of: value.littleEndian) { append(contentsOf: $0) }
    }

    mutating func append(double value: Double) {
        append(integer: value.bitPattern)
    }
}
