import BgTaskPluginABI
public import BgTaskProtocol
import Glibc

/// A D-Bus message a plugin reads (call arguments) or writes (replies,
/// signals), through the host's functions.
public struct PluginMessage {
    let api: UnsafePointer<bgt_host_api>
    let handle: OpaquePointer

    private func check(_ result: Int32, _ what: @autoclosure () -> String) throws(ModeError) {
        if result < 0 { throw ModeError.invalidArgs(what()) }
    }

    /// `type` is a scalar, not a Character: reading a Character's ASCII value
    /// costs more than the read itself on the paths this serves.
    private func readBasic<T>(_ type: Unicode.Scalar, _ initial: T) throws(ModeError) -> T {
        var value = initial
        let result = withUnsafeMutablePointer(to: &value) {
            api.pointee.message_read(handle, CChar(truncatingIfNeeded: type.value), UnsafeMutableRawPointer($0))
        }
        if result == 0 { throw ModeError.invalidArgs("missing argument of type '\(type)'") }
        if result == -EBADMSG, type == "s" {
            throw ModeError.invalidArgs(BgTaskError.unreadableString)
        }
        if result < 0 { throw ModeError.invalidArgs("expected an argument of type '\(type)'") }
        return value
    }

    // MARK: Reading

    public func readString() throws(ModeError) -> String {
        String(cString: try readBasic("s", UnsafePointer<CChar>?.none)!)
    }
    public func readObjectPath() throws(ModeError) -> String {
        String(cString: try readBasic("o", UnsafePointer<CChar>?.none)!)
    }

    /// Reads a string array (`as`) of at most `maximum` strings.
    public func readStrings(maximum: Int) throws(ModeError) -> [String] {
        try check(api.pointee.message_enter(handle, CChar(UInt8(ascii: "a")), "s"), "expected a string array")
        var strings: [String] = []
        while let (type, _) = try peek(), type == "s" {
            guard strings.count < maximum else { throw ModeError.invalidArgs("a string array holds more than \(maximum) strings") }
            strings.append(try readString())
        }
        try check(api.pointee.message_exit(handle), "malformed string array")
        return strings
    }

    /// Reads a byte array (`ay`) of at most `maximum` bytes.
    public func readBytes(maximum: Int) throws(ModeError) -> [UInt8] {
        try check(api.pointee.message_enter(handle, CChar(UInt8(ascii: "a")), "y"), "expected a byte array")
        var bytes: [UInt8] = []
        while let (type, _) = try peek(), type == "y" {
            guard bytes.count < maximum else { throw ModeError.invalidArgs("a byte array longer than \(maximum) bytes") }
            bytes.append(try readBasic("y", UInt8(0)))
        }
        try check(api.pointee.message_exit(handle), "malformed byte array")
        return bytes
    }
    public func readDouble() throws(ModeError) -> Double { try readBasic("d", 0.0) }
    public func readUInt32() throws(ModeError) -> UInt32 { try readBasic("u", UInt32(0)) }
    public func readUInt64() throws(ModeError) -> UInt64 { try readBasic("t", UInt64(0)) }
    public func readInt64() throws(ModeError) -> Int64 { try readBasic("x", Int64(0)) }
    public func readInt32() throws(ModeError) -> Int32 { try readBasic("i", Int32(0)) }
    public func readBool() throws(ModeError) -> Bool { try readBasic("b", Int32(0)) != 0 }

    /// The next value's type and, for containers, its contents; nil at the end.
    public func peek() throws(ModeError) -> (type: Character, contents: String?)? {
        var type: CChar = 0
        var contents: UnsafePointer<CChar>?
        let result = api.pointee.message_peek(handle, &type, &contents)
        try check(result, "cannot read the next argument")
        if result == 0 { return nil }
        return (Character(Unicode.Scalar(UInt8(bitPattern: type))), contents.map { String(cString: $0) })
    }

    /// How many entries an `a{sv}` read by ``readOptions(maximumEntries:)`` or
    /// ``readTypedOptions(maximumEntries:)`` may hold by default: options are
    /// a handful of keys, and a caller that sends a million must not make the
    /// daemon decode them before it hears no.
    public static let defaultMaximumOptions = 64
    /// Longest option key, in bytes.
    public static let maximumOptionKeyBytes = 256
    /// Most strings a variant's `as` may hold.
    public static let maximumArrayStrings = 1024
    /// The longest byte array a variant may hold (a UnifiedPush message is at most 4096 bytes).
    public static let maximumVariantBytes = 65_536

    /// Reads an `a{sv}` dictionary; values of types without a ``PluginValue`` case are `.other`.
    /// More than `maximumEntries` entries, or a key longer than
    /// ``maximumOptionKeyBytes``, is `InvalidArgs`, refused as soon as it is seen.
    public func readOptions(maximumEntries: Int = defaultMaximumOptions) throws(ModeError) -> [String: PluginValue] {
        try readTypedOptions(maximumEntries: maximumEntries).mapValues(\.value)
    }

    /// Reads from an `a{sv}` dictionary only the `d` values of `keys`, in
    /// their order (nil for a key that is absent or holds another type), and
    /// skips the rest without decoding it: for a hot path that needs a few
    /// numbers of a property dictionary (`GetAll`). Bounded as
    /// ``readOptions(maximumEntries:)``; a key given twice keeps its last value.
    public func readDoubles(
        _ keys: [StaticString], maximumEntries: Int = defaultMaximumOptions
    ) throws(ModeError) -> [Double?] {
        var values = [Double?](repeating: nil, count: keys.count)
        try forEachEntry(maximumEntries: maximumEntries) { (key) throws(ModeError) in
            let index = keys.firstIndex { wanted in
                let count = wanted.utf8CodeUnitCount
                let bytes = UnsafeRawPointer(wanted.utf8Start).assumingMemoryBound(to: CChar.self)
                return strncmp(key, bytes, count) == 0 && key[count] == 0
            }
            var type: CChar = 0
            var contents: UnsafePointer<CChar>?
            try check(api.pointee.message_peek(handle, &type, &contents), "malformed a{sv}")
            if let index, let contents, contents.pointee == CChar(UInt8(ascii: "d")), contents[1] == 0 {
                try check(api.pointee.message_enter(handle, CChar(UInt8(ascii: "v")), "d"), "malformed variant")
                values[index] = try readDouble()
                try check(api.pointee.message_exit(handle), "malformed variant")
            } else {
                try check(api.pointee.message_skip(handle, "v"), "malformed a{sv}")
            }
        }
        return values
    }

    /// Reads an `a{sv}` dictionary keeping each value's D-Bus signature, for
    /// option tables that refuse wrong types (portal style). Bounded as
    /// ``readOptions(maximumEntries:)``.
    public func readTypedOptions(
        maximumEntries: Int = defaultMaximumOptions
    ) throws(ModeError) -> [String: (signature: String, value: PluginValue)] {
        var options: [String: (signature: String, value: PluginValue)] = [:]
        try forEachEntry(maximumEntries: maximumEntries) { (bytes) throws(ModeError) in
            let key = String(cString: bytes)
            guard key.utf8.count <= Self.maximumOptionKeyBytes else {
                throw ModeError.invalidArgs("option key '\(key.prefix(40))…' is longer than \(Self.maximumOptionKeyBytes) bytes")
            }
            let signature = try peek()?.contents ?? ""
            options[key] = (signature, try readVariant())
        }
        return options
    }

    /// Walks an `a{sv}` dictionary: `body` gets each entry's key (valid
    /// during the call) and must read or skip its variant. More than
    /// `maximumEntries` entries is `InvalidArgs`, refused as soon as it is seen.
    private func forEachEntry(
        maximumEntries: Int, _ body: (UnsafePointer<CChar>) throws(ModeError) -> Void
    ) throws(ModeError) {
        var entries = 0
        try check(api.pointee.message_enter(handle, CChar(UInt8(ascii: "a")), "{sv}"), "expected an a{sv} argument")
        while api.pointee.message_enter(handle, CChar(UInt8(ascii: "e")), "sv") > 0 {
            entries += 1
            guard entries <= maximumEntries else {
                throw ModeError.invalidArgs("the options hold more than \(maximumEntries) entries")
            }
            try body(try readBasic("s", UnsafePointer<CChar>?.none)!)
            try check(api.pointee.message_exit(handle), "malformed a{sv}")
        }
        try check(api.pointee.message_exit(handle), "malformed a{sv}")
    }

    /// Reads a variant's value.
    public func readVariant() throws(ModeError) -> PluginValue {
        guard let (type, contents) = try peek(), type == "v", let inner = contents else {
            throw ModeError.invalidArgs("expected a variant")
        }
        try check(api.pointee.message_enter(handle, CChar(UInt8(ascii: "v")), inner), "malformed variant")
        defer { _ = api.pointee.message_exit(handle) }
        switch inner {
        case "b": return .bool(try readBool())
        case "y": return .uint(UInt64(try readBasic("y", UInt8(0))))
        case "n": return .int(Int64(try readBasic("n", Int16(0))))
        case "q": return .uint(UInt64(try readBasic("q", UInt16(0))))
        case "i": return .int(Int64(try readInt32()))
        case "u": return .uint(UInt64(try readUInt32()))
        case "x": return .int(try readInt64())
        case "t": return .uint(try readUInt64())
        case "d": return .double(try readDouble())
        case "s", "o", "g": return .string(String(cString: try readBasic(Unicode.Scalar(inner)!, UnsafePointer<CChar>?.none)!))
        case "as":
            var strings: [String] = []
            try check(api.pointee.message_enter(handle, CChar(UInt8(ascii: "a")), "s"), "malformed array")
            while let (type, _) = try peek(), type == "s" {
                guard strings.count < Self.maximumArrayStrings else {
                    throw ModeError.invalidArgs("a string array holds more than \(Self.maximumArrayStrings) strings")
                }
                strings.append(try readString())
            }
            try check(api.pointee.message_exit(handle), "malformed array")
            return .strings(strings)
        case "ay":
            return .bytes(try readBytes(maximum: Self.maximumVariantBytes))
        case "a{ss}":
            // String maps (HTTP headers): bounded as string arrays are.
            var entries: [String: PluginValue] = [:]
            try check(api.pointee.message_enter(handle, CChar(UInt8(ascii: "a")), "{ss}"), "malformed dictionary")
            while api.pointee.message_enter(handle, CChar(UInt8(ascii: "e")), "ss") > 0 {
                guard entries.count < Self.maximumArrayStrings else {
                    throw ModeError.invalidArgs("a string dictionary holds more than \(Self.maximumArrayStrings) entries")
                }
                let key = try readString()
                entries[key] = .string(try readString())
                try check(api.pointee.message_exit(handle), "malformed dictionary entry")
            }
            try check(api.pointee.message_exit(handle), "malformed dictionary")
            return .dictionary(entries)
        default:
            try check(api.pointee.message_skip(handle, inner), "cannot skip a value of type '\(inner)'")
            return .other(inner)
        }
    }

    // MARK: Writing

    private func appendBasic<T>(_ type: Character, _ value: T) throws(ModeError) {
        var value = value
        let result = withUnsafePointer(to: &value) { api.pointee.message_append(handle, CChar(type.asciiValue!), $0) }
        try check(result, "cannot append a value of type '\(type)'")
    }

    public func append(_ value: String) throws(ModeError) {
        let result = value.withCString { api.pointee.message_append(handle, CChar(UInt8(ascii: "s")), $0) }
        try check(result, "cannot append a string")
    }
    public func append(_ value: Double) throws(ModeError) { try appendBasic("d", value) }
    public func append(_ value: UInt32) throws(ModeError) { try appendBasic("u", value) }
    public func append(_ value: UInt64) throws(ModeError) { try appendBasic("t", value) }
    public func append(_ value: Int64) throws(ModeError) { try appendBasic("x", value) }
    public func append(_ value: Bool) throws(ModeError) { try appendBasic("b", Int32(value ? 1 : 0)) }
    public func append(_ value: Int32) throws(ModeError) { try appendBasic("i", value) }
    public func append(byte value: UInt8) throws(ModeError) { try appendBasic("y", value) }

    /// Writes `body` inside a container (`a`, `r`, `e`, `v`).
    public func container(_ type: Character, _ contents: String, _ body: () throws(ModeError) -> Void) throws(ModeError) {
        try check(api.pointee.message_open(handle, CChar(type.asciiValue!), contents), "cannot open '\(type)\(contents)'")
        try body()
        try check(api.pointee.message_close(handle), "cannot close '\(type)\(contents)'")
    }

    /// Appends a variant holding `value`.
    public func append(variant value: PluginValue) throws(ModeError) {
        switch value {
        case .bool(let v): try container("v", "b") { () throws(ModeError) in try append(v) }
        case .int(let v): try container("v", "x") { () throws(ModeError) in try append(v) }
        case .uint(let v): try container("v", "t") { () throws(ModeError) in try append(v) }
        case .double(let v): try container("v", "d") { () throws(ModeError) in try append(v) }
        case .string(let v): try container("v", "s") { () throws(ModeError) in try append(v) }
        case .strings(let values):
            try container("v", "as") { () throws(ModeError) in
                try container("a", "s") { () throws(ModeError) in for v in values { try append(v) } }
            }
        case .dictionary(let entries):
            try container("v", "a{sv}") { () throws(ModeError) in try append(dictionary: entries) }
        case .bytes(let bytes):
            try container("v", "ay") { () throws(ModeError) in
                try container("a", "y") { () throws(ModeError) in for byte in bytes { try append(byte: byte) } }
            }
        case .other(let signature):
            throw ModeError.failed("cannot write a value of type '\(signature)'")
        }
    }

    /// Appends `a{sv}` entries to an `a{sv}` container that is already open.
    public func appendEntries(_ entries: [String: PluginValue]) throws(ModeError) {
        for key in entries.keys.sorted() {
            try container("e", "sv") { () throws(ModeError) in
                try append(key)
                try append(variant: entries[key]!)
            }
        }
    }

    /// Appends a whole `a{sv}` dictionary.
    public func append(dictionary entries: [String: PluginValue]) throws(ModeError) {
        try container("a", "{sv}") { () throws(ModeError) in try appendEntries(entries) }
    }
}
