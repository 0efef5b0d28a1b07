import BgTaskProtocol
import ArgumentParser
import Foundation

/// `bgtaskctl apps`: the apps bgtaskd serves, and what it plans for them.
struct AppsCommand: ClientCommand {
    static let configuration = CommandConfiguration(
        commandName: "apps",
        abstract: "List the apps that declare a background mode or are connected, with their refresh and fetch state.",
        discussion: """
            Calls the Manager's GetApplications: every app whose desktop entry declares \
            a background mode (X-BgTaskd-Modes=) and every app connected now (checked in, \
            or named by its Flatpak or systemd unit).

            MODES are the declared modes. REFRESH is the app's Background App Refresh \
            status (available, denied or restricted). STATE is the app's state while it \
            is connected (active, inactive, background), 'suspended' while it is in the \
            background and held still (the machine asleep, waiting for its turn after a \
            wake, or launched by the daemon with nothing left to do; its processes frozen \
            where the daemon can tie them to it), 'launching' while the daemon starts it, else 'not running'. NEXT FETCH is when the next \
            background fetch is planned, in local time and from now; 'due' once that time \
            has passed (the fetch waits for the app's turn or its check-in), 'at the wake' \
            while the machine sleeps; 'never' when the \
            app did not ask for fetch, 'held' while it is out of the schedule. WHY is the \
            planner's reason for that time: the time of day the app is usually opened, \
            how far apart fetches pay there and how often it has news, whether its habits \
            are still being learned, noData answers or unanswered wakes that make it \
            fetched less, other apps it is woken with. LAST \
            FETCH is what the last completed fetch found and when it began. NOTES say \
            why a launch failed (launch_error), why the entry's command cannot run \
            (exec_problem), why fetch is held (fetch_held), fetches, pushes and location \
            events that were not completed in time (offences), pushes held and location \
            events waiting for the app's next wake. PUSH ENDPOINT is the app's UnifiedPush endpoint \
            (push_endpoint): where its server posts messages that reach it as pushes.

            --json prints {"applications": [...]}, one object per app with the keys the \
            daemon sent (app_id, name, modes, refresh_status, refresh_reason, running, \
            launching, state, suspended, exec_problem, launch_error, and the plugins' keys such as \
            fetch_policy, fetch_interval, fetch_next_usec, fetch_plan, fetch_held, fetch_last_result, \
            fetch_last_usec, fetch_offences). Times ending in _usec are CLOCK_REALTIME \
            microseconds. Keys may be added; ignore the ones you do not know.
            """)

    @OptionGroup(title: "Global options")
    var global: GlobalOptions

    /// What `--json` prints.
    struct Report: Encodable {
        var applications: [[String: BusValueJSON]]
    }

    func run(with client: DaemonClient) throws {
        let uniqueName = try client.daemonUniqueName()
        let apps = try ApplicationInfo.list(from: client.call(ManagerInterface.Method.getApplications.rawValue, destination: uniqueName))
        if global.json {
            try JSONOutput.print(Report(applications: apps.map(\.json)))
            return
        }
        if apps.isEmpty {
            print("No app declares a background mode (X-BgTaskd-Modes=) and none is connected.")
            return
        }
        // A fetch that fell due while the machine sleeps waits for the wake:
        // its time alone, in the past, would read as a fetch missed.
        let asleep = (try? client.property(ManagerInterface.Property.sleeping.rawValue, destination: uniqueName)) == .bool(true)
        let now = Date()
        var table = TextTable([
            .init("APP", maxWidth: 48), .init("MODES", maxWidth: 40), .init("REFRESH"), .init("STATE"),
            .init("NEXT FETCH"), .init("WHY", maxWidth: 72), .init("LAST FETCH"), .init("PUSH ENDPOINT", maxWidth: 64),
            .init("NOTES", maxWidth: 100),
        ])
        for app in apps {
            table.append([
                app.appID, app.modes.isEmpty ? "-" : app.modes.joined(separator: ","), app.refreshStatus ?? "?",
                Self.state(of: app), Self.nextFetch(of: app, now: now, asleep: asleep), app.fetchPlan ?? "-", Self.lastFetch(of: app, now: now),
                app.pushEndpoint ?? "-", Self.notes(for: app).joined(separator: "; "),
            ])
        }
        print(table.render(), terminator: "")
    }

    static func state(of app: ApplicationInfo) -> String {
        if app.suspended { return "suspended" }
        if let state = app.state { return state }
        if app.running { return "running" }
        return app.launching ? "launching" : "not running"
    }

    static func nextFetch(of app: ApplicationInfo, now: Date, asleep: Bool) -> String {
        guard app.modes.contains("fetch") else { return "-" }
        if app.fetchHeld != nil { return "held" }
        if let next = app.fetchNextMicroseconds, next > 0 {
            let planned = WallClockTime.text(microseconds: next, now: now)
            guard TimeInterval(next) / 1_000_000 <= now.timeIntervalSince1970 else { return planned }
            return asleep ? "at the wake (due \(planned))" : "due (\(planned))"
        }
        // No plan: the app never asked (policy never) or has no record yet.
        return "never"
    }

    static func lastFetch(of app: ApplicationInfo, now: Date) -> String {
        guard let result = app.fetchLastResult else { return "-" }
        guard let at = app.fetchLastMicroseconds, at > 0 else { return result }
        let date = Date(timeIntervalSince1970: TimeInterval(at) / 1_000_000)
        return "\(result) (\(WallClockTime.relative(date.timeIntervalSince(now))))"
    }

    static func notes(for app: ApplicationInfo) -> [String] {
        var notes: [String] = []
        if let error = app.launchError { notes.append("launch failed: \(error)") }
        if let problem = app.execProblem { notes.append("cannot run Exec: \(problem)") }
        if let held = app.fetchHeld { notes.append("fetch held: \(held)") }
        notes += [
            Self.count(app.fetchOffences, "fetch offence", "fetch offences"),
            Self.count(app.pushesHeld, "push held", "pushes held"),
            Self.count(app.pushOffences, "push offence", "push offences"),
            Self.count(app.locationEventsWaiting, "location event waiting", "location events waiting"),
            Self.count(app.locationOffences, "location offence", "location offences"),
        ].compactMap { $0 }
        return notes
    }

    /// "1 push held", "3 pushes held"; nil for none.
    private static func count(_ number: UInt64?, _ one: String, _ many: String) -> String? {
        guard let number, number > 0 else { return nil }
        return number == 1 ? "1 \(one)" : "\(number) \(many)"
    }
}
