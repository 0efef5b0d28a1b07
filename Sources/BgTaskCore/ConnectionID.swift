/// A client's bus connection, named by its unique bus name (`:1.42`).
/// Unique names are never reused while a bus runs, so the name is an identity.
public struct ConnectionID: Hashable, Comparable, Sendable, CustomStringConvertible {
    public let uniqueName: String

    public init(_ uniqueName: String) {
        self.uniqueName = uniqueName
    }

    public var description: String { uniqueName }

    public static func < (lhs: ConnectionID, rhs: ConnectionID) -> Bool { lhs.uniqueName < rhs.uniqueName }
}
