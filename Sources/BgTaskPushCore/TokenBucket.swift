import BgTaskProtocol
/// A token bucket: up to `capacity` events at once, refilled continuously at
/// `capacity` per `period`. Silent pushes spend one token per background wake
/// (`RemoteNotifications.SilentPerHour`).
public struct TokenBucket: Sendable, Equatable, Codable {
    public var capacity: Double
    /// Seconds to refill the whole bucket.
    public var period: Double
    /// Tokens left at ``updatedAt``.
    public private(set) var tokens: Double
    /// Realtime µs of the last update.
    public private(set) var updatedAt: UInt64

    /// A full bucket.
    public init(capacity: Double, period: Double = 3600, now: UInt64) {
        self.capacity = capacity
        self.period = period
        tokens = capacity
        updatedAt = now
    }

    /// Tokens available at `now`.
    public func available(at now: UInt64) -> Double {
        guard capacity > 0, period > 0 else { return 0 }
        let elapsed = now > updatedAt ? Double(now - updatedAt) / 1_000_000 : 0
        return min(capacity, tokens + elapsed * capacity / period)
    }

    /// Gives back a token spent on a wake that did not happen (never above capacity).
    public mutating func giveBack(at now: UInt64) {
        tokens = min(capacity, available(at: now) + 1)
        updatedAt = now
    }

    /// Spends a token if there is one; returns whether it did.
    public mutating func take(at now: UInt64) -> Bool {
        let available = available(at: now)
        tokens = available
        // A later updatedAt is from a clock that ran ahead and was set back
        // (or from a damaged record): refilling starts again from now, not
        // once the clock has caught up with it.
        updatedAt = now
        guard available >= 1 else { return false }
        tokens = available - 1
        return true
    }
}
