/// The fuzzer's own machinery failed (the bus or the daemon could not be
/// started, a file could not be written): not a finding about the daemon.
struct HarnessError: Error, CustomStringConvertible {
    var description: String

    init(_ description: String) {
        self.description = description
    }
}
