import ArgumentParser
import BgTaskProtocol
import Foundation
import SDBus

/// `bgtaskctl pushes [APP]`: the pushes the daemon holds.
struct PushesCommand: ClientCommand {
    static let configuration = CommandConfiguration(
        commandName: "pushes",
        abstract: "List the pushes bgtaskd holds (delivered with DeliverPush, not yet completed by their app).",
        discussion: """
            Calls RemoteNotifications.ListPushes: every push of APP, or of all apps, that \
            its app has not completed yet, oldest first per app. A push is removed once \
            its app calls CompleteNotification, or when it expires.

            STATE is 'held' (waiting for the app's next wake: over the silent budget, \
            Background App Refresh off, or a push that asks for no wake), 'due' (to be \
            delivered now) or 'delivering' (its wake is under way, after the machine \
            wakes if it sleeps, or it was sent and is not completed yet; if the \
            app does not complete it in time it is held again, or dropped if its expiration \
            is 0). KIND is 'alert' (shown \
            to the user), 'silent' (content-available only; rate-limited by \
            RemoteNotifications.SilentPerHour) or 'deferred' (neither). AGE is the time \
            since the daemon accepted it. EXPIRES is when it is dropped if still \
            undelivered ('-' never, 'now or never' for expiration 0). COLLAPSE is its \
            collapse id: a newer push with the same id replaces it while it waits.

            --json prints {"pushes": [...]}, one object per push with the keys the \
            daemon sent (push_id, app_id, payload_json, priority, received_usec, state, \
            alert, silent, expiration, collapse_id) and kind. received_usec is \
            CLOCK_REALTIME microseconds; expiration is Unix seconds. Keys may be added; \
            ignore the ones you do not know. Only trusted callers may list pushes.
            """)

    @OptionGroup(title: "Global options")
    var global: GlobalOptions

    @Argument(help: ArgumentHelp("Only this app's pushes (its desktop-file id); omit it for all apps.", valueName: "APP"))
    var app: String?

    /// What `--json` prints.
    struct Report: Encodable {
        var pushes: [[String: BusValueJSON]]
    }

    func validate() throws { try EmptyArgument.refuse(app, as: "APP", leaveOut: "list the pushes of all apps") }

    func run(with client: DaemonClient) throws {
        let uniqueName = try client.daemonUniqueName()
        let reply: Message
        do {
            reply = try client.call(RemoteNotificationsInterface.Method.listPushes.rawValue, interface: BgTaskNames.remoteNotifications, destination: uniqueName) {
                (call) throws(BusError) in try call.append(app ?? "")
            }
        } catch {
            throw PushCommand.explained(error)
        }
        let pushes = try PushInfo.list(from: reply)
        if global.json {
            try JSONOutput.print(Report(pushes: pushes.map(\.json)))
            return
        }
        if pushes.isEmpty {
            print(app.map { "No pushes are waiting for \($0)." } ?? "No pushes are waiting.")
            return
        }
        let now = Date()
        var table = TextTable([
            .init("ID", maxWidth: 40), .init("APP", maxWidth: 48), .init("STATE"), .init("KIND"),
            .init("PRIORITY", alignment: .right), .init("AGE", alignment: .right), .init("EXPIRES"),
            .init("COLLAPSE", maxWidth: 64),
        ])
        for push in pushes {
            table.append([
                push.pushID, push.appID, push.state, push.kind, push.priority.map { "\($0)" } ?? "?",
                Self.age(of: push, now: now), Self.expires(push, now: now), push.collapseID ?? "-",
            ])
        }
        print(table.render(), terminator: "")
    }

    /// How long ago the daemon accepted the push: `12s`, `3m`, `2h 5m`.
    static func age(of push: PushInfo, now: Date) -> String {
        guard let received = push.receivedMicroseconds, received > 0 else { return "?" }
        let seconds = now.timeIntervalSince1970 - TimeInterval(received) / 1_000_000
        return WallClockTime.span(max(0, seconds))
    }

    static func expires(_ push: PushInfo, now: Date) -> String {
        guard let expiration = push.expiration else { return "-" }
        if expiration == 0 { return "now or never" }
        let (microseconds, overflow) = expiration.multipliedReportingOverflow(by: 1_000_000)
        return overflow ? "never (\(expiration))" : WallClockTime.text(microseconds: microseconds, now: now)
    }
}
