import HeapModule

/// Pending deadlines, at most one per target, ordered by time.
///
/// Rescheduling or cancelling a target does not search the heap: the target's
/// current entry is remembered by generation, older entries become stale and
/// are dropped when they reach the top, and the heap is rebuilt when stale
/// entries outnumber live ones. The shell arms one timer, for ``earliest``, so
/// nothing polls.
public struct DeadlineQueue<Target: Hashable & Sendable, Time: Comparable & Sendable>: Sendable {
    private struct Entry: Comparable, Sendable {
        var at: Time
        var generation: UInt64
        var target: Target

        static func < (lhs: Entry, rhs: Entry) -> Bool {
            (lhs.at, lhs.generation) < (rhs.at, rhs.generation)
        }

        static func == (lhs: Entry, rhs: Entry) -> Bool {
            lhs.at == rhs.at && lhs.generation == rhs.generation
        }
    }

    private var heap = Heap<Entry>()
    private var current: [Target: (at: Time, generation: UInt64)] = [:]
    private var lastGeneration: UInt64 = 0

    public init() {}

    /// Targets with a pending deadline.
    public var count: Int { current.count }

    /// When `target` is due, if it is scheduled.
    public func deadline(of target: Target) -> Time? {
        current[target]?.at
    }

    /// Schedules `target` at `at`, replacing its earlier deadline.
    public mutating func schedule(_ target: Target, at: Time) {
        if current[target]?.at == at { return }
        lastGeneration += 1
        current[target] = (at, lastGeneration)
        heap.insert(Entry(at: at, generation: lastGeneration, target: target))
        compactIfNeeded()
    }

    /// Removes `target`'s deadline, if any.
    public mutating func cancel(_ target: Target) {
        current[target] = nil
    }

    /// The earliest pending deadline.
    public mutating func earliest() -> Time? {
        dropStaleTop()
        return heap.min?.at
    }

    /// Removes and returns the earliest target due at or before `now`.
    public mutating func popDue(at now: Time) -> Target? {
        dropStaleTop()
        guard let top = heap.min, top.at <= now else { return nil }
        heap.removeMin()
        current[top.target] = nil
        return top.target
    }

    private func isLive(_ entry: Entry) -> Bool {
        current[entry.target]?.generation == entry.generation
    }

    private mutating func dropStaleTop() {
        while let top = heap.min, !isLive(top) { heap.removeMin() }
    }

    private mutating func compactIfNeeded() {
        guard heap.count > 64, heap.count > 2 * current.count else { return }
        heap = Heap(heap.unordered.filter(isLive))
    }
}
