/// What an app asks of one background transfer (StartDownload's and
/// StartUpload's `options`), as iOS's `URLSessionConfiguration` knobs.
///
/// ```swift
/// var options = TransferOptions()
/// options.discretionary = true          // wait for AC power and an unmetered network
/// options.headers = ["Authorization": "Bearer \(token)"]
/// ```
public struct TransferOptions: Sendable, Equatable {
    /// Run only on AC power, an unmetered network, and outside power-saver mode.
    public var discretionary = false
    /// May use a metered network (default true).
    public var allowMetered = true
    /// Give up this many seconds after the start; nil for the daemon's default (7 days).
    public var resourceTimeout: Double?
    /// Request headers (not Range, If-Range, Content-Length, Transfer-Encoding, Host or Connection).
    public var headers: [String: String] = [:]
    /// An upload's method: `PUT` (nil, the default) or `POST`.
    public var method: String?

    public init() {}
}
