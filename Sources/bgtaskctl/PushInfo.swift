import BgTaskProtocol
import SDBus

/// One push as `RemoteNotifications.ListPushes` describes it (an `a{sv}`),
/// with the keys `bgtaskctl pushes` shows read into Swift values. Keys it
/// does not know (newer daemons) are kept in ``fields`` for `--json`.
struct PushInfo {
    /// What the daemon sent.
    var record: BusRecord
    var fields: [String: BusValue] { record.fields }

    var pushID: String { record.string(RemoteNotificationsInterface.PushKey.pushID.rawValue) ?? "?" }
    var appID: String { record.string(RemoteNotificationsInterface.PushKey.appID.rawValue) ?? "?" }
    var payload: String? { record.string(RemoteNotificationsInterface.PushKey.payloadJSON.rawValue) }
    var priority: UInt64? { record.uint(RemoteNotificationsInterface.PushKey.priority.rawValue) }
    var receivedMicroseconds: UInt64? { record.uint(RemoteNotificationsInterface.PushKey.receivedUsec.rawValue) }
    /// `held` (waits for the app's next wake), `due` (to be delivered now) or
    /// `delivering` (handed to the app, not completed yet).
    var state: String { record.string(RemoteNotificationsInterface.PushKey.state.rawValue) ?? "?" }
    var hasAlert: Bool { record.bool(RemoteNotificationsInterface.PushKey.alert.rawValue) ?? false }
    var isSilent: Bool { record.bool(RemoteNotificationsInterface.PushKey.silent.rawValue) ?? false }
    /// Unix seconds; 0 = now or never; nil = no limit.
    var expiration: UInt64? { record.uint(RemoteNotificationsInterface.PushKey.expiration.rawValue) }
    var collapseID: String? { record.string(RemoteNotificationsInterface.PushKey.collapseID.rawValue) }

    /// `alert` (shown to the user), `silent` (content-available, nothing
    /// shown: rate-limited) or `deferred` (asks for no wake: waits for the
    /// app's next one).
    var kind: String {
        if hasAlert { return "alert" }
        return isSilent ? "silent" : "deferred"
    }

    /// Reads the answer of `ListPushes`, `aa{sv}`.
    static func list(from reply: Message) throws(ClientError) -> [PushInfo] {
        try BusRecord.list(from: reply, member: RemoteNotificationsInterface.Method.listPushes.rawValue).map { PushInfo(record: $0) }
    }

    /// The dictionary as the daemon sent it, plus `kind`, for `--json`.
    var json: [String: BusValueJSON] {
        var json = record.json
        json["kind"] = BusValueJSON(.string(kind))
        return json
    }
}
