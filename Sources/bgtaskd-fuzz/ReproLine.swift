import BgTaskProtocol
import SDBus

/// Renders calls as commands a person can run against a bgtaskd on their
/// session bus: a `busctl --user call …` line where busctl can say it, else
/// a python3 (dbus-python) program. busctl cannot send strings with Unicode
/// noncharacters (sd-bus refuses them), arguments over the kernel's 128 KiB
/// per-argument limit, or a call without an interface field; and one busctl
/// command is one connection, so calls that need a checked-in app or a
/// sequence on one connection need the program too.
enum ReproLine {
    /// Longest argument busctl gets on its command line (MAX_ARG_STRLEN is 128 KiB).
    static let maximumArgumentBytes = 100_000

    /// A busctl line for the call, or nil when busctl cannot send it.
    static func busctl(_ call: FuzzCall) -> String? {
        guard let interface = call.interface, !call.needsRawTransport else { return nil }
        var words = ["busctl", "--user", "--", "call", call.destination, call.path, interface, call.member]
        if !call.arguments.isEmpty {
            words.append(call.signature)
            for argument in call.arguments { busctlWords(argument.value, into: &words) }
        }
        guard words.allSatisfy({ $0.utf8.count <= maximumArgumentBytes }),
              words.reduce(0, { $0 + $1.utf8.count }) < 1_000_000 else { return nil }
        var line = words.map(ShellWord.quoted).joined(separator: " ")
        if case .app(let app) = call.role { line += "   # from a connection checked in as \(app)" }
        return line
    }

    /// One line for a call in a list of calls sent: busctl where busctl can
    /// say it (noting the app a connection checked in as), else the call's label.
    static func render(_ call: FuzzCall) -> String {
        busctl(call) ?? "# busctl cannot send this (\(reason(call))): \(call.label)"
    }

    /// What reproduces `calls` on a fresh daemon: one busctl line when a
    /// single call from any connection does, else a python3 program.
    static func reproduction(_ calls: [FuzzCall]) -> String {
        if calls.count == 1, calls[0].role == .anonymous || calls[0].role == .fresh, let line = busctl(calls[0]) { return line }
        return python(calls)
    }

    private static func reason(_ call: FuzzCall) -> String {
        if call.interface == nil { return "no interface field" }
        if call.needsRawTransport { return "sd-bus refuses Unicode noncharacters" }
        return "an argument over 100 KB"
    }

    /// busctl's command-line form of a value: containers as counts and elements, variants as signature and value.
    private static func busctlWords(_ value: BusValue, into words: inout [String]) {
        switch value {
        case .byte(let v): words.append("\(v)")
        case .bool(let v): words.append(v ? "true" : "false")
        case .int16(let v): words.append("\(v)")
        case .uint16(let v): words.append("\(v)")
        case .int32(let v): words.append("\(v)")
        case .uint32(let v): words.append("\(v)")
        case .int64(let v): words.append("\(v)")
        case .uint64(let v): words.append("\(v)")
        case .double(let v): words.append(cDouble(v))
        case .string(let v), .objectPath(let v), .signature(let v): words.append(v)
        case .array(_, let values):
            words.append("\(values.count)")
            for value in values { busctlWords(value, into: &words) }
        case .dictionary(_, _, let entries):
            words.append("\(entries.count)")
            for entry in entries {
                busctlWords(entry.key, into: &words)
                busctlWords(entry.value, into: &words)
            }
        case .structure(let fields):
            for field in fields { busctlWords(field, into: &words) }
        case .variant(let inner):
            words.append(inner.signature)
            busctlWords(inner, into: &words)
        }
    }

    /// A double as strtod reads it back exactly.
    private static func cDouble(_ value: Double) -> String {
        if value.isNaN { return "nan" }
        if value.isInfinite { return value < 0 ? "-inf" : "inf" }
        return "\(value)"
    }

    // MARK: python3

    /// A python3 program that makes the calls in order, one connection per
    /// role (app roles check in first), printing each answer.
    static func python(_ calls: [FuzzCall]) -> String {
        var roles: [FuzzCall.Role] = []
        for call in calls where call.role != .fresh && !roles.contains(call.role) { roles.append(call.role) }
        var lines = [
            "import dbus",
            "def bus(app=None):",
            "    b = dbus.SessionBus(private=True)",
            "    if app: b.call_blocking('\(calls.first?.destination ?? "")', '/org/bgtaskd/BackgroundTasks1', 'org.bgtaskd.BackgroundTasks1.Manager', 'CheckIn', 's', [app])",
            "    return b",
            "def call(b, *a):",
            "    try: print(b.call_blocking(*a, timeout=10))",
            "    except dbus.DBusException as e: print(e.get_dbus_name(), e)",
        ]
        for (index, role) in roles.enumerated() {
            if case .app(let app) = role { lines.append("c\(index) = bus(\(pythonString(app)))") } else { lines.append("c\(index) = bus()") }
        }
        for call in calls {
            let connection = call.role == .fresh ? "bus()" : "c\(roles.firstIndex(of: call.role)!)"
            let interface = call.interface.map(pythonString) ?? "None"
            let arguments = call.arguments.map { pythonValue($0.value, variantLevel: 0) }.joined(separator: ", ")
            lines.append("call(\(connection), \(pythonString(call.destination)), \(pythonString(call.path)), \(interface), "
                + "\(pythonString(call.member)), \(pythonString(call.signature)), [\(arguments)])")
        }
        // Debian's python3-dbus (which python3-dbusmock pulls in) is for the system's python3.
        return "/usr/bin/python3 - <<'EOF'\n" + lines.joined(separator: "\n") + "\nEOF"
    }

    /// A dbus-python value; `variantLevel` counts the variants around it.
    private static func pythonValue(_ value: BusValue, variantLevel: Int) -> String {
        let level = variantLevel > 0 ? ", variant_level=\(variantLevel)" : ""
        switch value {
        case .byte(let v): return "dbus.Byte(\(v)\(level))"
        case .bool(let v): return "dbus.Boolean(\(v ? "True" : "False")\(level))"
        case .int16(let v): return "dbus.Int16(\(v)\(level))"
        case .uint16(let v): return "dbus.UInt16(\(v)\(level))"
        case .int32(let v): return "dbus.Int32(\(v)\(level))"
        case .uint32(let v): return "dbus.UInt32(\(v)\(level))"
        case .int64(let v): return "dbus.Int64(\(v)\(level))"
        case .uint64(let v): return "dbus.UInt64(\(v)\(level))"
        case .double(let v):
            let text = v.isNaN ? "float('nan')" : v.isInfinite ? (v < 0 ? "float('-inf')" : "float('inf')") : "\(v)"
            return "dbus.Double(\(text)\(level))"
        case .string(let v): return "dbus.String(\(pythonString(v))\(level))"
        case .objectPath(let v): return "dbus.ObjectPath(\(pythonString(v))\(level))"
        case .signature(let v): return "dbus.Signature(\(pythonString(v))\(level))"
        case .array(let element, let values):
            return "dbus.Array([\(values.map { pythonValue($0, variantLevel: 0) }.joined(separator: ", "))], signature=\(pythonString(element))\(level))"
        case .dictionary(let key, let valueSignature, let entries):
            let pairs = entries.map { "\(pythonValue($0.key, variantLevel: 0)): \(pythonValue($0.value, variantLevel: 0))" }
            return "dbus.Dictionary({\(pairs.joined(separator: ", "))}, signature=\(pythonString(key + valueSignature))\(level))"
        case .structure(let fields):
            return "dbus.Struct((\(fields.map { pythonValue($0, variantLevel: 0) }.joined(separator: ", ")),), signature=\(pythonString(fields.map(\.signature).joined()))\(level))"
        case .variant(let inner):
            return pythonValue(inner, variantLevel: variantLevel + 1)
        }
    }

    /// A Python string literal in ASCII; runs of one character as `'c' * n`.
    static func pythonString(_ text: String) -> String {
        var parts: [String] = []
        var literal = ""
        func flush() {
            if !literal.isEmpty { parts.append("'" + literal + "'") }
            literal = ""
        }
        let scalars = Array(text.unicodeScalars)
        var index = 0
        while index < scalars.count {
            var end = index + 1
            while end < scalars.count && scalars[end] == scalars[index] { end += 1 }
            if end - index >= 32 {
                flush()
                parts.append("'\(escaped(scalars[index]))' * \(end - index)")
            } else {
                for scalar in scalars[index..<end] { literal += escaped(scalar) }
            }
            index = end
        }
        flush()
        return parts.isEmpty ? "''" : parts.joined(separator: " + ")
    }

    private static func escaped(_ scalar: Unicode.Scalar) -> String {
        switch scalar {
        case "'": "\\'"
        case "\\": "\\\\"
        case _ where scalar.value >= 0x20 && scalar.value < 0x7F: String(scalar)
        case _ where scalar.value < 0x100: "\\x" + hex(scalar.value, 2)
        case _ where scalar.value < 0x10000: "\\u" + hex(scalar.value, 4)
        default: "\\U" + hex(scalar.value, 8)
        }
    }

    private static func hex(_ value: UInt32, _ digits: Int) -> String {
        let text = String(value, radix: 16)
        return String(repeating: "0", count: max(0, digits - text.count)) + text
    }
}
