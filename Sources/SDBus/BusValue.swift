import CSystemd

/// Any D-Bus value, for the places whose type is only known at run time:
/// variants, `a{sv}` option dictionaries, generic tools.
public indirect enum BusValue: Equatable, Sendable, CustomStringConvertible {
    case byte(UInt8)
    case bool(Bool)
    case int16(Int16)
    case uint16(UInt16)
    case int32(Int32)
    case uint32(UInt32)
    case int64(Int64)
    case uint64(UInt64)
    case double(Double)
    case string(String)
    case objectPath(String)
    case signature(String)
    /// An array whose elements have signature `element` (kept so empty arrays can be written).
    case array(element: String, [BusValue])
    /// A dictionary `a{kv}`, as (key, value) pairs in order.
    case dictionary(key: String, value: String, [DictionaryEntry])
    case structure([BusValue])
    case variant(BusValue)

    /// One entry of a ``dictionary(key:value:_:)``.
    public struct DictionaryEntry: Equatable, Sendable {
        public var key: BusValue
        public var value: BusValue
        public init(key: BusValue, value: BusValue) {
            self.key = key
            self.value = value
        }
    }

    /// The D-Bus signature of this value.
    public var signature: String {
        switch self {
        case .byte: "y"
        case .bool: "b"
        case .int16: "n"
        case .uint16: "q"
        case .int32: "i"
        case .uint32: "u"
        case .int64: "x"
        case .uint64: "t"
        case .double: "d"
        case .string: "s"
        case .objectPath: "o"
        case .signature: "g"
        case .array(let element, _): "a" + element
        case .dictionary(let key, let value, _): "a{" + key + value + "}"
        case .structure(let fields): "(" + fields.map(\.signature).joined() + ")"
        case .variant: "v"
        }
    }

    /// The human name of this value's type, for error messages.
    public var typeName: String {
        switch self {
        case .byte: "byte"
        case .bool: "boolean"
        case .int16, .int32, .int64: "signed integer"
        case .uint16, .uint32, .uint64: "unsigned integer"
        case .double: "double"
        case .string: "string"
        case .objectPath: "object path"
        case .signature: "signature"
        case .array: "array"
        case .dictionary: "dictionary"
        case .structure: "struct"
        case .variant: "variant"
        }
    }

    public var description: String {
        switch self {
        case .byte(let v): "\(v)"
        case .bool(let v): "\(v)"
        case .int16(let v): "\(v)"
        case .uint16(let v): "\(v)"
        case .int32(let v): "\(v)"
        case .uint32(let v): "\(v)"
        case .int64(let v): "\(v)"
        case .uint64(let v): "\(v)"
        case .double(let v): "\(v)"
        case .string(let v), .objectPath(let v), .signature(let v): "\"\(v)\""
        case .array(_, let values): "[" + values.map(\.description).joined(separator: ", ") + "]"
        case .dictionary(_, _, let entries): "{" + entries.map { "\($0.key): \($0.value)" }.joined(separator: ", ") + "}"
        case .structure(let values): "(" + values.map(\.description).joined(separator: ", ") + ")"
        case .variant(let value): "<\(value)>"
        }
    }

    /// The value inside any number of variants.
    public var unwrapped: BusValue {
        if case .variant(let inner) = self { return inner.unwrapped }
        return self
    }
}

extension Message {
    /// Reads the next value, whatever its type; nil at the end of the body or container.
    public func readValue() throws(BusError) -> BusValue? {
        guard let (type, contents) = try peekType() else { return nil }
        switch type {
        case "y": return .byte(try readByte())
        case "b": return .bool(try readBool())
        case "n": return .int16(Int16(truncatingIfNeeded: try readBasicInt(UInt8(ascii: "n"))))
        case "q": return .uint16(UInt16(truncatingIfNeeded: try readBasicInt(UInt8(ascii: "q"))))
        case "i": return .int32(try readInt32())
        case "u": return .uint32(try readUInt32())
        case "x": return .int64(try readInt64())
        case "t": return .uint64(try readUInt64())
        case "d": return .double(try readDouble())
        case "s": return .string(try readString())
        case "o": return .objectPath(try readObjectPath())
        case "g": return .signature(try readSignatureValue())
        case "v":
            try enterContainer("v", contents ?? "")
            let inner = try readValue()
            try exitContainer()
            guard let inner else { throw BusError.invalidArgs("empty variant") }
            return .variant(inner)
        case "r":
            try enterContainer("r", contents ?? "")
            var fields: [BusValue] = []
            while let field = try readValue() { fields.append(field) }
            try exitContainer()
            return .structure(fields)
        case "a":
            let element = contents ?? ""
            try enterContainer("a", element)
            defer { try? exitContainer() }
            if element.hasPrefix("{") {
                let inner = String(element.dropFirst().dropLast())
                let keySignature = String(inner.prefix(1))
                var entries: [BusValue.DictionaryEntry] = []
                while try enterContainer("e", inner) {
                    guard let key = try readValue(), let value = try readValue() else {
                        throw BusError.invalidArgs("malformed dictionary entry")
                    }
                    try exitContainer()
                    entries.append(.init(key: key, value: value))
                }
                return .dictionary(key: keySignature, value: String(inner.dropFirst()), entries)
            }
            var values: [BusValue] = []
            while let value = try readValue() { values.append(value) }
            return .array(element: element, values)
        default:
            // Unix fds and anything newer: skip them, they have no meaning here.
            try skip(String(type))
            return try readValue()
        }
    }

    /// Reads an `a{sv}` dictionary into a Swift dictionary (the last of duplicate keys wins).
    public func readOptions() throws(BusError) -> [String: BusValue] {
        var options: [String: BusValue] = [:]
        try enterContainer("a", "{sv}")
        while try enterContainer("e", "sv") {
            let key = try readString()
            guard let value = try readValue() else { throw BusError.invalidArgs("malformed a{sv} entry") }
            options[key] = value.unwrapped
            try exitContainer()
        }
        try exitContainer()
        return options
    }

    private func readBasicInt(_ type: UInt8) throws(BusError) -> Int64 {
        var value: Int64 = 0
        let r = withUnsafeMutablePointer(to: &value) { sd_bus_message_read_basic(handle, CChar(bitPattern: type), $0) }
        try check(r, "reading '\(Character(Unicode.Scalar(type)))'")
        return type == UInt8(ascii: "n") ? Int64(Int16(truncatingIfNeeded: value)) : Int64(UInt16(truncatingIfNeeded: value))
    }

    private func readSignatureValue() throws(BusError) -> String {
        var pointer: UnsafePointer<CChar>?
        let r = sd_bus_message_read_basic(handle, CChar(UInt8(ascii: "g")), &pointer)
        try check(r, "reading a signature")
        return pointer.map { String(cString: $0) } ?? ""
    }

    /// Appends any value (variants included).
    public func append(value: BusValue) throws(BusError) {
        switch value {
        case .byte(let v): try append(v)
        case .bool(let v): try append(v)
        case .int16(let v): try appendRaw(UInt8(ascii: "n"), v)
        case .uint16(let v): try appendRaw(UInt8(ascii: "q"), v)
        case .int32(let v): try append(v)
        case .uint32(let v): try append(v)
        case .int64(let v): try append(v)
        case .uint64(let v): try append(v)
        case .double(let v): try append(v)
        case .string(let v): try append(v)
        case .objectPath(let v): try appendObjectPath(v)
        case .signature(let v):
            let r = wrote(v.withCString { sd_bus_message_append_basic(handle, CChar(UInt8(ascii: "g")), $0) })
            try check(r, "appending a signature")
        case .array(let element, let values):
            try container("a", element) { () throws(BusError) in
                for value in values { try append(value: value) }
            }
        case .dictionary(let key, let valueSignature, let entries):
            try container("a", "{" + key + valueSignature + "}") { () throws(BusError) in
                for entry in entries {
                    try container("e", key + valueSignature) { () throws(BusError) in
                        try append(value: entry.key)
                        try append(value: entry.value)
                    }
                }
            }
        case .structure(let fields):
            try container("r", fields.map(\.signature).joined()) { () throws(BusError) in
                for field in fields { try append(value: field) }
            }
        case .variant(let inner):
            try container("v", inner.signature) { () throws(BusError) in try append(value: inner) }
        }
    }

    private func appendRaw<T>(_ type: UInt8, _ value: T) throws(BusError) {
        var value = value
        let r = wrote(withUnsafePointer(to: &value) { sd_bus_message_append_basic(handle, CChar(bitPattern: type), $0) })
        try check(r, "appending '\(Character(Unicode.Scalar(type)))'")
    }
}
