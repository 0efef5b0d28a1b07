import ArgumentParser
import BgTaskProtocol
import Foundation
import SDBus

/// `--expiration`: Unix seconds, or `+SECONDS` from now.
struct ExpirationArgument: ExpressibleByArgument {
    enum Value {
        case absolute(UInt64)
        case fromNow(UInt64)
    }

    var value: Value

    init?(argument: String) {
        // Digits only after the one '+': UInt64 itself takes "+5" (so "++5") and "-0".
        let digits = argument.hasPrefix("+") ? argument.dropFirst() : Substring(argument)
        guard !digits.isEmpty, digits.allSatisfy({ $0.isASCII && $0.isNumber }), let seconds = UInt64(digits) else { return nil }
        value = argument.hasPrefix("+") ? .fromNow(seconds) : .absolute(seconds)
    }

    /// Unix seconds (0 stays 0: deliver now or never).
    func unixSeconds(now: Date = Date()) -> UInt64 {
        switch value {
        case .absolute(let seconds):
            return seconds
        case .fromNow(let seconds):
            // Saturates: `+18446744073709551615` means never, not a crash.
            let (sum, overflow) = UInt64(max(0, now.timeIntervalSince1970.rounded(.down))).addingReportingOverflow(seconds)
            return overflow ? .max : sum
        }
    }
}

/// `bgtaskctl push APP …`: deliver a push, as a push server would.
struct PushCommand: ClientCommand {
    static let configuration = CommandConfiguration(
        commandName: "push",
        abstract: "Deliver a push notification to an app (as Houston's 'apn push' sends one to a device).",
        discussion: """
            Builds an APNs-style payload from the options and calls \
            RemoteNotifications.DeliverPush, then prints the push id. The payload is \
            built as Houston's 'apn push' builds it: -n adds "content-available":1 to \
            "aps", -a the alert, -d the app's own keys:

              bgtaskctl push org.example.News -n -d content-id=42
              {"aps":{"content-available":1},"content-id":42}

              bgtaskctl push org.example.Chat -t Ana -a 'Lunch?' -d thread=7
              {"aps":{"alert":{"title":"Ana","body":"Lunch?"}},"thread":7}

            A -d VALUE is taken as JSON when it is valid JSON (42, true, null, [1,2], \
            {"a":1}, "quoted text"), else as a string. Repeat -d for several keys; as in \
            Houston, one -d may also hold several pairs separated by commas (a=1,b=2), \
            unless its value is JSON as a whole or a piece has no '='. -P gives the whole \
            payload instead.

            What the daemon does with it (docs/DESIGN.md §5): an alert is shown (through \
            org.freedesktop.Notifications when present) and wakes the app; a silent push \
            (-n without -a) wakes it while the app's silent budget \
            (RemoteNotifications.SilentPerHour) lasts and otherwise waits for the app's \
            next wake; a push with neither waits too. An app that is not running is \
            launched in the background (BGTASKD_LAUNCH_REASON=remote-notification) and \
            gets its pushes after its CheckIn. The app's desktop entry must declare \
            X-BgTaskd-Modes=remote-notification;. The push is stored before the daemon \
            answers; 'bgtaskctl pushes' lists the pushes not yet completed. Only trusted \
            callers (unsandboxed processes of the daemon's user) may deliver pushes.

            --json prints {"app_id": APP, "kind": "alert"|"silent"|"deferred", \
            "payload": the JSON sent, "push_id": ID}.
            """)

    @OptionGroup(title: "Global options")
    var global: GlobalOptions

    @Argument(help: ArgumentHelp("The app's desktop-file id, such as org.example.News.", valueName: "APP"))
    var app: String

    @Flag(name: [.customShort("n"), .customLong("content-available")],
          help: "Add \"content-available\":1 to aps: wake the app in the background to fetch content.")
    var contentAvailable = false

    @Option(name: [.customShort("a"), .customShort("m"), .long],
            help: ArgumentHelp("The alert's text (aps.alert, or aps.alert.body with --title); shown to the user. -m as in Houston.", valueName: "TEXT"))
    var alert: String?

    @Option(name: [.customShort("t"), .long], help: ArgumentHelp("The alert's title (aps.alert.title).", valueName: "TEXT"))
    var title: String?

    @Option(name: [.customShort("d"), .long], parsing: .singleValue,
            help: ArgumentHelp("A key of the app's own at the payload's top level; VALUE is JSON if it parses, else a string. Repeatable.", valueName: "KEY=VALUE"))
    var data: [String] = []

    @Option(name: [.customShort("P"), .long],
            help: ArgumentHelp("The whole payload as JSON, instead of -n, -a, -t and -d.", valueName: "JSON"))
    var payload: String?

    // Unconditional: "-5" is a bad value to say so of, not a missing one.
    @Option(parsing: .unconditional,
            help: ArgumentHelp("10: deliver at once; 5: may be deferred. Default: 10 for alerts, else 5.", valueName: "5|10"))
    var priority: UInt32?

    @Option(name: .customLong("collapse-id"),
            help: ArgumentHelp("A newer push with the same id replaces an older one still waiting (at most 64 bytes).", valueName: "ID"))
    var collapseID: String?

    // Unconditional: "-5" is a bad value to say so of, not a missing one.
    @Option(parsing: .unconditional,
            help: ArgumentHelp("Drop the push if it is not delivered by then: Unix seconds, +SECONDS from now, or 0 for now or never.", valueName: "UNIX_SECONDS|+SECONDS"))
    var expiration: ExpirationArgument?

    /// What `--json` prints.
    struct Report: Encodable {
        var appID: String
        var kind: String
        var payload: String
        var pushID: String

        private enum CodingKeys: String, CodingKey {
            case appID = "app_id", kind, payload, pushID = "push_id"
        }
    }

    func validate() throws {
        if let priority, priority != 5, priority != 10 {
            throw ValidationError("--priority must be 5 (may be deferred) or 10 (immediate), not \(priority)")
        }
        if payload != nil, contentAvailable || alert != nil || title != nil || !data.isEmpty {
            throw ValidationError("--payload gives the whole payload; it cannot be combined with -n, -a, -t or -d")
        }
        if payload == nil, !contentAvailable, alert == nil, title == nil, data.isEmpty {
            throw ValidationError("nothing to push: give -n (content-available), -a (an alert), -t, -d KEY=VALUE or -P JSON")
        }
        if let collapseID, collapseID.isEmpty {
            throw ValidationError("--collapse-id needs a non-empty id")
        }
        _ = try built()
    }

    /// The payload to send and its kind.
    private func built() throws -> (json: String, kind: String) {
        if let payload {
            guard !payload.isEmpty else { throw ValidationError("--payload is empty: give a JSON object, such as '{\"aps\":{\"content-available\":1}}'") }
            // The daemon judges it: its parser is the one that counts, and it
            // says what is wrong (a check here called a payload nested too
            // deep "not valid JSON", and printed all of it).
            return (payload, Self.kind(of: payload))
        }
        do {
            let built = PushPayload(
                contentAvailable: contentAvailable, alertBody: alert, alertTitle: title,
                data: try PushPayload.dataItems(from: data))
            return (built.json, built.kind)
        } catch {
            throw ValidationError(error.description)
        }
    }

    func run(with client: DaemonClient) throws {
        let (json, kind) = try built()
        var options: [BusValue.DictionaryEntry] = []
        if let priority { options.append(.init(key: .string(RemoteNotificationsInterface.OptionKey.priority.rawValue), value: .variant(.uint32(priority)))) }
        if let expiration {
            options.append(.init(key: .string(RemoteNotificationsInterface.OptionKey.expiration.rawValue), value: .variant(.uint64(expiration.unixSeconds()))))
        }
        if let collapseID { options.append(.init(key: .string(RemoteNotificationsInterface.OptionKey.collapseID.rawValue), value: .variant(.string(collapseID)))) }

        let reply: Message
        do {
            reply = try client.call(RemoteNotificationsInterface.Method.deliverPush.rawValue, interface: BgTaskNames.remoteNotifications) { (call) throws(BusError) in
                try call.append(app)
                try call.append(json)
                try call.append(value: .dictionary(key: "s", value: "v", options))
            }
        } catch {
            throw Self.explained(error)
        }
        let pushID: String
        do { pushID = try reply.readString() } catch { throw ClientError(error) }

        if global.json {
            try JSONOutput.print(Report(appID: app, kind: kind, payload: json, pushID: pushID))
        } else {
            print(LogText.escaped(pushID))
        }
    }

    /// The kind of a payload given whole (-P), read as the daemon reads it
    /// (the daemon checks it; a payload it refuses never gets this far).
    private static func kind(of json: String) -> String {
        guard let object = try? JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String: Any],
              let aps = object["aps"] as? [String: Any] else { return "deferred" }
        if aps["alert"] != nil { return "alert" }
        return (aps["content-available"] as? NSNumber) == 1 ? "silent" : "deferred"
    }

    /// Adds what to do about the errors a user can fix.
    static func explained(_ error: ClientError) -> ClientError {
        var error = error
        switch error.name {
        case BgTaskError.Code.payloadTooLarge.rawValue:
            error.hint = "send less data: the limit is RemoteNotifications.MaxPayloadBytes (4096 bytes by default, as APNs)"
        case BgTaskError.Code.notPermitted.rawValue:
            error.hint = "only unsandboxed processes of the daemon's user may deliver pushes"
        default:
            error.hint = ClientError.modeHint(for: error.name, mode: .remoteNotification) ?? error.hint
        }
        return error
    }
}
