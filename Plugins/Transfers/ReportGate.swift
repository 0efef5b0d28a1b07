import Synchronization

/// Lets reports through until the plugin stops: once ``close()`` returned,
/// no report is posted to the loop any more (ABI 1.7's rule for `post`).
final class ReportGate: Sendable {
    private let open = Mutex(true)

    func pass(_ body: () -> Void) {
        open.withLock { isOpen in if isOpen { body() } }
    }

    func close() {
        open.withLock { $0 = false }
    }
}
