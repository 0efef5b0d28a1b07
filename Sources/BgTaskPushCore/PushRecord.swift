public import BgTaskProtocol
/// A push the daemon holds for an app until the app has handled it.
public struct PushRecord: Sendable, Equatable, Codable {
    /// Where the push is.
    public enum State: String, Sendable, Codable {
        /// Waiting for the app's next wake (over budget, refresh off, or deferred).
        case held
        /// To be delivered now: its wake was spent or it needs none (an alert).
        case due

        /// The state ListPushes shows.
        public var wireState: RemoteNotificationsInterface.PushState {
            switch self {
            case .held: .held
            case .due: .due
            }
        }
    }

    public var id: String
    public var app: String
    public var payload: String
    /// 10 immediate, 5 may be deferred.
    public var priority: UInt32
    /// Unix seconds after which it is dropped; 0 = now or never; nil = no limit.
    public var expiration: UInt64?
    public var collapseID: String?
    /// Realtime µs it was accepted.
    public var receivedAt: UInt64
    /// Order of acceptance (ids are unique, this orders them).
    public var sequence: UInt64
    public var hasAlert: Bool
    public var isSilent: Bool
    public var state: State

    public init(
        id: String, app: String, payload: String, priority: UInt32, expiration: UInt64?, collapseID: String?,
        receivedAt: UInt64, sequence: UInt64, hasAlert: Bool, isSilent: Bool, state: State
    ) {
        self.id = id
        self.app = app
        self.payload = payload
        self.priority = priority
        self.expiration = expiration
        self.collapseID = collapseID
        self.receivedAt = receivedAt
        self.sequence = sequence
        self.hasAlert = hasAlert
        self.isSilent = isSilent
        self.state = state
    }

    /// Whether it is past its expiration at `now` (realtime µs).
    public func isExpired(at now: UInt64) -> Bool {
        guard let expiration, expiration > 0 else { return false }
        return now / 1_000_000 >= expiration
    }
}
