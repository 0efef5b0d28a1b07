import BgTaskProtocol
import SDBus

/// One push as `RemoteNotifications.ListPushes` describes it (an `a{sv}`),
/// with the keys `bgtaskctl pushes` shows read into Swift values. Keys it
/// does not know (newer daemons) are kept in ``fields`` for `--json`.
struct PushInfo {
    /// Every key the daemon sent, variants unwrapped.
    var fields: [String: BusValue]

    var pushID: String { string("push_id") ?? "?" }
    var appID: String { string("app_id") ?? "?" }
    var payload: String? { string("payload_json") }
    var priority: UInt64? { uint("priority") }
    var receivedMicroseconds: UInt64? { uint("received_usec") }
    /// `held` (waits for the app's next wake), `due` (to be delivered now) or
    /// `delivering` (handed to the app, not completed yet).
    var state: String { string("state") ?? "?" }
    var hasAlert: Bool { bool("alert") ?? false }
    var isSilent: Bool { bool("silent") ?? false }
    /// Unix seconds; 0 = now or never; nil = no limit.
    var expiration: UInt64? { uint("expiration") }
    var collapseID: String? { string("collapse_id") }

    /// `alert` (shown to the user), `silent` (content-available, nothing
    /// shown: rate-limited) or `deferred` (asks for no wake: waits for the
    /// app's next one).
    var kind: String {
        if hasAlert { return "alert" }
        return isSilent ? "silent" : "deferred"
    }

    /// Reads the answer of `ListPushes`, `aa{sv}`.
    static func list(from reply: Message) throws(ClientError) -> [PushInfo] {
        let value: BusValue?
        do { value = try reply.readValue() } catch { throw ClientError(error) }
        guard case .array(_, let entries)? = value else { throw malformed(value) }
        var pushes: [PushInfo] = []
        for entry in entries {
            guard case .dictionary(_, _, let pairs) = entry else { throw malformed(value) }
            var fields: [String: BusValue] = [:]
            for pair in pairs {
                guard case .string(let key) = pair.key else { throw malformed(value) }
                fields[key] = pair.value.unwrapped
            }
            pushes.append(PushInfo(fields: fields))
        }
        return pushes
    }

    /// The dictionary as the daemon sent it, plus `kind`, for `--json`.
    var json: [String: BusValueJSON] {
        var json = fields.mapValues(BusValueJSON.init)
        json["kind"] = BusValueJSON(.string(kind))
        return json
    }

    private func string(_ key: String) -> String? {
        if case .string(let text)? = fields[key] { text } else { nil }
    }

    private func bool(_ key: String) -> Bool? {
        if case .bool(let flag)? = fields[key] { flag } else { nil }
    }

    /// Any unsigned or non-negative integer.
    private func uint(_ key: String) -> UInt64? {
        switch fields[key] {
        case .uint64(let v)?: v
        case .uint32(let v)?: UInt64(v)
        case .int64(let v)? where v >= 0: UInt64(v)
        case .int32(let v)? where v >= 0: UInt64(v)
        default: nil
        }
    }

    private static func malformed(_ value: BusValue?) -> ClientError {
        let found = value.map { "a value of type '\($0.signature)'" } ?? "nothing"
        return ClientError("the daemon answered ListPushes with \(found); this bgtaskctl expects 'aa{sv}'")
    }
}
