/// What the engine holds per client connection.
struct ConnectionRecord: Sendable {
    var identity: CallerIdentity
    /// The app whose clock this connection runs on.
    var app: AppKey
    /// Open task ids.
    var tasks: Set<UInt32> = []
}
