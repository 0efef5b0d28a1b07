import BgTaskProtocol
import SDBus

/// The calls of the remote-notification mode (docs/DESIGN.md §5): a trusted sender's
/// `DeliverPush`, and an app's `NotificationReceived` and `CompleteNotification`.
extension ManagerClient {
    /// `RemoteNotifications.DeliverPush(app_id, payload_json, {})`: the push id,
    /// once the daemon has stored the push.
    func deliverPush(_ app: String, _ payload: String) throws(BusError) -> String {
        try bus.call(try deliverPushCall(app, payload)).readString()
    }

    /// `DeliverPush` sent without waiting: `completion` gets the reply from ``process()``.
    func deliverPushAsync(_ app: String, _ payload: String, _ completion: @escaping (Result<Message, BusError>) -> Void) throws(BusError) {
        try bus.callAsync(try deliverPushCall(app, payload), completion)
    }

    /// `RemoteNotifications.CompleteNotification(token, result)`.
    func completeNotification(_ token: String, _ result: String) throws(BusError) {
        _ = try bus.call(try completeNotificationCall(token, result))
    }

    /// `CompleteNotification` sent without waiting: `completion` gets the reply from ``process()``.
    func completeNotificationAsync(
        _ token: String, _ result: String, _ completion: @escaping (Result<Message, BusError>) -> Void
    ) throws(BusError) {
        try bus.callAsync(try completeNotificationCall(token, result), completion)
    }

    /// Calls `handler` for each `NotificationReceived(token, payload_json)` the
    /// daemon sends this connection (a match rule, as an app's SDK adds;
    /// blocking until the bus has it).
    func onNotificationReceived(_ handler: @escaping (Message) -> Void) throws(BusError) -> Slot {
        try bus.addMatch(
            "type='signal',sender='\(BgTaskNames.busName)',path='\(BgTaskNames.objectPath)',"
                + "interface='\(BgTaskNames.remoteNotifications)',member='NotificationReceived'",
            async: false, handler)
    }

    /// `RemoteNotifications.ListPushes(app_id)`: the push id and state of each
    /// push the daemon holds for the app (`""`: every app).
    func listPushes(_ app: String) throws(BusError) -> [(id: String, state: String)] {
        let call = try pushCall(RemoteNotificationsInterface.Method.listPushes.rawValue)
        try call.append(app)
        let reply = try bus.call(call)
        var pushes: [(id: String, state: String)] = []
        try reply.enterContainer("a", "a{sv}")
        while try reply.enterContainer("a", "{sv}") {
            var id = ""
            var state = ""
            while try reply.enterContainer("e", "sv") {
                let key = try reply.readString()
                if key == "push_id" || key == "state", try reply.enterContainer("v", "s") {
                    if key == "push_id" { id = try reply.readString() } else { state = try reply.readString() }
                    try reply.exitContainer()
                } else {
                    try reply.skip("v")
                }
                try reply.exitContainer()
            }
            try reply.exitContainer()
            pushes.append((id, state))
        }
        return pushes
    }

    /// `Manager.SetBackgroundRefreshEnabled(app_id, enabled)` (trusted callers).
    func setBackgroundRefreshEnabled(_ app: String, _ enabled: Bool) throws(BusError) {
        let call = try bus.newMethodCall(
            destination: BgTaskNames.busName, path: BgTaskNames.objectPath,
            interface: BgTaskNames.manager, member: ManagerInterface.Method.setBackgroundRefreshEnabled.rawValue)
        try call.append(app)
        try call.append(enabled)
        _ = try bus.call(call)
    }

    private func deliverPushCall(_ app: String, _ payload: String) throws(BusError) -> Message {
        let call = try pushCall(RemoteNotificationsInterface.Method.deliverPush.rawValue)
        try call.append(app)
        try call.append(payload)
        try call.container("a", "{sv}") { () throws(BusError) in }
        return call
    }

    private func completeNotificationCall(_ token: String, _ result: String) throws(BusError) -> Message {
        let call = try pushCall(RemoteNotificationsInterface.Method.completeNotification.rawValue)
        try call.append(token)
        try call.append(result)
        return call
    }

    private func pushCall(_ member: String) throws(BusError) -> Message {
        try bus.newMethodCall(
            destination: BgTaskNames.busName, path: BgTaskNames.objectPath,
            interface: BgTaskNames.remoteNotifications, member: member)
    }
}
