/// One stretch of time an app was in the foreground, as recorded by
/// ``StateStore/beginUsage(appID:at:)`` and ``StateStore/endUsage(appID:at:)``.
///
/// Times are realtime microseconds since the Unix epoch (`CLOCK_REALTIME`),
/// because usage history must mean the same thing across reboots.
public struct UsageInterval: Sendable, Hashable {
    /// When the app became active.
    public var start: UInt64
    /// When it stopped being active; `nil` while it still is.
    public var end: UInt64?

    public init(start: UInt64, end: UInt64?) {
        self.start = start
        self.end = end
    }

    /// Length in microseconds, counting an open interval up to `now`.
    public func duration(now: UInt64) -> UInt64 {
        let stop = end ?? now
        return stop > start ? stop - start : 0
    }
}
