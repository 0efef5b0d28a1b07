public import Foundation
import BgTaskProtocol

/// A push the daemon delivered to the app (`NotificationReceived`), with its
/// APNs-style payload decoded: what iOS hands to
/// `application(_:didReceiveRemoteNotification:fetchCompletionHandler:)` as
/// `userInfo`.
///
/// A payload looks like `{"aps":{"alert":"Hi","content-available":1},"content-id":42}`:
/// `aps.alert` is shown to the user (the daemon did that already), and
/// `aps.content-available: 1` asked for this background wake; every other
/// top-level key is the app's own data (``data``).
///
/// ```swift
/// manager.setNotificationHandler { notification in
///     guard let id = notification.data["content-id"]?.intValue else { return .noData }
///     return await library.download(id) ? .newData : .failed
/// }
/// ```
public struct RemoteNotification: Sendable, Hashable {
    /// The alert a push shows: `aps.alert`, either a string (the body) or an
    /// object with `title` and `body`.
    ///
    /// ```swift
    /// if let alert = notification.alert { print(alert.title ?? "", alert.body ?? "") }
    /// ```
    public struct Alert: Sendable, Hashable {
        /// `aps.alert.title`; nil when the alert is a plain string or has no title.
        ///
        /// ```swift
        /// let heading = notification.alert?.title ?? "New message"
        /// ```
        public var title: String?

        /// `aps.alert.body`, or `aps.alert` itself when it is a string.
        ///
        /// ```swift
        /// let text = notification.alert?.body ?? ""
        /// ```
        public var body: String?

        /// An alert, for tests and previews.
        ///
        /// ```swift
        /// let alert = RemoteNotification.Alert(title: "Chat", body: "Hello")
        /// ```
        public init(title: String? = nil, body: String? = nil) {
            self.title = title
            self.body = body
        }
    }

    /// The payload exactly as it was pushed (JSON text).
    ///
    /// ```swift
    /// print(notification.json)   // {"aps":{"content-available":1},"content-id":42}
    /// ```
    public let json: String

    /// `aps.alert`, if the push shows one.
    ///
    /// ```swift
    /// if let body = notification.alert?.body { updateBadgeText(body) }
    /// ```
    public let alert: Alert?

    /// Whether `aps.content-available` is 1: the push asked to wake the app
    /// in the background to fetch content.
    ///
    /// ```swift
    /// if notification.contentAvailable { await refresh() }
    /// ```
    public let contentAvailable: Bool

    /// The payload's top-level keys other than `aps`: the app's own data.
    ///
    /// ```swift
    /// // {"aps":{"content-available":1},"content-id":42}
    /// notification.data["content-id"]?.intValue   // 42
    /// ```
    public let data: [String: JSONValue]

    /// The `aps` dictionary as it was pushed (alert, content-available,
    /// badge, sound, category …).
    ///
    /// ```swift
    /// let sound = notification.aps["sound"]?.stringValue
    /// ```
    public let aps: [String: JSONValue]

    /// A silent push: it wakes the app and shows nothing (content-available
    /// and no alert). The daemon rate-limits these
    /// (`RemoteNotifications.SilentPerHour`).
    ///
    /// ```swift
    /// if notification.isSilent { log("background update") }
    /// ```
    public var isSilent: Bool { contentAvailable && alert == nil }

    /// Decodes a payload (for tests and previews; the SDK builds the values
    /// it hands to the notification handler itself).
    ///
    /// ```swift
    /// let push = try RemoteNotification(json: #"{"aps":{"alert":"Hi"},"id":7}"#)
    /// ```
    ///
    /// - Throws: ``BackgroundTasksError`` with `.invalidArgument` when `json`
    ///   is not a JSON object, or its `aps` is not an object.
    public init(json: String) throws {
        let value: JSONValue
        do {
            value = try JSONDecoder().decode(JSONValue.self, from: Data(json.utf8))
        } catch {
            throw BackgroundTasksError.invalidPayload("the payload is not valid JSON")
        }
        guard case .object(var members) = value else {
            throw BackgroundTasksError.invalidPayload("the payload is not a JSON object")
        }
        let apsValue = members.removeValue(forKey: "aps") ?? .object([:])
        guard case .object(let aps) = apsValue else {
            throw BackgroundTasksError.invalidPayload("the payload's \"aps\" is not an object")
        }
        self.init(json: json, aps: aps, data: members)
    }

    /// Decodes a payload the daemon sent. The daemon validated it; should it
    /// still not read, the push is handed over with its ``json`` and nothing
    /// else, rather than dropped (the app must complete it all the same).
    init(delivered json: String) {
        if let notification = try? RemoteNotification(json: json) {
            self = notification
        } else {
            self.init(json: json, aps: [:], data: [:])
        }
    }

    private init(json: String, aps: [String: JSONValue], data: [String: JSONValue]) {
        self.json = json
        self.aps = aps
        self.data = data
        // As the daemon reads it: the number 1, or true.
        contentAvailable = switch aps["content-available"] {
        case .bool(let flag)?: flag
        case .number(let number)?: number == 1
        default: false
        }
        switch aps["alert"] {
        case .string(let body)?:
            alert = Alert(body: body)
        case .object(let fields)?:
            alert = Alert(title: fields["title"]?.stringValue, body: fields["body"]?.stringValue)
        default:
            alert = nil
        }
    }

    /// Decodes the whole payload into a type of the app's, as `Codable`
    /// does: the `aps` key and the app's keys alike.
    ///
    /// ```swift
    /// struct NewEpisode: Decodable {
    ///     var showID: Int
    ///     enum CodingKeys: String, CodingKey { case showID = "show-id" }
    /// }
    /// let episode = try notification.decode(NewEpisode.self)
    /// ```
    ///
    /// - Parameters:
    ///   - type: The type to decode.
    ///   - decoder: The decoder to use (for its key and date strategies).
    /// - Throws: What `decoder` throws (`DecodingError`).
    public func decode<T: Decodable>(_ type: T.Type, using decoder: JSONDecoder = JSONDecoder()) throws -> T {
        try decoder.decode(type, from: Data(json.utf8))
    }
}

extension BackgroundTasksError {
    /// A push payload that cannot be read.
    static func invalidPayload(_ message: String) -> BackgroundTasksError {
        BackgroundTasksError(code: .invalidArgument, name: BgTaskError.Code.invalidArgs.rawValue, message: message)
    }
}
