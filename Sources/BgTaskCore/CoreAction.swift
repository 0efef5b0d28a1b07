/// Something the shell must do because the core's state changed. The core
/// decides; the shell carries out (sends, signals) and never decides.
public enum CoreAction: Equatable, Sendable {
    /// Send `TaskExpiring(task, secondsLeft)` to the task's owner only.
    case sendTaskExpiring(ConnectionID, task: UInt32, secondsLeft: Double)
    /// Send `TaskExpired(task)` to the task's owner only.
    case sendTaskExpired(ConnectionID, task: UInt32)
    /// Signal an overstaying app's process: SIGTERM, or SIGKILL if it is still alive.
    case signalProcess(ProcessRef, ProcessSignal, app: AppKey)
    /// The set of open tasks changed (the `Tasks` property).
    case tasksChanged
    /// The machine went to sleep or woke up (the `Sleeping` property).
    case sleepingChanged(Bool)
}

/// How the core asks for an overstaying process to end.
public enum ProcessSignal: String, Sendable, Equatable {
    /// SIGTERM: asks the process to end.
    case terminate
    /// SIGKILL, sent only if the process is still alive after the grace period.
    case kill
}
