/// What `CheckIn` answers, and what follows the answer.
public struct CheckInResult: Sendable, Equatable {
    /// Why the app is running: `user`, or the wake reason it was launched for.
    public var reason: String
    /// Events waiting for the app; they follow the reply as `deliverWake` actions.
    public var pending: UInt32
    public var actions: [CoreAction]
}
