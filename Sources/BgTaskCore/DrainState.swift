/// The backlog after a wake from sleep, drained in waves: at most
/// `TaskPolicy.maxConcurrentWakes` background apps run at once, each for at
/// most `TaskPolicy.chunk`, round-robin, until none has work left.
struct DrainState: Sendable, Equatable {
    /// Apps waiting for their turn, in turn order.
    var queue: [AppKey] = []
    /// Apps having their turn, in the order they got it, with when it ends.
    var running: [(key: AppKey, until: MonotonicInstant)] = []

    static func == (a: DrainState, b: DrainState) -> Bool {
        a.queue == b.queue && a.running.map(\.key) == b.running.map(\.key) && a.running.map(\.until) == b.running.map(\.until)
    }

    func isRunning(_ key: AppKey) -> Bool { running.contains { $0.key == key } }

    func isQueued(_ key: AppKey) -> Bool { queue.contains(key) }

    var isEmpty: Bool { queue.isEmpty && running.isEmpty }
}
