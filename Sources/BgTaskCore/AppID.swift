public import BgTaskProtocol
/// An application's desktop-file id, such as `org.example.Weather`.
///
/// The desktop entry specification asks ids to follow D-Bus well-known name
/// rules; bgtaskd enforces them, so an id is always safe to use in a unit
/// name, a file name and a log line.
public struct AppID: Hashable, Comparable, Sendable, CustomStringConvertible {
    /// The id as text, without the `.desktop` suffix.
    public let rawValue: String

    /// Validates `rawValue`; throws `InvalidArgs` saying what is wrong with it.
    public init(validating rawValue: String) throws(CoreError) {
        if let problem = DesktopFileID.problem(with: rawValue) {
            throw CoreError(.invalidArgs, "'\(rawValue.prefix(300))' is not a valid desktop-file id: \(problem)")
        }
        self.rawValue = rawValue
    }

    public var description: String { rawValue }

    public static func < (lhs: AppID, rhs: AppID) -> Bool { lhs.rawValue < rhs.rawValue }
}
