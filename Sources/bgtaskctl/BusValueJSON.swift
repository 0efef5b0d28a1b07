import SDBus

/// Any D-Bus value as JSON, for `--json` output of dictionaries whose keys
/// bgtaskctl does not all know (`GetApplications`' `a{sv}`, which plugins
/// extend): strings and numbers as themselves, arrays and structs as
/// arrays, dictionaries as objects (keys as text), variants unwrapped, and
/// non-finite doubles (inf, nan) as null.
struct BusValueJSON: Encodable {
    var value: BusValue

    init(_ value: BusValue) {
        self.value = value
    }

    func encode(to encoder: any Encoder) throws {
        switch value.unwrapped {
        case .byte(let v): try single(encoder, v)
        case .bool(let v): try single(encoder, v)
        case .int16(let v): try single(encoder, v)
        case .uint16(let v): try single(encoder, v)
        case .int32(let v): try single(encoder, v)
        case .uint32(let v): try single(encoder, v)
        case .int64(let v): try single(encoder, v)
        case .uint64(let v): try single(encoder, v)
        case .double(let v):
            var container = encoder.singleValueContainer()
            if v.isFinite { try container.encode(v) } else { try container.encodeNil() }
        case .string(let v), .objectPath(let v), .signature(let v): try single(encoder, v)
        case .array(_, let values), .structure(let values):
            var container = encoder.unkeyedContainer()
            for element in values { try container.encode(BusValueJSON(element)) }
        case .dictionary(_, _, let entries):
            var container = encoder.container(keyedBy: Key.self)
            for entry in entries {
                try container.encode(BusValueJSON(entry.value), forKey: Key(Self.keyText(entry.key)))
            }
        case .variant:
            preconditionFailure("unwrapped removes every variant")
        }
    }

    private func single(_ encoder: any Encoder, _ value: some Encodable) throws {
        var container = encoder.singleValueContainer()
        try container.encode(value)
    }

    /// A dictionary key as JSON object key: strings as they are, others as printed.
    private static func keyText(_ key: BusValue) -> String {
        switch key.unwrapped {
        case .string(let text), .objectPath(let text), .signature(let text): text
        case let other: other.description
        }
    }

    private struct Key: CodingKey {
        var stringValue: String
        var intValue: Int? { nil }
        init(_ text: String) { stringValue = text }
        init?(stringValue: String) { self.stringValue = stringValue }
        init?(intValue: Int) { nil }
    }
}
