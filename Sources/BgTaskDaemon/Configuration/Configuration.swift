public import BgTaskCore
import BgTaskProtocol
import Foundation

/// The daemon's settings (docs/DESIGN.md §2), with their defaults (the limits
/// iOS sets, where it has one): the engine's own sections, `[Tasks]` and
/// `[Scheduler]`, and the sections the loaded mode plugins declare through
/// the plugin ABI (`[Fetch]`, `[RemoteNotifications]` …), all read by this one
/// parser.
///
/// Values come from systemd-style INI files and `--set Section.Key=VALUE`
/// overrides, later sources winning. Everything is parsed and validated
/// before anything is used, so the daemon never runs on a half-read config.
public struct Configuration: Sendable {
    // Tasks
    public var taskBudgetSec: Double = 600
    public var taskWarningSec: Double = 5
    public var taskKillGraceSec: Double = 2
    public var maxTasksPerConnection: Int = 100
    // Scheduler
    public var maxConcurrentWakes: Int = 2
    public var chunkSec: Double = 10

    /// Every key this configuration accepts: the engine's, then the plugins'.
    public let keys: [Key]
    private let keysByName: [String: Key]
    /// The plugins' keys that were set, as the text given (already checked).
    private var pluginValues: [String: String] = [:]

    /// A configuration of defaults that accepts the engine's keys and `pluginKeys`.
    public init(pluginKeys: [Key] = []) {
        keys = Self.engineKeys + pluginKeys
        keysByName = Dictionary(keys.map { ($0.name, $0) }, uniquingKeysWith: { first, _ in first })
    }

    /// The engine limits these settings describe.
    public var taskPolicy: TaskPolicy {
        TaskPolicy(
            budget: .seconds(double: taskBudgetSec), warning: .seconds(double: taskWarningSec),
            killGrace: .seconds(double: taskKillGraceSec), maxTasksPerConnection: maxTasksPerConnection,
            maxConcurrentWakes: maxConcurrentWakes, chunk: .seconds(double: chunkSec))
    }

    private static func seconds(
        _ name: String, _ path: any WritableKeyPath<Configuration, Double> & Sendable, positive: Bool, minimum: Double = 0,
        _ summary: String
    ) -> Key {
        Key(name: name, kind: .number(minimum: minimum, maximum: BgTaskNames.maximumConfigSeconds, positive: positive, unit: "seconds"),
            summary: summary, field: .double(path))
    }

    /// The shortest chunk: each turn freezes one app and thaws the next, and a
    /// freeze takes up to a millisecond; a chunk of a few milliseconds would
    /// be all freezing, and overlap the apps it is meant to keep apart.
    public static let minimumChunkSec = 0.1

    /// The largest configuration file read: a few keys take a few hundred
    /// bytes, and a larger file (a wrong path, a log) is refused at once
    /// rather than read whole into memory.
    public static let maximumFileSize = 1 << 20

    private static func integer(
        _ name: String, _ path: any WritableKeyPath<Configuration, Int> & Sendable, minimum: Int, maximum: Int,
        _ summary: String
    ) -> Key {
        Key(name: name, kind: .integer(minimum: minimum, maximum: maximum), summary: summary, field: .integer(path))
    }

    /// The engine's keys, in the order the documentation lists them.
    public static let engineKeys: [Key] = [
        seconds("Tasks.BudgetSec", \.taskBudgetSec, positive: true, "background time an app gets after it enters the background"),
        seconds("Tasks.WarningSec", \.taskWarningSec, positive: false, "TaskExpiring is sent this long before the deadline"),
        seconds("Tasks.KillGraceSec", \.taskKillGraceSec, positive: false, "after the deadline: SIGTERM, then SIGKILL after this grace"),
        integer("Tasks.MaxPerConnection", \.maxTasksPerConnection, minimum: 1, maximum: 1_000_000, "open tasks one connection may hold"),
        integer("Scheduler.MaxConcurrentWakes", \.maxConcurrentWakes, minimum: 1, maximum: 10_000,
                "background apps run at once when draining in chunks"),
        seconds("Scheduler.ChunkSec", \.chunkSec, positive: true, minimum: minimumChunkSec,
                "length of one chunk of background time after a wake"),
    ]

    /// The current value of a key, as text.
    public func value(of keyName: String) -> String? {
        switch keysByName[keyName]?.field {
        case .integer(let path): String(self[keyPath: path])
        case .double(let path): ConfigNumber.text(self[keyPath: path])
        case .plugin(_, let defaultValue): pluginValues[keyName] ?? defaultValue
        case nil: nil
        }
    }

    // MARK: Parsing

    /// Where a value came from, for error messages.
    public struct Origin: Sendable, Equatable, CustomStringConvertible {
        public var file: String
        public var line: Int?

        public var description: String { line.map { "\(file):\($0)" } ?? file }
    }

    /// A configuration problem; its description names the file, line and key.
    public struct ParseError: Error, Equatable, CustomStringConvertible {
        public var origin: Origin
        public var key: String?
        public var reason: String

        /// Each part is cut short in its middle past a few hundred bytes: a
        /// megabyte value was echoed whole, a megabyte line in the log.
        public var description: String {
            [origin.description, key, reason].compactMap { $0 }.map(Self.clipped).joined(separator: ": ")
        }

        /// `text`, or its head and tail around a note of how much was left
        /// out. Cut between Unicode scalars, not characters: one character
        /// can hold a megabyte of combining marks.
        static func clipped(_ text: String) -> String {
            let scalars = text.unicodeScalars
            guard text.utf8.count > 320, scalars.count > 240 else { return text }
            let head = String(String.UnicodeScalarView(scalars.prefix(160)))
            let tail = String(String.UnicodeScalarView(scalars.suffix(80)))
            return "\(head)… (\(text.utf8.count - head.utf8.count - tail.utf8.count) bytes left out) …\(tail)"
        }
    }

    /// Applies `Key=Value` lines of one INI file. Unknown sections and keys are
    /// errors: a misspelt key must not silently fall back to its default.
    public mutating func apply(iniText text: String, file: String) throws(ParseError) {
        var section: String?
        var lineNumber = 0
        // isNewline, not "\n": in Swift "\r\n" is one Character, and CRLF files are fine.
        for rawLine in text.split(omittingEmptySubsequences: false, whereSeparator: \.isNewline) {
            lineNumber += 1
            let origin = Origin(file: file, line: lineNumber)
            let line = rawLine.trimmingCharacters(in: .whitespaces)
            if line.isEmpty || line.hasPrefix("#") || line.hasPrefix(";") { continue }
            if line.hasPrefix("[") {
                guard line.hasSuffix("]"), line.count > 2 else {
                    throw ParseError(origin: origin, key: nil, reason: "malformed section header '\(line)'")
                }
                let name = String(line.dropFirst().dropLast())
                guard keys.contains(where: { $0.name.hasPrefix(name + ".") }) else {
                    throw ParseError(origin: origin, key: nil, reason: Self.unknownSection(name))
                }
                section = name
                continue
            }
            guard let equals = line.firstIndex(of: "=") else {
                throw ParseError(origin: origin, key: nil, reason: "expected Key=Value, got '\(line)'")
            }
            let key = line[..<equals].trimmingCharacters(in: .whitespaces)
            let value = line[line.index(after: equals)...].trimmingCharacters(in: .whitespaces)
            guard let section else {
                throw ParseError(origin: origin, key: key, reason: "key outside of any [Section]")
            }
            try assign(key: section + "." + key, text: value, origin: origin)
        }
    }

    /// Applies one `--set Section.Key=VALUE` override.
    public mutating func apply(override: String) throws(ParseError) {
        let origin = Origin(file: "--set '\(override)'", line: nil)
        guard let equals = override.firstIndex(of: "=") else {
            throw ParseError(origin: origin, key: nil, reason: "expected Section.Key=VALUE")
        }
        let key = override[..<equals].trimmingCharacters(in: .whitespaces)
        // "=5", ".Key=5", "Tasks.=5": named as the form they miss, not as an unknown section "[]".
        let parts = key.split(separator: ".", maxSplits: 1, omittingEmptySubsequences: false)
        guard parts.count == 2, !parts[0].isEmpty, !parts[1].isEmpty else {
            throw ParseError(origin: origin, key: nil, reason: "expected Section.Key=VALUE, not '\(key)' before the '='")
        }
        try assign(key: key, text: override[override.index(after: equals)...].trimmingCharacters(in: .whitespaces), origin: origin)
    }

    private mutating func assign(key name: String, text: String, origin: Origin) throws(ParseError) {
        guard let key = keysByName[name] else {
            let section = name.split(separator: ".", maxSplits: 1).first.map(String.init) ?? name
            let known = keys.contains(where: { $0.name.hasPrefix(section + ".") })
            throw ParseError(origin: origin, key: name, reason: known ? "unknown key" : Self.unknownSection(section))
        }
        let value: Key.Value
        do {
            value = try key.kind.parse(text)
        } catch {
            throw ParseError(origin: origin, key: name, reason: error.reason)
        }
        switch (value, key.field) {
        case (.number(let number), .double(let path)): self[keyPath: path] = number
        case (.integer(let integer), .integer(let path)): self[keyPath: path] = integer
        case (_, .plugin): pluginValues[name] = text
        default: preconditionFailure("key \(name) has a kind that does not match its field")
        }
    }

    /// Why a section is not accepted: a mode's whose plugin is not loaded, or no one's.
    private static func unknownSection(_ section: String) -> String {
        if let mode = BgTaskMode(configSection: section) {
            return "[\(section)] belongs to the \(mode.rawValue) mode, whose plugin (\(mode.pluginFile)) is not loaded"
        }
        return "unknown section [\(section)]"
    }

    /// The configuration from the standard files, the `--config` files (in
    /// the order given) and `--set`, in that order.
    public static func load(
        configFiles: [String], overrides: [String], pluginKeys: [Key] = [], environment: [String: String]? = nil
    ) throws(ParseError) -> Configuration {
        let environment = environment ?? ProcessInfo.processInfo.environment
        var configuration = Configuration(pluginKeys: pluginKeys)
        let home = environment["HOME"] ?? NSHomeDirectory()
        // Relative is invalid (the XDG spec): the default stands in for it.
        let configHome = environment["XDG_CONFIG_HOME"].flatMap { $0.hasPrefix("/") ? $0 : nil } ?? home + "/.config"
        var files: [(path: String, required: Bool)] = [
            ("/etc/bgtaskd/bgtaskd.conf", false), (configHome + "/bgtaskd/bgtaskd.conf", false),
        ]
        files += configFiles.map { ($0, true) }
        for (path, required) in files {
            guard FileManager.default.fileExists(atPath: path) else {
                // A link to nothing is a configuration meant and not found, even where none is needed.
                if let problem = DanglingLink.problem(with: path) { throw ParseError(origin: Origin(file: path), key: nil, reason: problem) }
                if required { throw ParseError(origin: Origin(file: path), key: nil, reason: "no such file") }
                continue
            }
            var isDirectory: ObjCBool = false
            if FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory), isDirectory.boolValue {
                throw ParseError(origin: Origin(file: path), key: nil, reason: "is a directory, not a file")
            }
            let data: [UInt8]
            switch RegularFileText.bytes(path, limit: Self.maximumFileSize, beyond: .refuse) {
            case .read(let bytes): data = bytes
            case .notRegular: throw ParseError(origin: Origin(file: path), key: nil, reason: "is not a regular file")
            case .tooLarge(let size):
                throw ParseError(origin: Origin(file: path), key: nil,
                                 reason: "is \(size) bytes, more than a configuration file may be (\(Self.maximumFileSize))")
            case .failed(let code):
                throw ParseError(origin: Origin(file: path), key: nil, reason: "cannot be read: \(String(cString: strerror(code)))")
            }
            // A byte order mark, as some editors write, is not part of the text.
            let body = data.starts(with: [0xEF, 0xBB, 0xBF]) ? data.dropFirst(3) : data[...]
            guard let text = String(validating: body, as: UTF8.self) else {
                throw ParseError(origin: Origin(file: path), key: nil, reason: "is not UTF-8 text")
            }
            try configuration.apply(iniText: text, file: path)
        }
        for override in overrides { try configuration.apply(override: override) }
        return configuration
    }
}

extension Configuration.Origin {
    init(file: String) {
        self.init(file: file, line: nil)
    }
}
