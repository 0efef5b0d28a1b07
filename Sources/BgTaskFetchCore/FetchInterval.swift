public import BgTaskProtocol
/// What an app asked for with `SetMinimumFetchInterval`.
public enum FetchInterval: Sendable, Equatable, Codable {
    /// Never fetched (the default, and `inf` or anything from 1e300 up).
    case never
    /// As often as the system thinks useful (`0`), never more often than the floor.
    case minimum
    /// At most this often, in seconds (floored at `Fetch.MinimumIntervalSec`).
    case custom(Double)

    /// Values from 1e300 up mean never, as `UIApplicationBackgroundFetchIntervalNever` (DBL_MAX).
    public static let neverThreshold = 1e300

    /// Parses `SetMinimumFetchInterval`'s argument; negative and NaN are `InvalidArgs`.
    public init(seconds: Double) throws(BgTaskError) {
        if seconds.isNaN { throw BgTaskError(.invalidArgs, "the fetch interval is NaN") }
        if seconds < 0 { throw BgTaskError(.invalidArgs, "the fetch interval is negative (\(seconds) s)") }
        if seconds >= Self.neverThreshold { self = .never } else if seconds == 0 { self = .minimum } else { self = .custom(seconds) }
    }

    /// The policy GetFetchRegistration answers (its first value).
    public var policy: FetchInterface.Policy {
        switch self {
        case .never: .never
        case .minimum: .minimum
        case .custom: .custom
        }
    }

    /// The interval in force with `floor`: nil for never.
    public func effectiveSeconds(floor: Double) -> Double? {
        switch self {
        case .never: nil
        case .minimum: floor
        case .custom(let seconds): max(seconds, floor)
        }
    }
}
