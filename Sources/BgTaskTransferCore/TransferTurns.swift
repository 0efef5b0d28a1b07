/// How long each running transfer has held its slot. With every slot held
/// by a different app, an app with transfers waiting and none running
/// would wait for one of them to end, hours for a large download; instead a
/// transfer that has had its turn may yield its slot (see the transfer
/// mode's `makeRoom`). Times are realtime µs.
public struct TransferTurns: Sendable, Equatable {
    /// How long a transfer holds its slot before it may be asked to yield it.
    public let turn: UInt64
    /// When each running transfer's attempt started.
    private var since: [String: UInt64] = [:]

    public init(turn: UInt64) {
        self.turn = turn
    }

    /// `id` starts an attempt at `now`.
    public mutating func started(_ id: String, at now: UInt64) {
        since[id] = now
    }

    /// `id`'s attempt ended or was stopped.
    public mutating func stopped(_ id: String) {
        since[id] = nil
    }

    /// Whether `id`, running, has held its slot for a turn at `now`. A clock
    /// set back before its start counts as a turn not yet had.
    public func hasHadTurn(_ id: String, at now: UInt64) -> Bool {
        guard let start = since[id] else { return false }
        return now >= start && now - start >= turn
    }

    /// When `id`'s turn ends; nil when it runs none.
    public func turnEnds(_ id: String) -> UInt64? {
        since[id].map { $0 > UInt64.max - turn ? UInt64.max : $0 + turn }
    }

    /// When `id`'s attempt started; nil when it runs none.
    public func startedAt(_ id: String) -> UInt64? { since[id] }

    /// Running transfers it keeps a start for (for tests: it stays bounded).
    public var count: Int { since.count }
}
