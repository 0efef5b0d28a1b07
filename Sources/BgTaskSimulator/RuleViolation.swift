/// A fetch a planner asked for that breaks a rule of docs/DESIGN.md §8: the
/// simulator refuses it (it is not performed, counted or reported to the
/// planner) and records it here.
public struct RuleViolation: Sendable, Equatable, CustomStringConvertible {
    public enum Rule: Sendable, Equatable {
        /// Nothing runs in the background while the machine sleeps.
        case machineSleeping
        /// The app is open in the foreground.
        case appOpen
        /// The app has not registered a fetch interval, or its interval is never.
        case notRegistered
        /// The app was fetched less than its floored interval ago.
        case withinInterval(lastFetch: UInt64, intervalSeconds: Double)
    }

    public var app: String
    /// Realtime µs.
    public var at: UInt64
    public var rule: Rule

    public init(app: String, at: UInt64, rule: Rule) {
        self.app = app
        self.at = at
        self.rule = rule
    }

    public var description: String {
        let when = "t=\(TraceEvent.number(Trace.seconds(at)))"
        switch rule {
        case .machineSleeping: return "\(when): \(app) fetched while the machine sleeps"
        case .appOpen: return "\(when): \(app) fetched while it is open"
        case .notRegistered: return "\(when): \(app) fetched without a fetch interval"
        case .withinInterval(let last, let interval):
            let ago = Double(at - last) / 1_000_000
            return "\(when): \(app) fetched \(TraceEvent.number(ago)) s after its last fetch (interval \(TraceEvent.number(interval)) s)"
        }
    }
}
