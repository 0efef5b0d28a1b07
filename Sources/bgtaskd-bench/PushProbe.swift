import BgTaskProtocol
import Glibc
import SDBus

/// The pushes the benchmarks send: APNs-style JSON with a tag of the
/// benchmark's own (`"bench":"…"`), so that each `NotificationReceived` can
/// be matched with the `DeliverPush` it came from.
enum BenchPush {
    /// `silent`: `{"aps":{"content-available":1}}` (limited by
    /// `RemoteNotifications.SilentPerHour`); `alert`: `{"aps":{"alert":…}}`
    /// (delivered at once, and shown with org.freedesktop.Notifications).
    static let kinds = ["silent", "alert"]

    static func payload(kind: String, tag: String) -> String {
        kind == "alert"
            ? "{\"aps\":{\"alert\":\"bench \(tag)\"},\"bench\":\"\(tag)\"}"
            : "{\"aps\":{\"content-available\":1},\"bench\":\"\(tag)\"}"
    }

    /// The tag of a payload written by ``payload(kind:tag:)``, else nil.
    static func tag(of payload: String) -> Substring? {
        guard let start = payload.range(of: "\"bench\":\"")?.upperBound else { return nil }
        return payload[start...].prefix { $0 != "\"" }
    }
}

/// A push to a running app, end to end: a trusted sender's connection calls
/// `DeliverPush(app, payload, {})`, the app's connection (checked in as
/// `app`) takes `NotificationReceived` with a match rule, as an SDK would,
/// and answers `CompleteNotification(token, result)`.
///
/// Both connections are polled together, the app's first, so that neither
/// waits for the other; times are CLOCK_MONOTONIC in this one process.
final class PushProbe {
    let app: ManagerClient
    let sender: ManagerClient
    let appID: String
    let kind: String
    private var match: Slot?
    private var token: String?
    private var payload = ""
    private var arrivedAt: Int64 = 0
    private var sequence = 0
    /// NotificationReceived signals seen in all.
    private(set) var signals = 0

    /// One timed push, in µs from sending DeliverPush: until
    /// NotificationReceived was dispatched on the app's connection, and
    /// until DeliverPush's reply; and the CompleteNotification round trip.
    /// `app` must be checked in as `appID` already.
    init(app: ManagerClient, sender: ManagerClient, appID: String, kind: String) throws(BusError) {
        self.app = app
        self.sender = sender
        self.appID = appID
        self.kind = kind
        match = try app.onNotificationReceived { [unowned self] message in
            arrivedAt = MonotonicTime.nanoseconds()
            token = try? message.readString()
            payload = (try? message.readString()) ?? ""
            signals += 1
        }
    }

    deinit { match?.cancel() }

    /// One DeliverPush → NotificationReceived, then CompleteNotification(token, result).
    func push(result: String = "noData", timeout: Double = 10) throws -> WakeSample {
        sequence += 1
        let tag = "latency-\(sequence)"
        token = nil
        var replied: Int64?
        var failure: BusError?
        let sent = MonotonicTime.nanoseconds()
        try sender.deliverPushAsync(appID, BenchPush.payload(kind: kind, tag: tag)) { reply in
            replied = MonotonicTime.nanoseconds()
            if case .failure(let error) = reply { failure = error }
        }
        while token == nil || replied == nil {
            try app.process()
            if token == nil || replied == nil { try sender.process() }
            if let failure { throw PushProbeError(bus: failure, message: "DeliverPush(\(appID)) failed: \(failure)") }
            if token != nil && replied != nil { break }
            var descriptors = [app.pollDescriptor, sender.pollDescriptor]
            if poll(&descriptors, 2, Int32(timeout * 1000)) == 0 {
                throw PushProbeError(message: "no \(token == nil ? RemoteNotificationsInterface.Signal.notificationReceived.rawValue : "DeliverPush reply") for \(appID) within \(timeout) s")
            }
        }
        guard BenchPush.tag(of: payload) == tag[...] else {
            throw PushProbeError(message: "NotificationReceived carried \(payload), not the push just sent (\(tag))")
        }
        let completeStart = MonotonicTime.nanoseconds()
        try app.completeNotification(token!, result)
        let completeEnd = MonotonicTime.nanoseconds()
        return WakeSample(
            signal: Double(arrivedAt - sent) / 1000, reply: Double(replied! - sent) / 1000,
            complete: Double(completeEnd - completeStart) / 1000)
    }
}

struct PushProbeError: Error, CustomStringConvertible {
    /// The daemon's answer, when it refused the push.
    var bus: BusError?
    var message: String
    var description: String { message }

    init(bus: BusError? = nil, message: String) {
        self.bus = bus
        self.message = message
    }
}
