/// `org.bgtaskd.BackgroundTasks1.RemoteNotifications`, the remote-notification
/// mode's interface: the names of its members and of its dictionaries' keys.
public enum RemoteNotificationsInterface {
    public static let name = BgTaskNames.remoteNotifications

    public enum Method: String, Sendable, CaseIterable {
        case deliverPush = "DeliverPush"
        case completeNotification = "CompleteNotification"
        case listPushes = "ListPushes"
        /// `(s app_id) → s`: an app's UnifiedPush endpoint ("" while it has none);
        /// `app_id` "" is the caller's own app. Another app's only for trusted callers.
        case getEndpoint = "GetEndpoint"
    }

    public enum Signal: String, Sendable, CaseIterable {
        case notificationReceived = "NotificationReceived"
        /// To the app: its UnifiedPush endpoint changed ("" when it has none any more).
        case endpointChanged = "EndpointChanged"
    }

    /// The keys of DeliverPush's `options`.
    public enum OptionKey: String, Sendable, CaseIterable {
        case priority
        case expiration
        case collapseID = "collapse_id"
    }

    /// The keys of each ListPushes dictionary.
    public enum PushKey: String, Sendable, CaseIterable {
        case pushID = "push_id"
        case appID = "app_id"
        case payloadJSON = "payload_json"
        case priority
        case receivedUsec = "received_usec"
        case state
        case alert
        case silent
        case expiration
        case collapseID = "collapse_id"
    }

    /// A push's `state` in ListPushes.
    public enum PushState: String, Sendable, CaseIterable {
        /// Waits for a wake.
        case held
        /// To be delivered.
        case due
        /// Sent; awaits CompleteNotification.
        case delivering
    }

    /// The keys the remote-notification mode adds to each GetApplications dictionary.
    public enum ApplicationKey: String, Sendable, CaseIterable {
        case held = "pushes_held"
        case delivering = "pushes_delivering"
        case received = "pushes_received"
        case delivered = "pushes_delivered"
        case dropped = "pushes_dropped"
        case offences = "push_offences"
        case silentBudget = "silent_budget"
        /// The app's UnifiedPush endpoint, while it has one.
        case pushEndpoint = "push_endpoint"
    }
}
