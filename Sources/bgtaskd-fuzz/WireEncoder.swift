import SDBus

/// D-Bus marshalling in little-endian byte order, by hand, for the messages
/// sd-bus refuses to build (strings with Unicode noncharacters, which the
/// D-Bus specification allows). Offsets are aligned relative to the start
/// of the buffer, which is where the body starts in a message (on 8).
struct WireEncoder {
    private(set) var bytes: [UInt8] = []

    mutating func align(_ boundary: Int) {
        while bytes.count % boundary != 0 { bytes.append(0) }
    }

    mutating func byte(_ value: UInt8) { bytes.append(value) }

    mutating func uint16(_ value: UInt16) {
        align(2)
        withUnsafeBytes(of: value.littleEndian) { bytes.append(contentsOf: $0) }
    }

    mutating func uint32(_ value: UInt32) {
        align(4)
        withUnsafeBytes(of: value.littleEndian) { bytes.append(contentsOf: $0) }
    }

    mutating func uint64(_ value: UInt64) {
        align(8)
        withUnsafeBytes(of: value.littleEndian) { bytes.append(contentsOf: $0) }
    }

    mutating func string(_ text: String) {
        uint32(UInt32(text.utf8.count))
        bytes.append(contentsOf: text.utf8)
        bytes.append(0)
    }

    mutating func signature(_ text: String) {
        bytes.append(UInt8(truncatingIfNeeded: text.utf8.count))
        bytes.append(contentsOf: text.utf8)
        bytes.append(0)
    }

    /// Appends any value.
    mutating func append(_ value: BusValue) {
        switch value {
        case .byte(let v): byte(v)
        case .bool(let v): uint32(v ? 1 : 0)
        case .int16(let v): uint16(UInt16(bitPattern: v))
        case .uint16(let v): uint16(v)
        case .int32(let v): uint32(UInt32(bitPattern: v))
        case .uint32(let v): uint32(v)
        case .int64(let v): uint64(UInt64(bitPattern: v))
        case .uint64(let v): uint64(v)
        case .double(let v): uint64(v.bitPattern)
        case .string(let v), .objectPath(let v): string(v)
        case .signature(let v): signature(v)
        case .array(let element, let values):
            array(elementAlignment: Self.alignment(of: element)) { encoder in
                for value in values { encoder.append(value) }
            }
        case .dictionary(_, _, let entries):
            array(elementAlignment: 8) { encoder in
                for entry in entries {
                    encoder.align(8)
                    encoder.append(entry.key)
                    encoder.append(entry.value)
                }
            }
        case .structure(let fields):
            align(8)
            for field in fields { append(field) }
        case .variant(let inner):
            signature(inner.signature)
            append(inner)
        }
    }

    /// An array: its byte length (without the padding before the first
    /// element), then the elements.
    private mutating func array(elementAlignment: Int, _ body: (inout WireEncoder) -> Void) {
        uint32(0)
        let lengthAt = bytes.count - 4
        align(elementAlignment)
        let start = bytes.count
        body(&self)
        let length = UInt32(bytes.count - start).littleEndian
        withUnsafeBytes(of: length) { raw in
            for i in 0..<4 { bytes[lengthAt + i] = raw[i] }
        }
    }

    /// The alignment of a type by its first signature character.
    static func alignment(of signature: String) -> Int {
        switch signature.first {
        case "y", "g", "v": 1
        case "n", "q": 2
        case "x", "t", "d", "(", "{": 8
        default: 4
        }
    }

    /// A whole method call message: header, header fields, padding, body.
    static func methodCall(
        serial: UInt32, destination: String?, path: String, interface: String?, member: String, body: [BusValue]
    ) -> [UInt8] {
        var bodyEncoder = WireEncoder()
        for value in body { bodyEncoder.append(value) }
        let signature = body.map(\.signature).joined()
        var fields: [BusValue] = [
            .structure([.byte(1), .variant(.objectPath(path))]),
            .structure([.byte(3), .variant(.string(member))]),
        ]
        if let interface { fields.append(.structure([.byte(2), .variant(.string(interface))])) }
        if let destination { fields.append(.structure([.byte(6), .variant(.string(destination))])) }
        if !signature.isEmpty { fields.append(.structure([.byte(8), .variant(.signature(signature))])) }
        var message = WireEncoder()
        message.byte(UInt8(ascii: "l"))
        message.byte(1)  // METHOD_CALL
        message.byte(0)
        message.byte(1)  // protocol version
        message.uint32(UInt32(bodyEncoder.bytes.count))
        message.uint32(serial)
        message.append(.array(element: "(yv)", fields))
        message.align(8)
        return message.bytes + bodyEncoder.bytes
    }
}
