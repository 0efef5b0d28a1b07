/// The mode, held weakly by closures that cross to the runner's threads and
/// come back: only ever dereferenced on the loop.
struct WeakMode: @unchecked Sendable {
    weak var value: TransfersMode?
    init(_ value: TransfersMode) { self.value = value }
}
