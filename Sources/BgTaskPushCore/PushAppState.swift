/// What is stored per app besides its pushes (collection `apps`, and beside
/// each push record as `appState`).
public struct PushAppState: Codable, Sendable {
    public var bucket: TokenBucket
    public var counts: PushInbox.Counts
    /// Which save of the app's state this is: at start-up the highest wins,
    /// wherever it was written. Nil in records of earlier versions.
    public var version: UInt64?

    public init(bucket: TokenBucket, counts: PushInbox.Counts, version: UInt64?) {
        self.bucket = bucket
        self.counts = counts
        self.version = version
    }
}
