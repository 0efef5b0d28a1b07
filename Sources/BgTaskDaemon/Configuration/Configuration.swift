public import BgTaskCore
import Foundation

/// Every setting of docs/DESIGN.md §2, with its default (the limits iOS sets, where it has one).
///
/// Values come from systemd-style INI files and `--set Section.Key=VALUE`
/// overrides, later sources winning. Everything is parsed and validated
/// before anything is used, so the daemon never runs on a half-read config.
public struct Configuration: Sendable, Equatable {
    // Tasks
    public var taskBudgetSec: Double = 600
    public var taskWarningSec: Double = 5
    public var taskKillGraceSec: Double = 2
    public var maxTasksPerConnection: Int = 100
    // Fetch
    public var fetchWakeBudgetSec: Double = 30
    public var fetchMinimumIntervalSec: Double = 900
    // RemoteNotifications
    public var pushWakeBudgetSec: Double = 30
    public var silentPushesPerHour: Int = 3
    public var maxPayloadBytes: Int = 4096
    // Location
    public var locationWakeBudgetSec: Double = 10
    public var maxRegionsPerApp: Int = 20
    public var minRadiusM: Double = 100
    public var significantChangeM: Double = 500
    public var significantChangeMinIntervalSec: Double = 300
    // Scheduler
    public var maxConcurrentWakes: Int = 2
    public var chunkSec: Double = 10

    public init() {}

    /// The engine limits these settings describe.
    public var taskPolicy: TaskPolicy {
        TaskPolicy(
            budget: .seconds(double: taskBudgetSec), warning: .seconds(double: taskWarningSec),
            killGrace: .seconds(double: taskKillGraceSec), maxTasksPerConnection: maxTasksPerConnection,
            maxConcurrentWakes: maxConcurrentWakes, chunk: .seconds(double: chunkSec))
    }

    /// One configuration key: where it lives, what it accepts, where it goes.
    public struct Key: Sendable {
        public enum Kind: Sendable {
            /// A finite number (seconds, metres) in `minimum...maximum`; `positive` excludes zero.
            case number(minimum: Double, maximum: Double, positive: Bool, unit: String)
            /// A whole number in `minimum...maximum`.
            case integer(minimum: Int, maximum: Int)
        }

        fileprivate enum Field: Sendable {
            case double(any WritableKeyPath<Configuration, Double> & Sendable)
            case integer(any WritableKeyPath<Configuration, Int> & Sendable)
        }

        public let name: String
        public let kind: Kind
        public let summary: String
        fileprivate let field: Field
    }

    /// Longest duration any key accepts: about 31 years, far beyond any sensible
    /// budget, and small enough for every clock computation to stay exact.
    static let maximumSeconds = 1e9

    private static func seconds(
        _ name: String, _ path: any WritableKeyPath<Configuration, Double> & Sendable, positive: Bool, _ summary: String
    ) -> Key {
        Key(name: name, kind: .number(minimum: 0, maximum: maximumSeconds, positive: positive, unit: "seconds"),
            summary: summary, field: .double(path))
    }

    private static func metres(
        _ name: String, _ path: any WritableKeyPath<Configuration, Double> & Sendable, positive: Bool, _ summary: String
    ) -> Key {
        // Half the Earth's circumference is as far as anything can be.
        Key(name: name, kind: .number(minimum: 0, maximum: 2e7, positive: positive, unit: "metres"),
            summary: summary, field: .double(path))
    }

    private static func integer(
        _ name: String, _ path: any WritableKeyPath<Configuration, Int> & Sendable, minimum: Int, maximum: Int,
        _ summary: String
    ) -> Key {
        Key(name: name, kind: .integer(minimum: minimum, maximum: maximum), summary: summary, field: .integer(path))
    }

    /// All keys, in the order the documentation lists them.
    public static let keys: [Key] = [
        seconds("Tasks.BudgetSec", \.taskBudgetSec, positive: true, "background time an app gets after it enters the background"),
        seconds("Tasks.WarningSec", \.taskWarningSec, positive: false, "TaskExpiring is sent this long before the deadline"),
        seconds("Tasks.KillGraceSec", \.taskKillGraceSec, positive: false, "after the deadline: SIGTERM, then SIGKILL after this grace"),
        integer("Tasks.MaxPerConnection", \.maxTasksPerConnection, minimum: 1, maximum: 1_000_000, "open tasks one connection may hold"),
        seconds("Fetch.WakeBudgetSec", \.fetchWakeBudgetSec, positive: true, "time to call CompleteFetch after a fetch wake"),
        seconds("Fetch.MinimumIntervalSec", \.fetchMinimumIntervalSec, positive: false, "floor for every fetch interval"),
        seconds("RemoteNotifications.WakeBudgetSec", \.pushWakeBudgetSec, positive: true, "time to call CompleteNotification"),
        integer("RemoteNotifications.SilentPerHour", \.silentPushesPerHour, minimum: 0, maximum: 1_000_000,
                "silent pushes woken per app per hour"),
        // A D-Bus message carries at most 128 MiB; a push is far smaller.
        integer("RemoteNotifications.MaxPayloadBytes", \.maxPayloadBytes, minimum: 1, maximum: 16 << 20, "push payload limit in bytes"),
        seconds("Location.WakeBudgetSec", \.locationWakeBudgetSec, positive: true, "time to call CompleteEvent"),
        integer("Location.MaxRegionsPerApp", \.maxRegionsPerApp, minimum: 0, maximum: 100_000, "monitored regions per app"),
        metres("Location.MinRadiusM", \.minRadiusM, positive: false, "smaller region radii are raised to this"),
        metres("Location.SignificantChangeM", \.significantChangeM, positive: true, "distance of a significant location change"),
        seconds("Location.SignificantChangeMinIntervalSec", \.significantChangeMinIntervalSec, positive: false,
                "least time between significant-change events"),
        integer("Scheduler.MaxConcurrentWakes", \.maxConcurrentWakes, minimum: 1, maximum: 10_000,
                "background apps run at once when draining in chunks"),
        seconds("Scheduler.ChunkSec", \.chunkSec, positive: true, "length of one chunk of background time after a wake"),
    ]

    private static let keysByName: [String: Key] = Dictionary(uniqueKeysWithValues: keys.map { ($0.name, $0) })

    /// The current value of a key, as text.
    public func value(of keyName: String) -> String? {
        switch Self.keysByName[keyName]?.field {
        case .integer(let path): String(self[keyPath: path])
        case .double(let path):
            self[keyPath: path].rounded() == self[keyPath: path] ? String(Int(self[keyPath: path])) : String(self[keyPath: path])
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

        public var description: String {
            [origin.description, key, reason].compactMap { $0 }.joined(separator: ": ")
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
                guard Self.keys.contains(where: { $0.name.hasPrefix(name + ".") }) else {
                    throw ParseError(origin: origin, key: nil, reason: "unknown section [\(name)]")
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
        try assign(key: key, text: override[override.index(after: equals)...].trimmingCharacters(in: .whitespaces), origin: origin)
    }

    private mutating func assign(key name: String, text: String, origin: Origin) throws(ParseError) {
        guard let key = Self.keysByName[name] else {
            throw ParseError(origin: origin, key: name, reason: "unknown key")
        }
        let fail = { (reason: String) in ParseError(origin: origin, key: name, reason: reason) }
        switch (key.kind, key.field) {
        case (.number(let minimum, let maximum, let positive, let unit), .double(let path)):
            guard let value = Double(text), value.isFinite else {
                throw fail("'\(text)' is not a number of \(unit)")
            }
            if positive && value <= 0 { throw fail("must be greater than 0, got \(text)") }
            if value < minimum { throw fail("must be at least \(Int(minimum)), got \(text)") }
            if value > maximum { throw fail("must be at most \(Int(maximum)), got \(text)") }
            self[keyPath: path] = value
        case (.integer(let minimum, let maximum), .integer(let path)):
            guard let value = Int(text) else { throw fail("'\(text)' is not a whole number (or is out of range)") }
            if value < minimum { throw fail("must be at least \(minimum), got \(text)") }
            if value > maximum { throw fail("must be at most \(maximum), got \(text)") }
            self[keyPath: path] = value
        default:
            preconditionFailure("key \(name) has a kind that does not match its field")
        }
    }

    /// The configuration from the standard files, `--config` and `--set`, in that order.
    public static func load(
        configFile: String?, overrides: [String], environment: [String: String]? = nil
    ) throws(ParseError) -> Configuration {
        let environment = environment ?? ProcessInfo.processInfo.environment
        var configuration = Configuration()
        let home = environment["HOME"] ?? NSHomeDirectory()
        let configHome = environment["XDG_CONFIG_HOME"].flatMap { $0.isEmpty ? nil : $0 } ?? home + "/.config"
        var files: [(path: String, required: Bool)] = [
            ("/etc/bgtaskd/bgtaskd.conf", false), (configHome + "/bgtaskd/bgtaskd.conf", false),
        ]
        if let configFile { files.append((configFile, true)) }
        for (path, required) in files {
            guard FileManager.default.fileExists(atPath: path) else {
                if required { throw ParseError(origin: Origin(file: path), key: nil, reason: "no such file") }
                continue
            }
            guard let data = FileManager.default.contents(atPath: path) else {
                throw ParseError(origin: Origin(file: path), key: nil, reason: "cannot be read")
            }
            guard let text = String(data: data, encoding: .utf8) else {
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
