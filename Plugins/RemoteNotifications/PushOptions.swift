import BgTaskPluginKit

/// DeliverPush's options, checked against a table in the portal style: known
/// keys must have their type, unknown keys are dropped.
struct PushOptions {
    /// 10 immediate, 5 may be deferred.
    var priority: UInt32?
    /// Unix seconds; 0 = deliver now or never.
    var expiration: UInt64?
    /// A newer held push with the same id replaces the older.
    var collapseID: String?

    /// Longest collapse id, as APNs.
    static let maximumCollapseBytes = 64

    init(_ options: [String: (signature: String, value: PluginValue)]) throws(ModeError) {
        func expect(_ key: String, _ signature: String) throws(ModeError) -> PluginValue? {
            guard let option = options[key] else { return nil }
            guard option.signature == signature else {
                throw ModeError.invalidArgs("option '\(key)' must be of type '\(signature)', not '\(option.signature)'")
            }
            return option.value
        }
        if case .uint(let value)? = try expect(RemoteNotificationsInterface.OptionKey.priority.rawValue, "u") {
            guard value == 5 || value == 10 else { throw ModeError.invalidArgs("option 'priority' must be 5 or 10, not \(value)") }
            priority = UInt32(value)
        }
        if case .uint(let value)? = try expect(RemoteNotificationsInterface.OptionKey.expiration.rawValue, "t") {
            expiration = value
        }
        if case .string(let value)? = try expect(RemoteNotificationsInterface.OptionKey.collapseID.rawValue, "s") {
            guard !value.isEmpty, value.utf8.count <= Self.maximumCollapseBytes else {
                throw ModeError.invalidArgs("option 'collapse_id' must be 1 to \(Self.maximumCollapseBytes) bytes long")
            }
            collapseID = value
        }
    }
}
