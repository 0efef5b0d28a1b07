/// One open task as the `Tasks` property shows it.
public struct TaskInfo: Sendable, Equatable {
    public var id: UInt32
    /// The owner's app id, or its unique bus name when it never checked in.
    public var owner: String
    public var name: String
    /// The owner app's background time left; `Double.greatestFiniteMagnitude` while active.
    public var secondsRemaining: Double

    public init(id: UInt32, owner: String, name: String, secondsRemaining: Double) {
        self.id = id
        self.owner = owner
        self.name = name
        self.secondsRemaining = secondsRemaining
    }
}
