import BgTaskProtocol

/// A key of a plugin's configuration section, declared by the plugin
/// (``ModePlugin/configKeys``) and read with ``PluginHost/value(of:)``.
///
/// The daemon parses and checks every value before the plugin starts (a bad
/// value stops it with exit status 78, naming file, line and key) and lists
/// the key in `bgtaskd --help`; so the plugin always reads a valid value, and
/// its default is written once, here.
///
/// ```swift
/// static let greeting = ConfigKey.integer("Hello.Repeat", default: 1, minimum: 1, maximum: 10, "times to say hello")
/// ```
public struct ConfigKey: Sendable, Equatable {
    /// What the key accepts.
    public enum Kind: Sendable, Equatable {
        /// A finite number in `minimum...maximum` (`positive` excludes 0), of `unit`.
        case number(minimum: Double, maximum: Double, positive: Bool, unit: String)
        /// A whole number in `minimum...maximum`.
        case integer(minimum: Int, maximum: Int)
    }

    /// `Section.Key`; the section is the plugin's own.
    public let name: String
    public let kind: Kind
    /// The value when nobody sets one.
    public let defaultValue: Double
    /// One line for `bgtaskd --help`.
    public let help: String

    public init(_ name: String, kind: Kind, default defaultValue: Double, _ help: String) {
        self.name = name
        self.kind = kind
        self.defaultValue = defaultValue
        self.help = help
    }

    /// A duration in seconds, 0 or more (`positive`: more than 0).
    public static func seconds(_ name: String, default value: Double, positive: Bool, _ help: String) -> ConfigKey {
        ConfigKey(name, kind: .number(minimum: 0, maximum: BgTaskNames.maximumConfigSeconds, positive: positive, unit: "seconds"), default: value, help)
    }

    /// The budget a mode gives its wakes: 1 ms to a day, what the host's
    /// `wake_app` takes (a value outside would load, then fail every wake).
    public static func wakeBudget(_ name: String, default value: Double, _ help: String) -> ConfigKey {
        ConfigKey(name, kind: .number(minimum: 0.001, maximum: 86_400, positive: true, unit: "seconds"), default: value, help)
    }

    /// A whole number in `minimum...maximum`.
    public static func integer(_ name: String, default value: Int, minimum: Int, maximum: Int, _ help: String) -> ConfigKey {
        ConfigKey(name, kind: .integer(minimum: minimum, maximum: maximum), default: Double(value), help)
    }

    /// The default as the configuration file would spell it.
    var defaultText: String {
        ConfigNumber.text(defaultValue)
    }
}
