/// A `Content-Range: bytes START-END/TOTAL` header (TOTAL may be `*`): where
/// a 206 answer's bytes belong. Nil for anything else, or a range that does
/// not fit its total.
public struct ContentRange: Equatable, Sendable {
    public var start: UInt64
    public var end: UInt64
    /// Nil for `*` (the server does not say).
    public var total: UInt64?

    public init?(_ header: String) {
        let text = header.trimmingPrefix("bytes ")
        guard text.count < header.count else { return nil }
        let halves = text.split(separator: "/", maxSplits: 1, omittingEmptySubsequences: false)
        guard halves.count == 2 else { return nil }
        let bounds = halves[0].split(separator: "-", maxSplits: 1, omittingEmptySubsequences: false)
        // An end at the largest number has no byte after it: its length does
        // not fit (a server's nonsense, or an attack on the arithmetic).
        guard bounds.count == 2, let start = UInt64(bounds[0]), let end = UInt64(bounds[1]), start <= end, end < .max else { return nil }
        self.start = start
        self.end = end
        if halves[1] == "*" {
            total = nil
        } else {
            guard let total = UInt64(halves[1]), total > end else { return nil }
            self.total = total
        }
    }

    /// Whether the range ends the file (taken so when the total is `*`: the
    /// server sends to the end it knows of).
    public var reachesEnd: Bool { total.map { end + 1 == $0 } ?? true }

    /// Why these bytes cannot continue a partial file of `have` bytes (0 for
    /// a request that asked for no range), downloaded under a validator that
    /// announced `knownTotal` bytes (0 while unknown); nil if they can.
    public func problem(continuing have: UInt64, knownTotal: UInt64) -> String? {
        guard start == have else {
            let asked = have == 0 ? "the whole file" : "the bytes from \(have) on"
            return "the server answered bytes \(start)-\(end) to a request for \(asked)"
        }
        // Bytes kept are of a file this size: a range of another size is of another file, whatever its validator says.
        if have > 0, knownTotal > 0, end >= knownTotal || (total.map { $0 != knownTotal } ?? false) {
            return "the server answered bytes \(start)-\(end) of \(total.map(String.init) ?? "*"), not of the \(knownTotal) bytes it announced for the same file"
        }
        return nil
    }
}
