/// Sequence numbers that plugins give their records, read back at start.
///
/// A record's number is trusted no more than a client's: one near the
/// largest `UInt64` (a damaged or edited database) would make the next
/// number overflow and stop the daemon, at every start. Numbers read back
/// count up to ``limit`` only, more than a million records a second for a
/// hundred thousand years.
public enum StoredSequence {
    public static let limit: UInt64 = 1 << 62

    /// The last number used, given the one so far and one read from a record.
    public static func last(_ current: UInt64, _ stored: UInt64) -> UInt64 {
        max(current, min(stored, limit))
    }
}
