/// Why an app is not launched again for now: its last launch failed. The
/// wait doubles with every failure in a row (1 min … 1 h), so a broken desktop
/// entry is reported, not retried in a tight loop. A changed entry clears it.
public struct LaunchBackoff: Sendable, Equatable {
    public var failures: Int
    public var lastError: String
    public var retryAt: MonotonicInstant

    static let first: Duration = .seconds(60)
    static let longest: Duration = .seconds(3600)

    /// The wait after `failures` failures in a row.
    static func wait(after failures: Int) -> Duration {
        var wait = first
        for _ in 1..<max(failures, 1) where wait < longest { wait = wait * 2 }
        return min(wait, longest)
    }
}
