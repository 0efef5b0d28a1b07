import BgTaskProtocol
import BgTaskCore
import SDBus

/// The values the fuzzer tries, by D-Bus type and by argument name: the
/// extremes of each type, values that mean something to bgtaskd (app ids,
/// payloads, option keys), and random values of any signature.
struct ValueCatalog {
    /// `RemoteNotifications.DeliverPush`'s option table, as the XML documents
    /// it (and Plugins/RemoteNotifications/PushOptions.swift checks it):
    /// known keys with another type are refused, unknown keys are dropped.
    static let pushOptions: [(key: String, signature: String)] = [
        ("priority", "u"), ("expiration", "t"), ("collapse_id", "s"),
    ]

    /// One mebibyte: the size of the biggest strings.
    static let bigStringBytes = 1 << 20

    /// A silent push: stored, held or delivered.
    static let silentPayload = #"{"aps":{"content-available":1}}"#

    /// `Transfers.StartDownload`'s and `StartUpload`'s options (Plugins/Transfers
    /// checks them): unknown keys and wrong types are refused.
    static let transferOptions: [(key: String, signature: String)] = [
        ("discretionary", "b"), ("allow_metered", "b"), ("resource_timeout_s", "d"), ("method", "s"),
    ]

    /// The first app's data directory, where transfers may go.
    private let appDirectory: String
    private var rng: SplitMix64

    init(seed: UInt64, appDirectory: String = "/nonexistent") {
        self.appDirectory = appDirectory
        rng = SplitMix64(seed: seed ^ 0x6275_7a7a_6361_7461)
    }

    // MARK: Extremes by signature

    /// Every extreme value the systematic phase sends for an argument of
    /// `signature` named `argument`.
    mutating func extremes(signature: String, argument: String) -> [FuzzValue] {
        switch signature {
        case "d": return Self.doubles
        case "t": return Self.uint64s
        case "u": return Self.uint32s
        case "b": return [.init(.bool(true), "b true"), .init(.bool(false), "b false")]
        case "y": return [0, 1, 255].map { .init(.byte($0), "y \($0)") }
        case "n": return [Int16.min, -1, 0, Int16.max].map { .init(.int16($0), "n \($0)") }
        case "q": return [0, 1, UInt16.max].map { .init(.uint16($0), "q \($0)") }
        case "i": return [Int32.min, -1, 0, 1, Int32.max].map { .init(.int32($0), "i \($0)") }
        case "x": return [Int64.min, -1, 0, 1, Int64.max].map { .init(.int64($0), "x \($0)") }
        case "s": return strings(for: argument)
        case "o": return ["/", "/org/bgtaskd/BackgroundTasks1", "/a/b/c/" + String(repeating: "x", count: 4000)]
            .map { .init(.objectPath($0), "o \(Self.short($0))") }
        case "g": return ["", "s", "a{sv}", String(repeating: "(", count: 30) + "u" + String(repeating: ")", count: 30)]
            .map { .init(.signature($0), "g \(Self.short($0))") }
        case "v": return variants()
        case "a{sv}": return options(for: argument)
        default: return containerExtremes(signature, argument: argument)
        }
    }

    static let doubles: [FuzzValue] = [
        (0.0, "0"), (-0.0, "-0"), (1, "1"), (-1, "-1"), (1e300, "1e300"), (-1e300, "-1e300"), (9.999999999999999e299, "just below 1e300"),
        (.nan, "NaN"), (.infinity, "+inf"), (-.infinity, "-inf"), (.greatestFiniteMagnitude, "DBL_MAX"),
        (-.greatestFiniteMagnitude, "-DBL_MAX"), (.leastNonzeroMagnitude, "smallest subnormal"),
        (899.999, "899.999"), (900, "900"), (1.8446744073709552e19, "2^64"), (9.3e18, "9.3e18 (> Int64.max)"),
    ].map { FuzzValue(.double($0.0), "d \($0.1)") }

    static let uint64s: [FuzzValue] = [
        (0, "0"), (1, "1"), (UInt64(Int64.max), "Int64.max"), (UInt64(Int64.max) + 1, "Int64.max+1"), (.max, "UInt64.max"),
        (18_446_744_073_709, "18446744073709 (largest s whose µs fit)"), (18_446_744_073_710, "18446744073710 (s whose µs overflow)"),
    ].map { FuzzValue(.uint64($0.0), "t \($0.1)") }

    static let uint32s: [FuzzValue] = [0, 1, 5, 10, 11, 0x8000_0000, UInt32.max - 1, UInt32.max]
        .map { FuzzValue(.uint32($0), "u \($0)") }

    /// Strings for any string argument, then those that mean something for its name.
    private mutating func strings(for argument: String) -> [FuzzValue] {
        var values: [FuzzValue] = [
            .init(.string(""), "s empty"),
            .init(.string(String(repeating: "x", count: Self.bigStringBytes)), "s 1 MiB of \"x\""),
            .init(.string(String(repeating: "é", count: 32768)), "s 64 KiB of \"é\""),
            .init(.string(String(repeating: "t", count: 65536)), "s 64 KiB token"),
            .init(.string("\u{FFFE}"), "s U+FFFE"),
            .init(.string("\u{FFFF}"), "s U+FFFF"),
            .init(.string("\u{10FFFF}"), "s U+10FFFF"),
            .init(.string(String(Unicode.Scalar(0xFDD0)!) + "x\u{FFFF}"), "s U+FDD0 x U+FFFF"),
            .init(.string("org.example.\u{FFFE}"), "s org.example.U+FFFE"),
            .init(.string(randomUTF8(count: 16)), "s random UTF-8 (16 scalars)"),
            .init(.string(randomUTF8(count: 300)), "s random UTF-8 (300 scalars)"),
            .init(.string(randomUTF8(count: 5000)), "s random UTF-8 (5000 scalars)"),
            .init(.string("e" + String(repeating: "\u{301}", count: 2000)), "s 2000 combining marks"),
            .init(.string("\u{202E}\u{200D}\u{FEFF}x"), "s RTL override, ZWJ, BOM"),
            .init(.string("\n\t\r\u{1}\u{1B}[31m\u{7F}"), "s control characters"),
            .init(.string("%s%s%n%x%99999999d"), "s printf directives"),
            .init(.string("'; DROP TABLE pushes; --"), "s SQL"),
            .init(.string("../../../../etc/passwd"), "s path"),
            .init(.string("\u{1F600}"), "s emoji"),
            .init(.string("org.example.A"), "s known app id"),
        ]
        values += specificStrings(for: argument)
        return values
    }

    /// Strings that mean something to the argument named `argument`.
    mutating func specificStrings(for argument: String) -> [FuzzValue] {
        switch argument {
        case "app_id": return Self.appIDs
        case "payload_json": return Self.payloads
        case "token": return [
            .init(.string("x"), "s token x"), .init(.string(randomHex(32)), "s random hex token"),
            .init(.string("p0-1"), "s push-id-like token"),
        ]
        case "state": return ["active", "inactive", "background", "Background", "suspended", " active"]
            .map { .init(.string($0), "s \"\($0)\"", extreme: ["active", "inactive", "background"].contains($0) ? nil : "") }
        case "result": return ["newData", "noData", "failed", "NewData", "newdata "]
            .map { .init(.string($0), "s \"\($0)\"", extreme: ["newData", "noData", "failed"].contains($0) ? nil : "") }
        case "name": return [
            .init(.string(String(repeating: "n", count: 256)), "s 256 bytes"),
            .init(.string(String(repeating: "n", count: 257)), "s 257 bytes"),
            .init(.string(String(repeating: "é", count: 128)), "s 128 × é (256 bytes)"),
            .init(.string(String(repeating: "é", count: 129)), "s 129 × é (258 bytes)"),
        ]
        case "url": return Self.urls
        case "destination_path", "source_path":
            let paths: [(String, String)] = [
                (appDirectory + "/fuzz.bin", "in the app's directory"), (appDirectory + "/", "the directory itself"),
                (appDirectory + "/../escape.bin", "with .."), (appDirectory + "//x", "with //"), ("fuzz.bin", "relative"),
                (appDirectory + "/no/such/dir/x", "parent missing"), ("/etc/passwd", "another's file"),
                (appDirectory + "/" + String(repeating: "n", count: 300), "a 300-byte name"),
                (appDirectory + "/" + String(repeating: "d/", count: 3000) + "x", "6 KB deep"),
            ]
            return paths.map { .init(.string($0.0), "s path: \($0.1)") }
        case "interface_name", "interface": return Self.interfaceNames.map { .init(.string($0), "s \"\($0)\"") }
        case "property_name", "property": return Self.propertyNames.map { .init(.string($0), "s \"\($0)\"") }
        default: return []
        }
    }

    static let urls: [FuzzValue] = [
        "http://127.0.0.1:9/fuzz", "https://127.0.0.1:9/x", "file:///etc/passwd", "ftp://127.0.0.1/x", "http://", "http://[::1]:0/",
        "http://user:secret@127.0.0.1:9/x", "http://127.0.0.1:9/a\r\nX-Injected: y", "HTTP://127.0.0.1:9/UPPER", "http://127.0.0.1:99999/x",
        "http://" + String(repeating: "a", count: 70000) + "/", "http://127.0.0.1:9/" + String(repeating: "%", count: 1000),
        "javascript:alert(1)", "http://127.0.0.1:9/\u{1F600}",
    ].map { .init(.string($0), "s url \(Self.short($0))") }

    static let interfaceNames = [
        "org.bgtaskd.BackgroundTasks1.Manager", "org.bgtaskd.BackgroundTasks1.Fetch",
        "org.bgtaskd.BackgroundTasks1.RemoteNotifications", "org.bgtaskd.BackgroundTasks1.Location",
        "org.freedesktop.DBus.Properties", "", "a..b", "org.bgtaskd.BackgroundTasks1",
    ]

    static let propertyNames = ["Version", "Tasks", "Plugins", "Sleeping", "", "version", "NoSuchProperty"]

    static let appIDs: [FuzzValue] = {
        var values: [FuzzValue] = (Workspace.knownApps + [Workspace.unknownApp]).map { .init(.string($0), "s \($0)", extreme: nil) }
        let valid255 = "org." + String(repeating: "a", count: 251)
        let invalid: [(String, String)] = [
            ("", "empty"), ("org", "one element"), ("org.", "trailing dot"), (".org.example", "leading dot"),
            ("org..example", "empty element"), ("1org.example", "leading digit"), ("org.1example", "element with a leading digit"),
            ("org.exa mple", "space"), ("org/example", "slash"), ("org.example.A.desktop", "with .desktop"),
            ("org.example.\u{1F600}", "emoji element"), ("org.example.é", "non-ASCII letter"), ("-.-", "dashes"), ("_._", "underscores"),
            (valid255, "255 bytes"), (valid255 + "a", "256 bytes"), ("org.example.a\u{1}b", "with U+0001"),
        ]
        values += invalid.map { .init(.string($0.0), "s app id: \($0.1)") }
        return values
    }()

    /// Push payloads: the ordinary ones, and the ones the parser must refuse.
    static let payloads: [FuzzValue] = {
        let deep32 = String(repeating: "[", count: 30) + String(repeating: "]", count: 30)
        let deep33 = String(repeating: "[", count: 31) + String(repeating: "]", count: 31)
        let deep1900 = String(repeating: "[", count: 1900) + String(repeating: "]", count: 1900)
        func padded(to size: Int) -> String {
            let head = #"{"aps":{"content-available":1},"pad":""#
            return head + String(repeating: "p", count: max(0, size - head.utf8.count - 2)) + #""}"#
        }
        let ordinary: [(String, String)] = [
            (silentPayload, "silent"),
            (#"{"aps":{"alert":"Hello"}}"#, "alert string"),
            (#"{"aps":{"alert":{"title":"T","body":"B"},"content-available":1},"story":17}"#, "alert object + data"),
            (#"{"aps":{"content-available":1},"story":"x"}"#, "silent + data"),
        ]
        let extreme: [(String, String)] = [
            ("{}", "no aps"), ("[]", "array"), (#""x""#, "string"), ("1", "number"), ("null", "null"), ("", "empty"), ("{", "truncated"),
            (#"{"aps":1}"#, "aps not an object"), (#"{"aps":{}}"#, "empty aps"),
            (#"{"aps":{"content-available":1e999}}"#, "1e999"), (#"{"aps":{"content-available":"1"}}"#, "content-available string"),
            (#"{"aps":{"content-available":-1}}"#, "content-available -1"), (#"{"aps":{"content-available":18446744073709551616}}"#, "2^64"),
            (#"{"aps":{"alert":"\ud800"}}"#, "lone surrogate escape"), (#"{"aps":{"alert":"a\u0000b"}}"#, "escaped NUL"),
            (#"{"aps":{},"aps":{"content-available":1}}"#, "duplicate aps"), (#"{"aps":{"alert":[1,2]}}"#, "alert array"),
            (#"{"aps":{"alert":{"title":{"x":1}}}}"#, "alert title object"),
            ("{\"aps\":{\"content-available\":1},\"d\":\(deep32)}", "nesting 32"),
            ("{\"aps\":{\"content-available\":1},\"d\":\(deep33)}", "nesting 33"),
            ("{\"aps\":{\"content-available\":1},\"d\":\(deep1900)}", "nesting 1900"),
            (padded(to: 4096), "4096 bytes"), (padded(to: 4097), "4097 bytes"), (padded(to: 1 << 20), "1 MiB"),
            ("\u{FEFF}" + silentPayload, "BOM first"), (silentPayload + " x", "trailing garbage"), (" \n\t", "whitespace"),
            (#"{"aps":{"content-available":NaN}}"#, "NaN literal"), (#"{"aps":{/*c*/"content-available":1}}"#, "comment"),
            ("{\"aps\":{\"content-available\":1},\"\u{FFFF}\":\"\u{FFFE}\"}", "raw noncharacters"),
            (#"{"aps":{"alert":""# + String(repeating: "é", count: 1500) + #""}}"#, "3000-byte alert"),
        ]
        return ordinary.map { .init(.string($0.0), "s payload: \($0.1)", extreme: nil) }
            + extreme.map { .init(.string($0.0), "s payload: \($0.1)") }
    }()

    /// Variants of several types, and variants inside variants.
    private func variants() -> [FuzzValue] {
        var values: [FuzzValue] = [
            .init(.variant(.uint32(1)), "v u 1"), .init(.variant(.string("")), "v s empty"), .init(.variant(.bool(true)), "v b true"),
            .init(.variant(.double(.nan)), "v d NaN"), .init(.variant(.uint64(.max)), "v t UInt64.max"),
            .init(.variant(.array(element: "s", [])), "v as empty"),
            .init(.variant(.dictionary(key: "s", value: "v", [.init(key: .string("k"), value: .variant(.uint32(1)))])), "v a{sv}"),
            .init(.variant(.string(String(repeating: "x", count: Self.bigStringBytes))), "v s 1 MiB"),
        ]
        var nested = BusValue.uint32(10)
        for _ in 0..<30 { nested = .variant(nested) }
        values.append(.init(nested, "v nested 30 deep"))
        return values
    }

    // MARK: Options

    /// `a{sv}` values: every known option at its type's extremes and at wrong
    /// types, unknown keys, many keys, duplicate keys, nested variants.
    private mutating func options(for argument: String) -> [FuzzValue] {
        var values: [FuzzValue] = [.ordinary(Self.dictionary([]), "a{sv} empty")]
        for (key, signature) in Self.pushOptions + Self.transferOptions {
            for value in extremes(signature: signature, argument: key) where !value.needsComposition {
                values.append(.init(Self.dictionary([(key, value.value)]), "a{sv} \(key)=\(value.label)", extreme: key))
            }
            for wrong in Self.wrongTypedValues where wrong.value.signature != signature {
                values.append(.init(Self.dictionary([(key, wrong.value)]), "a{sv} \(key)=\(wrong.label) (wrong type)", extreme: key))
            }
            let right = Self.ordinaryOption(key)
            values.append(.init(Self.dictionary([(key, .variant(right))]), "a{sv} \(key)=v(\(right.signature)) (variant in variant)", extreme: key))
            values.append(.init(Self.dictionary([(key, right), (key, .string("again"))]), "a{sv} \(key) twice, second a string", extreme: key))
            values.append(.init(Self.dictionary([(key, .string("first")), (key, right)]), "a{sv} \(key) twice, first a string", extreme: key))
        }
        values.append(.ordinary(Self.dictionary(Self.pushOptions.map { ($0.key, Self.ordinaryOption($0.key)) }), "a{sv} all known keys"))
        values.append(.init(Self.dictionary([("priority", .uint32(.max)), ("expiration", .uint64(.max)), ("collapse_id", .string(""))]),
                            "a{sv} all known keys at extremes", extreme: "all"))
        let headers: [(BusValue, String)] = [
            (.dictionary(key: "s", value: "s", [.init(key: .string("X-Fuzz"), value: .string("1"))]), "one"),
            (.dictionary(key: "s", value: "s", [.init(key: .string("X-A"), value: .string("a\r\nX-B: b"))]), "CRLF in a value"),
            (.dictionary(key: "s", value: "s", [.init(key: .string("Range"), value: .string("bytes=0-"))]), "Range"),
            (.dictionary(key: "s", value: "s", [.init(key: .string(""), value: .string("x"))]), "empty name"),
            (.dictionary(key: "s", value: "s", (0..<100).map { .init(key: .string("X-\($0)"), value: .string("v")) }), "100 of them"),
            (.dictionary(key: "s", value: "s", [.init(key: .string("X-Big"), value: .string(String(repeating: "v", count: 65536)))]), "a 64 KiB value"),
            (.dictionary(key: "s", value: "v", [.init(key: .string("X-A"), value: .variant(.string("x")))]), "a{sv} instead"),
        ]
        for (value, label) in headers {
            values.append(.init(Self.dictionary([("headers", value)]), "a{sv} headers: \(label)", extreme: "headers"))
        }
        let unknown: [(String, BusValue, String)] = [
            ("unknown", .string("x"), "unknown"), ("", .uint32(1), "empty key"), ("PRIORITY", .uint32(10), "PRIORITY"),
            ("priority ", .uint32(10), "\"priority \""), (String(repeating: "k", count: 65536), .bool(true), "64 KiB key"),
            ("\u{FFFE}", .uint32(1), "U+FFFE key"),
        ]
        for (key, value, label) in unknown {
            values.append(.init(Self.dictionary([(key, value)]), "a{sv} \(label) key", extreme: "unknown"))
        }
        for count in [1000, 10000] {
            values.append(.init(Self.manyKeys(count), "a{sv} \(count) unknown keys", extreme: "unknown"))
        }
        return values
    }

    /// Values of many types, for an option or argument of another type.
    static let wrongTypedValues: [FuzzValue] = [
        .init(.byte(10), "y 10"), .init(.bool(true), "b true"), .init(.int16(-1), "n -1"), .init(.uint16(10), "q 10"),
        .init(.int32(-1), "i -1"), .init(.uint32(10), "u 10"), .init(.int64(-1), "x -1"), .init(.uint64(10), "t 10"),
        .init(.double(10), "d 10"), .init(.string("10"), "s \"10\""), .init(.objectPath("/x"), "o /x"), .init(.signature("u"), "g u"),
        .init(.array(element: "s", [.string("x")]), "as [x]"), .init(.structure([.uint32(10), .string("x")]), "(us)"),
        .init(dictionary([("k", .uint32(1))]), "a{sv}"),
    ]

    /// What a well-behaved client puts under a known option key.
    static func ordinaryOption(_ key: String) -> BusValue {
        switch key {
        case "priority": .uint32(10)
        case "expiration": .uint64(4_102_444_800)  // 2100-01-01
        case "discretionary", "allow_metered": .bool(true)
        case "resource_timeout_s": .double(3600)
        case "method": .string("PUT")
        default: .string("fuzz")
        }
    }

    /// An `a{sv}` from (key, value) pairs, in order (duplicates kept).
    static func dictionary(_ entries: [(String, BusValue)]) -> BusValue {
        .dictionary(key: "s", value: "v", entries.map { .init(key: .string($0.0), value: .variant($0.1)) })
    }

    static func manyKeys(_ count: Int) -> BusValue {
        .dictionary(key: "s", value: "v", (0..<count).map { .init(key: .string("k\($0)"), value: .variant(.bool(true))) })
    }

    /// Arrays, dictionaries and structs: empty, one ordinary element, many
    /// elements, and an element at each of its type's extremes.
    private mutating func containerExtremes(_ signature: String, argument: String) -> [FuzzValue] {
        if signature.hasPrefix("a") {
            let element = String(signature.dropFirst())
            if element.hasPrefix("{") {
                let inner = String(element.dropFirst().dropLast())
                let key = String(inner.prefix(1))
                let value = String(inner.dropFirst())
                let entry = BusValue.DictionaryEntry(key: Self.ordinary(key), value: Self.ordinary(value))
                return [
                    .init(.dictionary(key: key, value: value, []), "\(signature) empty"),
                    .init(.dictionary(key: key, value: value, [entry]), "\(signature) one entry"),
                    .init(.dictionary(key: key, value: value, Array(repeating: entry, count: 10000)), "\(signature) 10000 entries"),
                ]
            }
            var values: [FuzzValue] = [
                .init(.array(element: element, []), "\(signature) empty"),
                .init(.array(element: element, [Self.ordinary(element)]), "\(signature) one element"),
                .init(.array(element: element, Array(repeating: Self.ordinary(element), count: 10000)), "\(signature) 10000 elements"),
            ]
            if element.count == 1 {
                for value in extremes(signature: element, argument: argument).prefix(8) where !value.needsComposition {
                    values.append(.init(.array(element: element, [value.value]), "\(signature) [\(value.label)]"))
                }
            }
            return values
        }
        if signature.hasPrefix("("), let fields = BusSignature.completeTypes(String(signature.dropFirst().dropLast())) {
            var values: [FuzzValue] = []
            for (index, field) in fields.enumerated() {
                for value in extremes(signature: field, argument: argument).prefix(6) where !value.needsComposition {
                    var structure = fields.map(Self.ordinary)
                    structure[index] = value.value
                    values.append(.init(.structure(structure), "\(signature) field \(index) \(value.label)"))
                }
            }
            return values
        }
        return [.init(Self.ordinary(signature), "\(signature) ordinary", extreme: nil)]
    }

    /// A plain value of any signature (for fields and generic arguments).
    static func ordinary(_ signature: String) -> BusValue {
        switch signature {
        case "y": return .byte(1)
        case "b": return .bool(true)
        case "n": return .int16(1)
        case "q": return .uint16(1)
        case "i": return .int32(1)
        case "u": return .uint32(1)
        case "x": return .int64(1)
        case "t": return .uint64(1)
        case "d": return .double(1)
        case "s": return .string("x")
        case "o": return .objectPath("/x")
        case "g": return .signature("s")
        case "v": return .variant(.uint32(1))
        default:
            if signature.hasPrefix("a{") {
                let inner = String(signature.dropFirst(2).dropLast())
                return .dictionary(key: String(inner.prefix(1)), value: String(inner.dropFirst()), [])
            }
            if signature.hasPrefix("a") { return .array(element: String(signature.dropFirst()), []) }
            if signature.hasPrefix("("), let fields = BusSignature.completeTypes(String(signature.dropFirst().dropLast())) {
                return .structure(fields.map(ordinary))
            }
            return .string("x")
        }
    }

    // MARK: Random values

    /// A random value of `signature`: an extreme one, or fresh random bits.
    mutating func random(signature: String, argument: String) -> FuzzValue {
        if rng.chance(0.5) {
            let choices = extremes(signature: signature, argument: argument)
            if !choices.isEmpty { return choices[rng.int(0...(choices.count - 1))] }
        }
        switch signature {
        case "d":
            let bits = rng.next()
            return .init(.double(Double(bitPattern: bits)), "d random bits \(String(bits, radix: 16))")
        case "t": let v = rng.next(); return .init(.uint64(v), "t \(v)")
        case "u": let v = UInt32(truncatingIfNeeded: rng.next()); return .init(.uint32(v), "u \(v)")
        case "i": let v = Int32(truncatingIfNeeded: rng.next()); return .init(.int32(v), "i \(v)")
        case "x": let v = Int64(bitPattern: rng.next()); return .init(.int64(v), "x \(v)")
        case "b": return .init(.bool(rng.chance(0.5)), "b random")
        case "s":
            let count = [0, 1, 8, 64, 300, 4000][rng.int(0...5)]
            let noncharacters = rng.chance(0.1)
            return .init(.string(randomUTF8(count: count, noncharacters: noncharacters)),
                         "s random UTF-8 (\(count) scalars\(noncharacters ? ", noncharacters" : ""))")
        case "a{sv}":
            var entries: [(String, BusValue)] = []
            for _ in 0..<rng.int(0...6) {
                let key = rng.chance(0.6) ? Self.pushOptions[rng.int(0...2)].key : randomUTF8(count: rng.int(0...12))
                let value = rng.chance(0.5)
                    ? Self.ordinaryOption(key)
                    : Self.wrongTypedValues[rng.int(0...(Self.wrongTypedValues.count - 1))].value
                entries.append((key, value))
            }
            return .init(Self.dictionary(entries), "a{sv} random \(entries.count) entries")
        default:
            return .init(Self.ordinary(signature), "\(signature) ordinary", extreme: nil)
        }
    }

    /// `count` random Unicode scalars, never NUL; noncharacters only when asked.
    mutating func randomUTF8(count: Int, noncharacters: Bool = false) -> String {
        var scalars = String.UnicodeScalarView()
        while scalars.count < count {
            let value: UInt32 = switch rng.int(0...9) {
            case 0...3: UInt32(rng.int(0x20...0x7E))
            case 4: UInt32(rng.int(0x01...0x1F))
            case 5: UInt32(rng.int(0xA0...0x7FF))
            case 6, 7: UInt32(rng.int(0x800...0xFFFD))
            case 8: UInt32(rng.int(0x10000...0x10FFFF))
            default: noncharacters ? [0xFFFE, 0xFFFF, 0xFDD0, 0x10FFFF, 0x1FFFE][rng.int(0...4)] : 0x41
            }
            guard let scalar = Unicode.Scalar(value), noncharacters || !DBusText.isNoncharacter(value) else { continue }
            scalars.append(scalar)
        }
        return String(scalars)
    }

    private mutating func randomHex(_ count: Int) -> String {
        String((0..<count).map { _ in "0123456789abcdef".randomElement(using: &rng)! })
    }

    /// The text itself when short, else its start and length.
    static func short(_ text: String) -> String {
        text.utf8.count <= 40 ? "\"\(text)\"" : "\"\(text.prefix(20))…\" (\(text.utf8.count) bytes)"
    }
}

extension FuzzValue {
    /// Values too big to nest into another (1 MiB strings inside options
    /// are tried on their own already).
    fileprivate var needsComposition: Bool {
        if case .string(let text) = value { return text.utf8.count > 70000 }
        return false
    }
}
