/// A `Content-Range: bytes START-END/TOTAL` header (TOTAL may be `*`).
struct ContentRange: Equatable {
    var start: UInt64
    var end: UInt64
    var total: UInt64?

    init?(_ header: String) {
        let text = header.trimmingPrefix("bytes ")
        guard text.count < header.count else { return nil }
        let halves = text.split(separator: "/", maxSplits: 1)
        guard halves.count == 2 else { return nil }
        let bounds = halves[0].split(separator: "-", maxSplits: 1)
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
