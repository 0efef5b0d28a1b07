public import BgTaskProtocol
/// An application's desktop-file id, such as `org.example.Weather`.
///
/// The desktop entry specification asks ids to follow D-Bus well-known name
/// rules; bgtaskd enforces them, so an id is always safe to use in a unit
/// name, a file name and a log line.
public struct AppID: Hashable, Comparable, Sendable, CustomStringConvertible {
    /// The id as text, without the `.desktop` suffix.
    public let rawValue: String
    /// The text's hash, taken once: an event looks its app up in a dozen
    /// tables, and hashing the text anew each time was a tenth of the
    /// daemon's work for a location event.
    private let textHash: Int

    /// Validates `rawValue`; throws `InvalidArgs` saying what is wrong with it.
    public init(validating rawValue: String) throws(CoreError) {
        if let problem = DesktopFileID.problem(with: rawValue) {
            throw CoreError(.invalidArgs, "'\(rawValue.prefix(300))' is not a valid desktop-file id: \(problem)")
        }
        self.rawValue = rawValue
        textHash = rawValue.hashValue
    }

    public var description: String { rawValue }

    public static func == (lhs: AppID, rhs: AppID) -> Bool { lhs.textHash == rhs.textHash && lhs.rawValue == rhs.rawValue }

    public func hash(into hasher: inout Hasher) { hasher.combine(textHash) }

    public static func < (lhs: AppID, rhs: AppID) -> Bool { lhs.rawValue < rhs.rawValue }
}
