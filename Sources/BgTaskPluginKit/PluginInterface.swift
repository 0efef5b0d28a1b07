/// An interface a plugin exports on the daemon's object.
public struct PluginInterface: Sendable {
    /// One method or signal; arguments as (name, signature) pairs.
    public enum Member: Sendable {
        case method(String, in: [(String, String)] = [], out: [(String, String)] = [])
        case signal(String, [(String, String)] = [])
    }

    public var name: String
    public var members: [Member]

    public init(name: String, members: [Member]) {
        self.name = name
        self.members = members
    }
}
