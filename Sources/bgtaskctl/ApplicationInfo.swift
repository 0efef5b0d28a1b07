import BgTaskProtocol
import SDBus

/// One app as `Manager.GetApplications` describes it (an `a{sv}`), with the
/// keys `bgtaskctl apps` shows read into Swift values. Keys it does not know
/// (newer daemons, other plugins) are kept in ``fields`` for `--json`.
struct ApplicationInfo {
    /// What the daemon sent.
    var record: BusRecord
    var fields: [String: BusValue] { record.fields }

    var appID: String { record.string("app_id") ?? "?" }
    var modes: [String] {
        guard case .array(_, let values)? = fields["modes"] else { return [] }
        return values.compactMap { if case .string(let mode) = $0.unwrapped { mode } else { nil } }
    }
    var refreshStatus: String? { record.string("refresh_status") }
    var refreshReason: String? { record.string("refresh_reason") }
    var running: Bool { record.bool("running") ?? false }
    var launching: Bool { record.bool("launching") ?? false }
    var state: String? { record.string("state") }
    /// iOS's "suspended": held back while asleep or waiting for its turn, or launched and idle.
    var suspended: Bool { record.bool("suspended") ?? false }
    var execProblem: String? { record.string("exec_problem") }
    var launchError: String? { record.string("launch_error") }
    var fetchPolicy: String? { record.string("fetch_policy") }
    var fetchInterval: Double? { record.double("fetch_interval") }
    var fetchNextMicroseconds: UInt64? { record.uint("fetch_next_usec") }
    var fetchHeld: String? { record.string("fetch_held") }
    /// Why the next fetch is planned when it is ("usually opened at 08:10; new content is likely by then").
    var fetchPlan: String? { record.string("fetch_plan") }
    var fetchLastResult: String? { record.string("fetch_last_result") }
    var fetchLastMicroseconds: UInt64? { record.uint("fetch_last_usec") }
    var fetchOffences: UInt64? { record.uint("fetch_offences") }

    /// Reads the answer of `GetApplications`, `aa{sv}`.
    static func list(from reply: Message) throws(ClientError) -> [ApplicationInfo] {
        try BusRecord.list(from: reply, member: "GetApplications").map { ApplicationInfo(record: $0) }.sorted { $0.appID < $1.appID }
    }

    /// The dictionary as the daemon sent it, for `--json`.
    var json: [String: BusValueJSON] { record.json }
}
