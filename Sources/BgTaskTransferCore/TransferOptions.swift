/// What a client asked of one transfer (StartDownload's and StartUpload's `options`).
public struct TransferOptions: Codable, Sendable, Equatable {
    /// Only on AC power and an unmetered network, and not in power-saver mode.
    public var discretionary = false
    /// May use a metered network.
    public var allowMetered = true
    /// Seconds from the start after which the transfer gives up (iOS: 7 days).
    public var resourceTimeout: Double = TransferOptions.defaultResourceTimeout
    /// Request headers, as given.
    public var headers: [String: String] = [:]
    /// An upload's method: `PUT` or `POST`.
    public var method = "PUT"

    public static let defaultResourceTimeout: Double = 604_800
    /// The longest `resource_timeout_s` taken: about 31 years, where µs stay exact.
    public static let maximumResourceTimeout: Double = 1e9
    /// Header limits: a client must not make the daemon keep megabytes per transfer.
    public static let maximumHeaders = 64
    public static let maximumHeaderBytes = 8192

    public init() {}

    /// Seconds to µs, saturating; the caller has already refused what is not finite or not positive.
    public static func microseconds(_ seconds: Double) -> UInt64 {
        guard seconds.isFinite, seconds > 0 else { return 0 }
        let value = (seconds * 1e6).rounded(.up)
        return value >= 1.8e19 ? .max : UInt64(value)
    }

    /// Why `headers` cannot be sent, or nil. Names are HTTP tokens, values
    /// hold no control characters but tabs (HTTP's field-value: the HTTP
    /// client refuses others at every attempt), and the headers that frame
    /// the request are the daemon's.
    public static func problem(withHeaders headers: [String: String]) -> String? {
        if headers.count > maximumHeaders { return "more than \(maximumHeaders) headers" }
        var bytes = 0
        for (name, value) in headers {
            bytes += name.utf8.count + value.utf8.count
            if name.isEmpty || !name.utf8.allSatisfy(isTokenByte) { return "header name '\(name.prefix(60))' is not an HTTP token" }
            if let control = value.utf8.first(where: { ($0 < 0x20 && $0 != 0x09) || $0 == 0x7F }) {
                let hex = String(control, radix: 16, uppercase: true)
                let what = control == 10 || control == 13 ? "a line break" : "the control character U+\(String(repeating: "0", count: 4 - hex.count))\(hex)"
                return "header '\(name.prefix(60))' holds \(what)"
            }
            if reservedHeaders.contains(name.lowercased()) { return "header '\(name)' is set by bgtaskd itself" }
        }
        return bytes > maximumHeaderBytes ? "headers longer than \(maximumHeaderBytes) bytes" : nil
    }

    /// Headers that decide how bytes are framed or resumed: ours alone.
    static let reservedHeaders: Set<String> = ["range", "if-range", "content-length", "transfer-encoding", "host", "connection"]

    private static func isTokenByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"): true
        default: "!#$%&'*+-.^_`|~".utf8.contains(byte)
        }
    }
}
