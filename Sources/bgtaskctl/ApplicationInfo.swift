import BgTaskProtocol
import SDBus

/// One app as `Manager.GetApplications` describes it (an `a{sv}`), with the
/// keys `bgtaskctl apps` shows read into Swift values. Keys it does not know
/// (newer daemons, other plugins) are kept in ``fields`` for `--json`.
struct ApplicationInfo {
    /// What the daemon sent.
    var record: BusRecord
    var fields: [String: BusValue] { record.fields }

    var appID: String { record.string(ManagerInterface.ApplicationKey.appID.rawValue) ?? "?" }
    var modes: [String] {
        guard case .array(_, let values)? = fields[ManagerInterface.ApplicationKey.modes.rawValue] else { return [] }
        return values.compactMap { if case .string(let mode) = $0.unwrapped { mode } else { nil } }
    }
    var refreshStatus: String? { record.string(ManagerInterface.ApplicationKey.refreshStatus.rawValue) }
    var refreshReason: String? { record.string(ManagerInterface.ApplicationKey.refreshReason.rawValue) }
    var running: Bool { record.bool(ManagerInterface.ApplicationKey.running.rawValue) ?? false }
    var launching: Bool { record.bool(ManagerInterface.ApplicationKey.launching.rawValue) ?? false }
    var state: String? { record.string(ManagerInterface.ApplicationKey.state.rawValue) }
    /// iOS's "suspended": held back while asleep or waiting for its turn, or launched and idle.
    var suspended: Bool { record.bool(ManagerInterface.ApplicationKey.suspended.rawValue) ?? false }
    var execProblem: String? { record.string(ManagerInterface.ApplicationKey.execProblem.rawValue) }
    var launchError: String? { record.string(ManagerInterface.ApplicationKey.launchError.rawValue) }
    var fetchPolicy: String? { record.string(FetchInterface.ApplicationKey.policy.rawValue) }
    var fetchInterval: Double? { record.double(FetchInterface.ApplicationKey.interval.rawValue) }
    var fetchNextMicroseconds: UInt64? { record.uint(FetchInterface.ApplicationKey.nextUsec.rawValue) }
    var fetchHeld: String? { record.string(FetchInterface.ApplicationKey.held.rawValue) }
    /// The app's UnifiedPush endpoint, while it has one.
    var pushEndpoint: String? { record.string(RemoteNotificationsInterface.ApplicationKey.pushEndpoint.rawValue) }
    /// Why the next fetch is planned when it is ("usually opened at 08:15; a fetch every 15 min there; news about every 2 h").
    var fetchPlan: String? { record.string("fetch_plan") }
    var fetchLastResult: String? { record.string(FetchInterface.ApplicationKey.lastResult.rawValue) }
    var fetchLastMicroseconds: UInt64? { record.uint(FetchInterface.ApplicationKey.lastUsec.rawValue) }
    var fetchOffences: UInt64? { record.uint(FetchInterface.ApplicationKey.offences.rawValue) }
    var pushesHeld: UInt64? { record.uint(RemoteNotificationsInterface.ApplicationKey.held.rawValue) }
    var pushOffences: UInt64? { record.uint(RemoteNotificationsInterface.ApplicationKey.offences.rawValue) }
    var locationEventsWaiting: UInt64? { record.uint(LocationInterface.ApplicationKey.waiting.rawValue) }
    var locationOffences: UInt64? { record.uint(LocationInterface.ApplicationKey.offences.rawValue) }

    /// Reads the answer of `GetApplications`, `aa{sv}`.
    static func list(from reply: Message) throws(ClientError) -> [ApplicationInfo] {
        try BusRecord.list(from: reply, member: ManagerInterface.Method.getApplications.rawValue).map { ApplicationInfo(record: $0) }.sorted { $0.appID < $1.appID }
    }

    /// The dictionary as the daemon sent it, for `--json`.
    var json: [String: BusValueJSON] { record.json }
}
