/// The result of opening a task.
public struct TaskBegun: Sendable, Equatable {
    public var id: UInt32
    /// The app's background time left; `Double.greatestFiniteMagnitude` while active.
    public var secondsRemaining: Double
    public var actions: [CoreAction]
}
