public import BgTaskProtocol
/// A fetch scheduling policy: it hears what happens to apps and the machine,
/// and says when the machine should wake for fetching and which apps to fetch
/// then. The daemon's fetch plugin and `bgtaskd-sim` drive the same planners.
///
/// Times are CLOCK_REALTIME µs (in the simulator: trace seconds × 10⁶).
/// Every planner keeps the rules: no app fetched twice within its interval
/// (floored at ``floor``), none while it is open, none while the machine
/// sleeps, none while it is not eligible (Background App Refresh).
public protocol FetchPlanner {
    /// `Fetch.MinimumIntervalSec`, in seconds.
    var floor: Double { get }

    /// An app registered an interval (or changed it); `.never` unregisters.
    mutating func register(_ app: String, interval: FetchInterval, at now: UInt64)
    /// The user opened the app (it refreshes itself in the foreground).
    mutating func opened(_ app: String, at now: UInt64)
    /// The user closed the app.
    mutating func closed(_ app: String, at now: UInt64)
    /// A fetch wake of the app ended: its answer, or nil when it missed its budget.
    mutating func fetched(_ app: String, result: FetchResult?, at now: UInt64)
    /// A silent push woke the app in the background: `result` is whether it
    /// brought news. Planners that do not tell pushes apart take it as a fetch.
    mutating func pushed(_ app: String, result: FetchResult, at now: UInt64)
    /// Whether the app may be fetched in the background at all (refresh available).
    mutating func setEligible(_ app: String, _ eligible: Bool, at now: UInt64)
    /// The machine went to sleep or woke up.
    mutating func setSleeping(_ sleeping: Bool, at now: UInt64)

    /// When the machine should next wake to fetch; nil when nothing is planned.
    mutating func nextWake() -> UInt64?
    /// At a wake: the apps to fetch now, coalesced (the caller then reports
    /// each with ``fetched(_:result:at:)``).
    mutating func appsToFetch(at now: UInt64) -> [String]
    /// When the app's next fetch is planned, and why (for `bgtaskctl apps`).
    func plan(for app: String, at now: UInt64) -> FetchPlan?
}

extension FetchPlanner {
    public mutating func pushed(_ app: String, result: FetchResult, at now: UInt64) {
        fetched(app, result: result, at: now)
    }
}

/// When an app's next fetch is planned and why, as data: `bgtaskctl apps`
/// and the D-Bus API render it, logs and tests read it.
public struct FetchPlan: Sendable, Equatable {
    /// The planned time (realtime µs); nil when none is (never, held).
    public var next: UInt64?
    /// Why, most important first.
    public var reasons: [FetchPlanReason]

    public init(next: UInt64?, reasons: [FetchPlanReason]) {
        self.next = next
        self.reasons = reasons
    }

    /// The reasons in words: "usually opened at 08:10; last 3 fetches noData".
    public var explanation: String {
        reasons.map(\.description).joined(separator: "; ")
    }
}

/// One reason of a ``FetchPlan``.
public enum FetchPlanReason: Sendable, Equatable, CustomStringConvertible {
    /// The app is usually opened around this local time of day (seconds after midnight).
    case usuallyOpenedAt(secondsIntoDay: Int)
    /// Fetched at its interval, whatever the habits (a plain timer).
    case atInterval(seconds: Double)
    /// No usual open is near: fetched at the latest this many seconds after it was last up to date.
    case noUsualOpenSoon(atLatestEvery: Double)
    /// The last `count` fetches found nothing new: fetched less often.
    case noDataStreak(count: Int)
    /// Little is known yet of when the app is opened: planned as if it could be at any hour.
    case learningHabits
    /// Around then one fetch every this many seconds saves the most staleness for what it costs.
    case spacedBy(seconds: Double)
    /// The app has news about this often (seconds), as its fetches found.
    case newsEvery(seconds: Double)
    /// Unanswered wakes: fetched less often.
    case offences(count: Int)
    /// Opened on only this share of days (0–1), too few to earn the
    /// background time of an app in use: fetched less often.
    case rarelyUsed(daysShare: Double)
    /// The interval is a floor: not before this many seconds after the last fetch.
    case intervalFloor(seconds: Double)
    /// Fetched together with other apps due at about the same time.
    case coalesced(withApps: Int)
    /// Not fetched now: it is open in the foreground.
    case inForeground
    /// Not fetched: Background App Refresh is not available for it.
    case notEligible
    /// Never fetched (interval never).
    case never

    public var description: String {
        switch self {
        case .usuallyOpenedAt(let seconds):
            "usually opened at " + Self.clock(seconds)
        case .atInterval(let seconds): "at its interval: every \(Self.duration(seconds))"
        case .noUsualOpenSoon(let seconds): "no usual open soon: at the latest every \(Self.duration(seconds))"
        case .noDataStreak(let count): "last \(count) fetch\(count == 1 ? "" : "es") noData"
        case .learningHabits: "still learning when it is opened"
        case .spacedBy(let seconds): "a fetch every \(Self.duration(seconds)) there"
        case .newsEvery(let seconds): "news about every \(Self.duration(seconds))"
        case .offences(let count): "\(count) unanswered wake\(count == 1 ? "" : "s")"
        case .rarelyUsed(let share): "opened on \(Self.percent(share)) of days: fetched less often"
        case .intervalFloor(let seconds): "not within \(Self.duration(seconds)) of the last fetch"
        // Of the last wake: it stays true until the next, whatever the plan now.
        case .coalesced(let count): "last woken together with \(count) other app\(count == 1 ? "" : "s")"
        case .inForeground: "in the foreground"
        case .notEligible: "Background App Refresh is not available"
        case .never: "fetch interval never"
        }
    }

    public static func clock(_ secondsIntoDay: Int) -> String {
        let minutes = (secondsIntoDay / 60) % (24 * 60)
        let h = minutes / 60, m = minutes % 60
        return (h < 10 ? "0" : "") + "\(h):" + (m < 10 ? "0" : "") + "\(m)"
    }

    /// A share as a whole percentage ("21 %"), rounded down: a share just
    /// under a threshold never reads as the threshold itself.
    static func percent(_ share: Double) -> String {
        guard share.isFinite else { return "\(share)" }
        // (The tiny addend keeps 0.29, stored as 0.28999…, at 29 %.)
        return "\(Int((min(max(share, 0), 1) * 100 + 1e-9).rounded(.down))) %"
    }

    /// A duration as people say it: seconds, minutes, whole hours, days or
    /// years. An interval a client asked for can be just under 1e300 s
    /// (from there on it means never): no Int holds that, and "1e+299 s"
    /// tells no one anything.
    static func duration(_ seconds: Double) -> String {
        guard seconds.isFinite else { return "\(seconds) s" }
        let day = 86_400.0, year = 365.25 * day
        if seconds >= 1e6 * year { return "over a million years" }
        if seconds >= 2 * year { return "\(Int((seconds / year).rounded())) years" }
        if seconds >= 2 * day { return "\(Int((seconds / day).rounded())) days" }
        if seconds >= 3600, seconds.truncatingRemainder(dividingBy: 3600) == 0 { return "\(Int(seconds / 3600)) h" }
        if seconds >= 60 { return "\(Int((seconds / 60).rounded())) min" }
        return "\(Int(seconds)) s"
    }
}
