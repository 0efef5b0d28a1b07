/// The limits the task engine enforces (the `Tasks.*` configuration keys).
public struct TaskPolicy: Sendable, Equatable {
    /// Background time an app gets after it enters the background (`Tasks.BudgetSec`).
    public var budget: Duration
    /// How long before the deadline `TaskExpiring` is sent (`Tasks.WarningSec`).
    public var warning: Duration
    /// Between SIGTERM and SIGKILL (`Tasks.KillGraceSec`).
    public var killGrace: Duration
    /// Open tasks one connection may hold (`Tasks.MaxPerConnection`).
    public var maxTasksPerConnection: Int
    /// Longest task name, in UTF-8 bytes.
    public var maxNameBytes: Int
    /// Background apps running at once while the backlog after a wake from
    /// sleep is drained (`Scheduler.MaxConcurrentWakes`).
    public var maxConcurrentWakes: Int
    /// How long one app runs at a time while the backlog is drained (`Scheduler.ChunkSec`).
    public var chunk: Duration
    /// How long an app the daemon launched runs on once it has nothing left
    /// to do, before it is suspended: time to read the answer to its last
    /// completion. Frozen with the answer unread, the app would find its call
    /// timed out when it is thawed (sd-bus looks at timeouts before it reads).
    public var idleGrace: Duration
    /// How long a process launched by an earlier run of the daemon, taken
    /// over after a crash, has for its SDK to check in again before it is
    /// held as idle (suspended). Its SDK checks in again as soon as it sees
    /// the daemon back; one that does not may have no SDK at all, and would
    /// otherwise run on unsuspended for good.
    public var adoptionGrace: Duration

    public init(
        budget: Duration = .seconds(600), warning: Duration = .seconds(5),
        killGrace: Duration = .seconds(2), maxTasksPerConnection: Int = 100, maxNameBytes: Int = 256,
        maxConcurrentWakes: Int = 2, chunk: Duration = .seconds(10), idleGrace: Duration = .seconds(1),
        adoptionGrace: Duration = .seconds(30)
    ) {
        self.budget = budget
        self.warning = warning
        self.killGrace = killGrace
        self.maxTasksPerConnection = maxTasksPerConnection
        self.maxNameBytes = maxNameBytes
        self.maxConcurrentWakes = max(1, maxConcurrentWakes)
        self.chunk = chunk
        self.idleGrace = idleGrace
        self.adoptionGrace = adoptionGrace
    }
}
