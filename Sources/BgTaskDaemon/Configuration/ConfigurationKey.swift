import BgTaskProtocol

extension Configuration {
    /// One configuration key: its name, what it accepts, where its value goes.
    public struct Key: Sendable {
        /// What a key accepts.
        public enum Kind: Sendable, Equatable {
            /// A finite number (seconds, metres) in `minimum...maximum`; `positive` excludes zero
            /// (and, for seconds, anything under the microsecond the daemon counts in).
            case number(minimum: Double, maximum: Double, positive: Bool, unit: String)
            /// A whole number in `minimum...maximum`.
            case integer(minimum: Int, maximum: Int)

            /// Parses and checks `text`; throws why it is not accepted.
            func parse(_ text: String) throws(Refusal) -> Value {
                switch self {
                case .number(let minimum, let maximum, let positive, let unit):
                    // Decimal only: Double(_:) also reads hexadecimal ("0x10" is 16).
                    let decimal = text.allSatisfy { "0123456789.eE+-".contains($0) }
                    guard decimal, let value = Double(text), value.isFinite else {
                        throw Refusal(reason: unit.isEmpty ? "'\(text)' is not a number" : "'\(text)' is not a number of \(unit)")
                    }
                    if positive && value <= 0 { throw Refusal(reason: "must be greater than 0, got \(text)") }
                    if value < minimum { throw Refusal(reason: "must be at least \(ConfigNumber.text(minimum)), got \(text)") }
                    if value > maximum { throw Refusal(reason: "must be at most \(ConfigNumber.text(maximum)), got \(text)") }
                    // Time is kept in microseconds: a positive time shorter than one would be 0.
                    if positive && unit == "seconds" && value < 0.000_001 {
                        throw Refusal(reason: "must be at least 0.000001 (a microsecond, the shortest time kept), got \(text)")
                    }
                    return .number(value)
                case .integer(let minimum, let maximum):
                    guard let value = Int(text) else { throw Refusal(reason: "'\(text)' is not a whole number (or is out of range)") }
                    if value < minimum { throw Refusal(reason: "must be at least \(minimum), got \(text)") }
                    if value > maximum { throw Refusal(reason: "must be at most \(maximum), got \(text)") }
                    return .integer(value)
                }
            }
        }

        /// A parsed value.
        enum Value {
            case number(Double)
            case integer(Int)
        }

        /// Why a value is not accepted.
        struct Refusal: Error {
            var reason: String
        }

        /// Where a value goes: a field of the engine's, or the plugins' table.
        enum Field: Sendable {
            case double(any WritableKeyPath<Configuration, Double> & Sendable)
            case integer(any WritableKeyPath<Configuration, Int> & Sendable)
            /// A key a plugin declared, with its default as text.
            case plugin(String, defaultValue: String)
        }

        public let name: String
        public let kind: Kind
        public let summary: String
        let field: Field

        init(name: String, kind: Kind, summary: String, field: Field) {
            self.name = name
            self.kind = kind
            self.summary = summary
            self.field = field
        }

        /// A key `plugin` declared; throws why it is malformed.
        init(plugin: String, name: String, kind: Kind, defaultValue: String, summary: String) throws(Refusal) {
            let parts = name.split(separator: ".", omittingEmptySubsequences: false)
            guard parts.count == 2, parts.allSatisfy({ !$0.isEmpty && $0.allSatisfy { $0.isLetter || $0.isNumber } }) else {
                throw Refusal(reason: "configuration key '\(name)' is not Section.Key (letters and digits)")
            }
            if case .number(let minimum, let maximum, _, _) = kind, !(minimum.isFinite && maximum.isFinite && minimum <= maximum) {
                throw Refusal(reason: "configuration key \(name) has the limits \(minimum)...\(maximum)")
            }
            if case .integer(let minimum, let maximum) = kind, minimum > maximum {
                throw Refusal(reason: "configuration key \(name) has the limits \(minimum)...\(maximum)")
            }
            do {
                _ = try kind.parse(defaultValue)
            } catch {
                throw Refusal(reason: "the default of configuration key \(name) is refused: \(error.reason)")
            }
            self.init(name: name, kind: kind, summary: summary, field: .plugin(plugin, defaultValue: defaultValue))
        }

        /// The section, `Tasks` of `Tasks.BudgetSec`.
        public var section: Substring { name.prefix(while: { $0 != "." }) }

        /// The plugin that declared the key; nil for the engine's.
        public var plugin: String? {
            if case .plugin(let plugin, _) = field { return plugin }
            return nil
        }
    }
}
