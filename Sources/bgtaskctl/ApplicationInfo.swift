import BgTaskProtocol
import SDBus

/// One app as `Manager.GetApplications` describes it (an `a{sv}`), with the
/// keys `bgtaskctl apps` shows read into Swift values. Keys it does not know
/// (newer daemons, other plugins) are kept in ``fields`` for `--json`.
struct ApplicationInfo {
    /// Every key the daemon sent, variants unwrapped.
    var fields: [String: BusValue]

    var appID: String { string("app_id") ?? "?" }
    var modes: [String] {
        guard case .array(_, let values)? = fields["modes"] else { return [] }
        return values.compactMap { if case .string(let mode) = $0.unwrapped { mode } else { nil } }
    }
    var refreshStatus: String? { string("refresh_status") }
    var refreshReason: String? { string("refresh_reason") }
    var running: Bool { bool("running") ?? false }
    var launching: Bool { bool("launching") ?? false }
    var state: String? { string("state") }
    var execProblem: String? { string("exec_problem") }
    var launchError: String? { string("launch_error") }
    var fetchPolicy: String? { string("fetch_policy") }
    var fetchInterval: Double? { if case .double(let v)? = fields["fetch_interval"] { v } else { nil } }
    var fetchNextMicroseconds: UInt64? { uint("fetch_next_usec") }
    var fetchHeld: String? { string("fetch_held") }
    /// Why the next fetch is planned when it is ("usually opened at 08:10; new content is likely by then").
    var fetchPlan: String? { string("fetch_plan") }
    var fetchLastResult: String? { string("fetch_last_result") }
    var fetchLastMicroseconds: UInt64? { uint("fetch_last_usec") }
    var fetchOffences: UInt64? { uint("fetch_offences") }

    /// Reads the answer of `GetApplications`, `aa{sv}`.
    static func list(from reply: Message) throws(ClientError) -> [ApplicationInfo] {
        let value: BusValue?
        do { value = try reply.readValue() } catch { throw ClientError(error) }
        guard case .array(_, let entries)? = value else { throw malformed(value) }
        var apps: [ApplicationInfo] = []
        for entry in entries {
            guard case .dictionary(_, _, let pairs) = entry else { throw malformed(value) }
            var fields: [String: BusValue] = [:]
            for pair in pairs {
                guard case .string(let key) = pair.key else { throw malformed(value) }
                fields[key] = pair.value.unwrapped
            }
            apps.append(ApplicationInfo(fields: fields))
        }
        return apps.sorted { $0.appID < $1.appID }
    }

    /// The dictionary as the daemon sent it, for `--json`.
    var json: [String: BusValueJSON] {
        fields.mapValues(BusValueJSON.init)
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
        return ClientError("the daemon answered GetApplications with \(found); this bgtaskctl expects 'aa{sv}'")
    }
}
