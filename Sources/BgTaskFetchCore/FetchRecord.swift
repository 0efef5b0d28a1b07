public import BgTaskProtocol
/// What the fetch mode remembers of one app, durably: its registration, its
/// last fetches and results, and its offences (wakes it did not complete).
public struct FetchRecord: Sendable, Equatable, Codable {
    /// One fetch wake and how it ended.
    public struct Outcome: Sendable, Equatable, Codable {
        /// When the wake happened (realtime µs).
        public var at: UInt64
        /// The app's answer; nil when it missed its budget (an offence).
        public var result: FetchResult?

        public init(at: UInt64, result: FetchResult?) {
            self.at = at
            self.result = result
        }
    }

    public var interval: FetchInterval
    /// When the app registered its current interval (realtime µs).
    public var registeredAt: UInt64
    /// When it was last woken to fetch (realtime µs).
    public var lastFetchAt: UInt64?
    /// Recent outcomes, oldest first (at most ``historyLimit``).
    public var history: [Outcome] = []
    /// Offences in a row not yet redeemed by completed fetches.
    public var offences: Int = 0

    public static let historyLimit = 64

    public init(interval: FetchInterval, registeredAt: UInt64) {
        self.interval = interval
        self.registeredAt = registeredAt
    }

    /// Records a wake's outcome: a completed fetch redeems one offence, a miss adds one.
    public mutating func record(_ outcome: Outcome) {
        history.append(outcome)
        if history.count > Self.historyLimit { history.removeFirst(history.count - Self.historyLimit) }
        if outcome.result == nil { offences += 1 } else if offences > 0 { offences -= 1 }
    }

    /// The most recent answer, if any.
    public var lastResult: FetchResult? { history.last(where: { $0.result != nil })?.result }
}
