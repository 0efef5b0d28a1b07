import BgTaskCore
import Logging

/// When each app was in the foreground (realtime µs), as the fetch planner
/// learns from it: opened when an app becomes active, closed when it leaves
/// the foreground or goes, and read back by plugins (`usage_history`).
final class UsageLog {
    private let store: StateStore
    private let logger: Logger

    init(store: StateStore, logger: Logger) {
        self.store = store
        self.logger = logger
    }

    /// The app came to the foreground (`active`) or left it; a failed write is logged, not fatal.
    func record(_ app: AppID, active: Bool, at now: UInt64) {
        do {
            if active {
                try store.beginUsage(appID: app.rawValue, at: now, mergingWithin: Self.mergeGap)
            } else {
                try store.endUsage(appID: app.rawValue, at: now)
            }
        } catch {
            logger.warning("cannot record the usage of \(app): \(error)")
        }
    }

    /// An app back in the foreground within this long of leaving it (a
    /// dialog, a window switch) continues its last interval: a row per switch
    /// let one app in a loop add hundreds of kilobytes a second, kept 60 days.
    static let mergeGap: UInt64 = 60_000_000

    /// How long an interval is kept after it ended. The history is for
    /// learning habits, which change within weeks; without a limit every
    /// switch to the foreground added a row for good.
    static let retention: UInt64 = 60 * 86_400 * 1_000_000

    /// Deletes the intervals that ended more than ``retention`` before `now`;
    /// a failed write is logged, and tried again at the next pruning.
    func prune(at now: UInt64) {
        guard now > Self.retention else { return }
        do {
            try store.pruneUsage(before: now - Self.retention)
        } catch {
            logger.warning("cannot prune the usage history: \(error)")
        }
    }

    /// Closes every open interval at `now` (start-up and shutdown: nothing is in the foreground then).
    func closeOpen(at now: UInt64) throws(StoreError) {
        try store.closeOpenUsage(at: now)
    }

    /// Foreground intervals of `app` since `since` (end 0 = open); nil, logged, when they cannot be read.
    func intervals(of app: AppID, since: UInt64) -> [(start: UInt64, end: UInt64)]? {
        do {
            return try store.usage(appID: app.rawValue, since: since).map { ($0.start, $0.end ?? 0) }
        } catch {
            logger.error("cannot read the usage history of \(app): \(error)")
            return nil
        }
    }
}
