/// Which running transfers may be paused to make room for another app's.
/// One paused so waits for a free slot, and once it has its slot back runs
/// ``respite`` undisturbed: counted from the pause, a transfer that waited
/// longer than that was paused again the moment it restarted (it is the one
/// started last), and one whose server takes no ranges never finished.
/// Times are realtime µs.
public struct RoomRespite: Sendable, Equatable {
    /// How long a transfer that got its slot back is left alone.
    public static let respite: UInt64 = 60_000_000

    /// Paused for another app's, waiting for a slot.
    private var waiting: Set<String> = []
    /// When each transfer paused so got its slot back.
    private var restartedAt: [String: UInt64] = [:]

    public init() {}

    /// `id` was paused to make room.
    public mutating func paused(_ id: String) {
        waiting.insert(id)
        restartedAt[id] = nil
    }

    /// `id` starts an attempt at `now`: if it had been paused to make room, its respite begins.
    public mutating func started(_ id: String, at now: UInt64) {
        if waiting.remove(id) != nil { restartedAt[id] = now }
    }

    /// `id` is over (finished, cancelled, gone).
    public mutating func forget(_ id: String) {
        waiting.remove(id)
        restartedAt[id] = nil
    }

    /// Whether `id`, running, may be paused at `now`.
    public func mayPause(_ id: String, at now: UInt64) -> Bool {
        guard !waiting.contains(id) else { return false }
        guard let since = restartedAt[id] else { return true }
        // A clock set back before the restart counts as within the respite.
        return now >= since && now - since >= Self.respite
    }

    /// When the respite of `id` ends, if it has one (nil: it may be paused
    /// whenever ``mayPause(_:at:)`` says so).
    public func respiteEnds(_ id: String) -> UInt64? {
        restartedAt[id].map { $0 > UInt64.max - Self.respite ? UInt64.max : $0 + Self.respite }
    }

    /// Drops respites that have run out (they change nothing any more).
    public mutating func prune(at now: UInt64) {
        restartedAt = restartedAt.filter { now < $0.value || now - $0.value < Self.respite }
    }

    /// Transfers it keeps anything for (for tests: what it holds stays bounded).
    public var count: Int { waiting.count + restartedAt.count }
}
