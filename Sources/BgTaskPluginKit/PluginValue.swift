/// A D-Bus value whose type is known only at run time: variants, and `a{sv}`
/// dictionaries such as options and `describe(app:into:)`.
public indirect enum PluginValue: Equatable, Sendable {
    case bool(Bool)
    case int(Int64)
    case uint(UInt64)
    case double(Double)
    case string(String)
    case strings([String])
    case dictionary([String: PluginValue])
    /// A byte array (`ay`).
    case bytes([UInt8])
    /// Any other type, by its signature (read but not interpreted).
    case other(String)

    /// The human name of the value's type, for error messages.
    public var typeName: String {
        switch self {
        case .bool: "boolean"
        case .int: "signed integer"
        case .uint: "unsigned integer"
        case .double: "double"
        case .string: "string"
        case .strings: "string array"
        case .dictionary: "dictionary"
        case .bytes: "byte array"
        case .other(let signature): "'\(signature)'"
        }
    }
}
