import BgTaskProtocol
import Foundation

/// How often an app gets new content, estimated from what its fetches found:
/// a fetch after a gap `g` finds something with probability 1 − e^(−r·g) for
/// a Poisson arrival rate `r`. Observations weigh less as they age (a
/// half-life of three days), so an app that went quiet is fetched less, and
/// one that has news again is fetched more. The prior weighs little: an app
/// whose fetches keep finding nothing (its news comes by push) is soon
/// taken as having next to none, instead of one item every few hours.
public struct ContentRate: Sendable, Equatable, Codable {
    /// Decayed count of fetches that found new data.
    var found: Double = 0
    /// Decayed sum of the gaps those fetches covered (hours), found or not.
    var hours: Double = 0
    /// Realtime µs of the last observation.
    var updatedAt: UInt64?

    /// Before any observation: one item every 4 hours, weighing as half a fetch.
    static let priorFound = 0.5
    static let priorHours = 2.0
    static let halfLifeHours = 72.0

    public init() {}

    /// Items per hour.
    public var rate: Double { (found + Self.priorFound) / (hours + Self.priorHours) }

    /// The chance something new appeared within `seconds`.
    public func probability(within seconds: Double) -> Double {
        1 - exp(-rate * max(seconds, 0) / 3600)
    }

    /// Records a fetch that covered `gap` seconds and found new data or not.
    public mutating func record(gap seconds: Double, newData: Bool, at now: UInt64) {
        if let updatedAt, now > updatedAt {
            let factor = pow(0.5, Double(now - updatedAt) / 3_600_000_000 / Self.halfLifeHours)
            found *= factor
            hours *= factor
        }
        updatedAt = now
        // A long gap says little more than a day's: it would drown the recent past.
        hours += min(max(seconds, 0), 86_400) / 3600
        if newData { found += 1 }
    }
}
