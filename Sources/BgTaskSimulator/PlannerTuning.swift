public import BgTaskFetchCore

/// Tunables of ``AdaptivePlanner`` set by name (`worth=8`), for trying
/// other settings in the simulator without a rebuild: tune on some seeds,
/// judge on others.
public struct PlannerTuning: Sendable {
    /// The settings, by name, in the order given.
    public private(set) var values: [(name: String, value: Double)] = []

    /// The names and what they set.
    public static let names: [String: String] = [
        "worth": "fetchWorth, seconds of staleness a fetch must save",
        "ceiling": "ceiling, the longest spacing in seconds",
        "ride": "rideAlong, share of need from which an app rides along (0-1)",
        "grid": "grid, seconds plans are rounded up to",
        "prior-opens": "opens a day assumed before any are seen",
        "prior-days": "days the prior weighs",
        "spread": "share of each open spread over the whole day (0-1)",
        "rare-share": "share of days opened below which an app is rarely used (0-1)",
        "rare-after": "days seen before an app may be judged rarely used",
        "rare-price": "how many times dearer a rarely used app's fetches are (at least 1)",
    ]

    public init() {}

    /// Parses `name=value` settings.
    public init(_ settings: [String]) throws(TraceError) {
        for setting in settings {
            let parts = setting.split(separator: "=", maxSplits: 1).map(String.init)
            guard parts.count == 2, Self.names[parts[0]] != nil, let value = Double(parts[1]), value.isFinite, value >= 0 else {
                throw TraceError(line: 0, "--tune takes NAME=VALUE with NAME one of \(Self.names.keys.sorted().joined(separator: ", ")) and VALUE ≥ 0 (got '\(setting)')")
            }
            values.append((parts[0], value))
        }
    }

    /// Sets the tunables on `planner`.
    public func apply(to planner: inout AdaptivePlanner) {
        for (name, value) in values {
            switch name {
            case "worth": planner.fetchWorth = .milliseconds(Int64(min(value, 1e12) * 1000))
            case "ceiling": planner.ceiling = .milliseconds(Int64(min(value, 1e12) * 1000))
            case "ride": planner.rideAlong = min(value, 1)
            case "grid": planner.grid = .milliseconds(Int64(min(value, 1e12) * 1000))
            case "prior-opens": planner.openModel.priorOpensPerDay = value
            case "prior-days": planner.openModel.priorDays = value
            case "spread": planner.openModel.spread = min(value, 1)
            case "rare-share": planner.openModel.rareShare = min(value, 1)
            case "rare-after": planner.openModel.rareAfterDays = value
            case "rare-price": planner.openModel.rarePrice = max(value, 1)
            default: break
            }
        }
    }
}
