/// An app's background clock: a budget that drains only while it runs.
///
/// It runs while the app is in the background and the machine is awake, and is
/// paused otherwise; time already used stays used until ``reset()``.
public struct BackgroundClock: Sendable, Equatable {
    /// The whole budget.
    public let budget: Duration
    /// Time used in earlier running stretches.
    public private(set) var consumed: Duration = .zero
    /// When the current running stretch began, nil while paused.
    public private(set) var runningSince: MonotonicInstant?

    public init(budget: Duration) {
        self.budget = budget
    }

    public var isRunning: Bool { runningSince != nil }

    /// Time left at `now` (zero once spent).
    public func remaining(at now: MonotonicInstant) -> Duration {
        var used = consumed
        if let since = runningSince { used += now.duration(since: since) }
        return used >= budget ? .zero : budget - used
    }

    /// The instant the budget runs out, while running.
    public var deadline: MonotonicInstant? {
        guard let since = runningSince else { return nil }
        return since + (consumed >= budget ? .zero : budget - consumed)
    }

    /// Starts a running stretch (no-op while running).
    public mutating func start(at now: MonotonicInstant) {
        if runningSince == nil { runningSince = now }
    }

    /// Ends the running stretch and keeps the time it used (no-op while paused).
    public mutating func pause(at now: MonotonicInstant) {
        guard let since = runningSince else { return }
        consumed += now.duration(since: since)
        runningSince = nil
    }

    /// Gives the whole budget back; the clock is left paused.
    public mutating func reset() {
        consumed = .zero
        runningSince = nil
    }
}
