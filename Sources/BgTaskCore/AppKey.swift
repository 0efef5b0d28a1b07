/// Whose background clock a connection runs on: a named app, or — for a
/// connection that never said who it is — the connection itself.
public enum AppKey: Hashable, Sendable, CustomStringConvertible {
    case app(AppID)
    case connection(ConnectionID)

    /// The app id, or the unique name for an anonymous connection.
    public var description: String {
        switch self {
        case .app(let id): id.rawValue
        case .connection(let connection): connection.uniqueName
        }
    }
}
