/// One background transfer, as stored (JSON in the plugin's `transfers`
/// collection) and as ListTransfers describes it.
public struct TransferRecord: Codable, Sendable, Equatable {
    public enum Kind: String, Codable, Sendable { case download, upload }

    public enum State: String, Codable, Sendable {
        /// Waits for its turn, the network, power, or a retry.
        case waiting
        /// Bytes are moving.
        case running
        /// Done (with `result`); TransferFinished waits for its app's CompleteEvents.
        case finished
    }

    public var id: String
    public var app: String
    public var session: String
    public var kind: Kind
    public var url: String
    /// Where a download lands, or what an upload sends.
    public var path: String
    public var options: TransferOptions
    public var state: State
    /// Realtime µs of StartDownload/StartUpload: `resource_timeout_s` counts from here.
    public var createdAt: UInt64
    /// Bytes moved (for a download: on disk in the partial file).
    public var bytesDone: UInt64 = 0
    /// 0 while unknown.
    public var bytesTotal: UInt64 = 0
    /// The server's ETag (or Last-Modified) of the partial download: If-Range sends it back.
    public var validator: String?
    /// Attempts that failed and were retried.
    public var attempts: Int = 0
    /// Realtime µs before which the next attempt may not start (backoff).
    public var notBefore: UInt64 = 0
    /// Set once finished.
    public var result: String?
    public var error: String?
    /// The last HTTP status the server answered.
    public var status: Int?
    /// Whether a download continued from bytes it had, or had to start again from zero.
    public var resumed = false
    public var restarted = false

    public init(
        id: String, app: String, session: String, kind: Kind, url: String, path: String, options: TransferOptions,
        createdAt: UInt64
    ) {
        self.id = id
        self.app = app
        self.session = session
        self.kind = kind
        self.url = url
        self.path = path
        self.options = options
        self.state = .waiting
        self.createdAt = createdAt
    }

    /// Realtime µs when `resource_timeout_s` runs out (saturating).
    public var expiresAt: UInt64 {
        let (sum, overflow) = createdAt.addingReportingOverflow(TransferOptions.microseconds(options.resourceTimeout))
        return overflow ? .max : sum
    }
}
