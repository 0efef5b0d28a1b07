/// What one open of an app saw: how stale the app was then.
public struct OpenSample: Sendable, Equatable {
    public var app: String
    /// Realtime µs.
    public var at: UInt64
    /// The age of the oldest content the app lacked, seconds (0 if none).
    public var staleness: Double

    public init(app: String, at: UInt64, staleness: Double) {
        self.app = app
        self.at = at
        self.staleness = staleness
    }
}
