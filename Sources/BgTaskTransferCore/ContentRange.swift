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
        guard bounds.count == 2, let start = UInt64(bounds[0]), let end = UInt64(bounds[1]), start <= end else { return nil }
        self.start = start
        self.end = end
        if halves[1] == "*" {
            total = nil
        } else {
            guard let total = UInt64(halves[1]), total > end else { return nil }
            self.total = total
        }
    }
}
