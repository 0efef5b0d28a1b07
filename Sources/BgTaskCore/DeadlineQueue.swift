/// Pending deadlines, at most one per target, ordered by time (ties in the
/// order they were scheduled).
///
/// An indexed binary heap: each target's position is known, so rescheduling
/// or cancelling a target moves or removes its entry in O(log n), and the
/// heap never holds stale entries to skip or compact. The shell arms one
/// timer, for ``earliest()``, so nothing polls.
///
/// Inlinable: the engine and the fetch planner (another module) use it on
/// their hot paths, and unspecialised generic code costs the planner ~40 %.
public struct DeadlineQueue<Target: Hashable & Sendable, Time: Comparable & Sendable>: Sendable {
    @usableFromInline
    struct Entry: Sendable {
        @usableFromInline var at: Time
        @usableFromInline var order: UInt64
        @usableFromInline var target: Target

        @inlinable
        init(at: Time, order: UInt64, target: Target) {
            self.at = at
            self.order = order
            self.target = target
        }
    }

    @usableFromInline var heap: [Entry] = []
    @usableFromInline var positions: [Target: Int] = [:]
    @usableFromInline var lastOrder: UInt64 = 0

    @inlinable
    public init() {}

    /// Targets with a pending deadline.
    @inlinable
    public var count: Int { heap.count }

    /// When `target` is due, if it is scheduled.
    @inlinable
    public func deadline(of target: Target) -> Time? {
        positions[target].map { heap[$0].at }
    }

    /// Schedules `target` at `at`, replacing its earlier deadline.
    @inlinable
    public mutating func schedule(_ target: Target, at: Time) {
        if let index = positions[target] {
            if heap[index].at == at { return }
            lastOrder += 1
            heap[index].at = at
            heap[index].order = lastOrder
            restore(index)
        } else {
            lastOrder += 1
            heap.append(Entry(at: at, order: lastOrder, target: target))
            positions[target] = heap.count - 1
            siftUp(heap.count - 1)
        }
    }

    /// Removes `target`'s deadline, if any.
    @inlinable
    public mutating func cancel(_ target: Target) {
        guard let index = positions[target] else { return }
        remove(at: index)
    }

    /// The earliest pending deadline.
    @inlinable
    public func earliest() -> Time? {
        heap.first?.at
    }

    /// Removes and returns the earliest target due at or before `now`.
    @inlinable
    public mutating func popDue(at now: Time) -> Target? {
        guard let first = heap.first, first.at <= now else { return nil }
        remove(at: 0)
        return first.target
    }

    // MARK: Heap

    @inlinable
    func before(_ a: Int, _ b: Int) -> Bool {
        (heap[a].at, heap[a].order) < (heap[b].at, heap[b].order)
    }

    @inlinable
    mutating func swapAt(_ a: Int, _ b: Int) {
        heap.swapAt(a, b)
        positions[heap[a].target] = a
        positions[heap[b].target] = b
    }

    @inlinable
    mutating func remove(at index: Int) {
        positions[heap[index].target] = nil
        let last = heap.count - 1
        if index != last {
            heap[index] = heap[last]
            positions[heap[index].target] = index
        }
        heap.removeLast()
        if index < heap.count { restore(index) }
    }

    /// Moves the entry at `index` up or down to where it belongs.
    @inlinable
    mutating func restore(_ index: Int) {
        if index > 0 && before(index, (index - 1) / 2) { siftUp(index) } else { siftDown(index) }
    }

    @inlinable
    mutating func siftUp(_ start: Int) {
        var index = start
        while index > 0 {
            let parent = (index - 1) / 2
            guard before(index, parent) else { return }
            swapAt(index, parent)
            index = parent
        }
    }

    @inlinable
    mutating func siftDown(_ start: Int) {
        var index = start
        while true {
            let left = 2 * index + 1
            guard left < heap.count else { return }
            var smallest = left
            if left + 1 < heap.count && before(left + 1, left) { smallest = left + 1 }
            guard before(smallest, index) else { return }
            swapAt(index, smallest)
            index = smallest
        }
    }
}
