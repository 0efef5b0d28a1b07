import BgTaskProtocol

/// One line of a trace: something that happened at `t` seconds after the
/// trace start (docs/DESIGN.md §8).
public struct TraceEvent: Sendable, Equatable {
    /// What happened.
    public enum Kind: Sendable, Equatable {
        /// The app registered a fetch interval in seconds, as `SetMinimumFetchInterval`
        /// (0 is "minimum", from 1e300 up "never").
        case register(app: String, interval: Double)
        /// The user opened the app: it refreshes itself in the foreground until it is closed.
        case open(app: String)
        /// The user closed the app.
        case close(app: String)
        /// New content appeared on the app's server.
        case content(app: String)
        /// The machine went to sleep: nothing runs in the background until it wakes.
        case sleep
        /// The machine woke up.
        case wake
        /// A push for the app; a silent one wakes it in the background to fetch.
        case push(app: String, silent: Bool)
    }

    /// Seconds from the trace start.
    public var t: Double
    public var kind: Kind

    public init(t: Double, _ kind: Kind) {
        self.t = t
        self.kind = kind
    }

    /// The app the event is about, nil for the machine's sleep and wake.
    public var app: String? {
        switch kind {
        case .register(let app, _), .open(let app), .close(let app), .content(let app), .push(let app, _): app
        case .sleep, .wake: nil
        }
    }

    /// Where events at the same second go, in a generated trace: the
    /// machine wakes before anything runs, content comes before the open that
    /// may see it, and the machine sleeps last.
    public var rank: Int {
        switch kind {
        case .register: 0
        case .wake: 1
        case .close: 2
        case .content: 3
        case .push: 4
        case .open: 5
        case .sleep: 6
        }
    }

    /// The `kind` field's spelling.
    public var kindName: String {
        switch kind {
        case .register: "register"
        case .open: "open"
        case .close: "close"
        case .content: "content"
        case .sleep: "sleep"
        case .wake: "wake"
        case .push: "push"
        }
    }

    /// The event as one JSON Lines line (no newline), fields in the order of docs/DESIGN.md §8.
    public var jsonLine: String {
        var line = "{\"t\":" + Self.number(t) + ",\"kind\":\"" + kindName + "\""
        if let app { line += ",\"app\":" + JSONText.quoted(app) }
        switch kind {
        case .register(_, let interval): line += ",\"interval\":" + Self.number(interval)
        case .push(_, let silent): line += ",\"silent\":" + (silent ? "true" : "false")
        default: break
        }
        return line + "}"
    }

    /// Whole numbers without a fraction, others in Swift's shortest round-trip form
    /// (so writing and reading a trace gives back the same `t`).
    static func number(_ value: Double) -> String {
        if value == value.rounded(), abs(value) < 1e15 { return String(Int64(value)) }
        return "\(value)"
    }
}
