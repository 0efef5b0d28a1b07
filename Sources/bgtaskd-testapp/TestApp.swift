import ArgumentParser
import BackgroundTasks
import Glibc

/// What the app does when the daemon warns that its tasks' time runs out.
enum ExpireAction: String, CaseIterable, ExpressibleByArgument {
    /// End the task, as a well-behaved app does.
    case end
    /// Do nothing: the app overstays and is terminated.
    case ignore
    /// Exit 0 at once.
    case exit
}

/// What the app answers a background fetch with (`--fetch-result`).
enum FetchAnswer: String, CaseIterable, ExpressibleByArgument {
    case newData, noData, failed
    /// Never call the completion: the wake runs out and the app is terminated.
    case never

    /// The result to complete with; nil for ``never``.
    var result: FetchResult? { FetchResult(rawValue: rawValue) }
}

/// What the app answers a push with (`--push-result`).
enum PushAnswer: String, CaseIterable, ExpressibleByArgument {
    case newData, noData, failed
    /// Never call the completion: the wake runs out, the app is terminated,
    /// and the daemon holds the push for a later wake.
    case never

    /// The result to complete with; nil for ``never``.
    var result: FetchResult? { FetchResult(rawValue: rawValue) }
}

/// What the app does with a location event (`--location-handler`).
enum LocationAnswer: String, CaseIterable, ExpressibleByArgument {
    /// Complete it at once.
    case complete
    /// Never call the completion: the wake runs out, the app is terminated,
    /// and the daemon keeps the event for a later wake.
    case never
}

/// `--monitor-region ID,LAT,LON,RADIUS`.
struct RegionArgument: ExpressibleByArgument {
    var region: CircularRegion

    init?(argument: String) {
        // The id may hold commas: the last three fields are the numbers.
        var fields = argument.split(separator: ",", omittingEmptySubsequences: false).map(String.init)
        guard fields.count >= 4, let radius = Double(fields.removeLast()), let longitude = Double(fields.removeLast()),
              let latitude = Double(fields.removeLast()) else { return nil }
        region = CircularRegion(id: fields.joined(separator: ","), latitude: latitude, longitude: longitude, radius: radius)
    }
}

/// `bgtaskd-testapp`: an app built on the BackgroundTasks SDK that the
/// integration tests start, drive with flags, read through JSON lines and kill.
@main
struct TestApp: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "bgtaskd-testapp",
        abstract: "A scriptable bgtaskd client: begins background tasks through the BackgroundTasks SDK and reports what happens.",
        discussion: """
            Connects (checking in as --app-id, else as BGTASKD_APP_ID when set, as the SDK \
            does), installs a fetch handler if --fetch-result is given and a notification \
            handler if --push-result is given, a location handler if \
            --location-handler is given, sets the fetch interval if --fetch-interval is \
            given, monitors the --monitor-region regions and follows significant location \
            changes if asked, begins --tasks tasks named --name, \
            switches to the background if asked, ends the tasks after --end-after seconds (or \
            once --work seconds of work are done) if given, then stays alive for --hold seconds. \
            Everything goes through the SDK.

            Lifetime: with --end-after or --work the app exits 0 after the tasks ended and --hold \
            (default 0) passed. Without it the tasks stay open until they expire (or are \
            ended by --on-expire end); the app then stays --hold seconds if given, and \
            otherwise runs until it is killed.

            stdout carries one JSON object per line, written at once, such as \
            {"event":"begun","task_id":1,"seconds_remaining":1.7976931348623157e+308}. \
            Events and their fields:
              ready      unique_name, pid (when checked in also reason, pending)
              fetch_registered  policy, seconds, next_usec (after --fetch-interval)
              perform_fetch     token (a PerformFetch handed to the fetch handler)
              fetch_completed   result (the daemon accepted CompleteFetch)
              notification      token, json (a NotificationReceived handed to the notification handler)
              notification_completed  result (the daemon accepted CompleteNotification)
              monitored         region_id, latitude, longitude, radius (a region ListMonitoredRegions answered)
              significant_changes  state ("started", after --significant-changes)
              location_event    token, kind, and region_id, crossing (kind "region") or latitude, longitude, accuracy (kind "significant_change") (an event handed to the location handler)
              location_completed  the same fields (the daemon accepted CompleteEvent)
              rechecked_in      reason, pending (the daemon restarted; the SDK checked in again)
              reconnected       (the daemon restarted; the app had not checked in, so nothing was)
              recheck_failed    name, message (the daemon restarted; checking in again failed)
              begun      task_id, seconds_remaining (the app's background time)
              state      state ("background", or "active" with --foreground)
              expiring   task_id, seconds_left (the daemon's TaskExpiring)
              expired    task_id (the daemon's TaskExpired)
              ended      task_id (EndBackgroundTask succeeded)
              worked     step, t (one --work step of 10 ms ran; t: CLOCK_MONOTONIC in µs)
              sigterm    (SIGTERM caught; exit 143 follows)
              error      name, message (the D-Bus error; exit 1 follows)

            Exit status: 0 when done or with --on-expire exit; 1 after an error \
            event; 143 after catching SIGTERM. With --ignore-sigterm only SIGKILL \
            stops it (137 in a shell).
            """)

    @Option(help: ArgumentHelp("Bus the daemon runs on: session, system or a D-Bus address such as unix:path=/tmp/bus.", valueName: "session|ADDRESS"))
    var bus: String = "session"

    @Option(name: .customLong("app-id"), help: ArgumentHelp("Check in as this app (desktop-file id) right after connecting; prints CheckIn's answer in \"ready\". Default: BGTASKD_APP_ID if set (as the daemon sets it when it launches an app), else no check-in.", valueName: "ID"))
    var appID: String?

    @Option(name: .customLong("fetch-result"), help: ArgumentHelp("Install a fetch handler that completes every PerformFetch at once with this result; 'never' never completes (the wake runs out and the daemon terminates the app). Without it no handler is installed and PerformFetch signals wait in the SDK.", valueName: "newData|noData|failed|never"))
    var fetchResult: FetchAnswer?

    @Option(name: .customLong("fetch-handler-delay"), help: ArgumentHelp("Install the --fetch-result handler only this many seconds after \"ready\" (PerformFetch signals that arrive meanwhile wait in the SDK).", valueName: "SECONDS"))
    var fetchHandlerDelay: Double?

    @Option(name: .customLong("push-result"), help: ArgumentHelp("Install a notification handler that completes every pushed notification at once with this result; 'never' never completes (the wake runs out and the daemon terminates the app). Without it no handler is installed and NotificationReceived signals wait in the SDK.", valueName: "newData|noData|failed|never"))
    var pushResult: PushAnswer?

    @Flag(name: .customLong("push-endpoint"), help: "After \"ready\", print the app's UnifiedPush endpoint (push_endpoint), and again whenever it changes (push_endpoint_changed).")
    var pushEndpoint = false

    @Option(name: .customLong("location-handler"), help: ArgumentHelp("Install a location handler that completes every location event (RegionEvent, SignificantLocationChange) at once; 'never' never completes (the wake runs out, and the daemon terminates the app if it is in the background). Without it no handler is installed and location events wait in the SDK.", valueName: "complete|never"))
    var locationHandler: LocationAnswer?

    @Option(name: .customLong("monitor-region"), help: ArgumentHelp("Monitor this region (StartMonitoringRegion) after \"ready\", then print every region ListMonitoredRegions answers. Repeatable.", valueName: "ID,LAT,LON,RADIUS"))
    var monitorRegions: [RegionArgument] = []

    @Flag(name: .customLong("notify-on-start"), help: "Monitor the --monitor-region regions with notify_on_start: the side the device is on is delivered too once it holds.")
    var notifyOnStart = false

    @Flag(name: .customLong("significant-changes"), help: "Follow significant location changes (StartSignificantLocationChanges) after \"ready\".")
    var significantChanges = false

    @Flag(name: .customLong("transfer-handler"), help: "Install a transfer handler that prints every finished transfer (transfer_finished) and completes it at once; a launched app then gets the results that waited for it.")
    var transferHandler = false

    @Option(name: .customLong("download"), help: ArgumentHelp("After \"ready\", hand a download of URL to PATH to the daemon (StartDownload, session \"testapp\") and print its id (transfer_started); progress prints transfer_progress. Repeatable.", valueName: "URL=PATH"))
    var downloads: [String] = []

    @Option(name: .customLong("fetch-interval"), help: ArgumentHelp("Call SetMinimumFetchInterval with these seconds (0: minimum, inf: never) and print the registration.", valueName: "SECONDS"))
    var fetchInterval: Double?

    @Option(help: ArgumentHelp("Name of every task begun (shown in the daemon's Tasks property).", valueName: "NAME"))
    var name: String = "testapp"

    @Option(help: ArgumentHelp("Number of tasks to begin, one after the other; 0 only connects.", valueName: "N"))
    var tasks: Int = 1

    @Flag(help: "Switch to the background (SetApplicationState background) once the tasks are begun, which starts the background clock.")
    var background = false

    @Flag(help: "Switch to the foreground (SetApplicationState active) before beginning any task, as an app does when the user opens its window; for a launched app, which starts in the background.")
    var foreground = false

    @Option(name: .customLong("begin-after"), help: ArgumentHelp("Switch to the background first, then begin the tasks this many seconds later (the background clock runs meanwhile). Implies --background.", valueName: "SECONDS"))
    var beginAfter: Double?

    @Option(name: .customLong("end-after"), help: ArgumentHelp("End every task still open this many seconds after beginning them (fractions allowed). Without it, tasks stay open.", valueName: "SECONDS"))
    var endAfter: Double?

    @Option(help: ArgumentHelp("Work this many seconds of running time once the tasks are begun, in 10 ms steps that each print \"worked\" (time spent frozen or stopped does not count), then end every task still open.", valueName: "SECONDS"))
    var work: Double?

    @Option(name: .customLong("on-expire"), help: ArgumentHelp("On TaskExpiring: 'end' ends that task, 'ignore' does nothing (the app overstays and is terminated), 'exit' exits 0.", valueName: "end|ignore|exit"))
    var onExpire: ExpireAction = .ignore

    @Flag(name: .customLong("ignore-sigterm"), help: "Ignore SIGTERM, so that only the daemon's SIGKILL stops the app. Without it, SIGTERM prints \"sigterm\" and exits 143.")
    var ignoreSIGTERM = false

    @Option(help: ArgumentHelp("Seconds to stay alive once every task is closed, then exit 0. Default: 0 with --end-after, else run until killed.", valueName: "SECONDS"))
    var hold: Double?

    func validate() throws {
        guard tasks >= 0 else { throw ValidationError("--tasks must be 0 or more") }
        // Longer than a few decades cannot be slept for (Task.sleep traps): refused here.
        let longest = 1e9
        guard (endAfter ?? 0) >= 0, (endAfter ?? 0) <= longest else { throw ValidationError("--end-after must be a number of seconds from 0 to 1e9") }
        guard (beginAfter ?? 0) >= 0, (beginAfter ?? 0) <= 86_400 else { throw ValidationError("--begin-after must be a number of seconds from 0 to 86400") }
        guard (hold ?? 0) >= 0, (hold ?? 0) <= longest else { throw ValidationError("--hold must be a number of seconds from 0 to 1e9") }
        guard (fetchHandlerDelay ?? 0) >= 0, (fetchHandlerDelay ?? 0) <= longest else { throw ValidationError("--fetch-handler-delay must be a number of seconds from 0 to 1e9") }
        if fetchHandlerDelay != nil && fetchResult == nil { throw ValidationError("--fetch-handler-delay needs --fetch-result") }
        guard (work ?? 0) >= 0, (work ?? 0) <= 86_400 else { throw ValidationError("--work must be a number of seconds from 0 to 86400") }
        if work != nil && endAfter != nil { throw ValidationError("--work and --end-after exclude each other") }
        if foreground && (background || beginAfter != nil) { throw ValidationError("--foreground excludes --background and --begin-after") }
        if notifyOnStart && monitorRegions.isEmpty { throw ValidationError("--notify-on-start needs --monitor-region") }
    }

    func run() async throws {
        Termination.install(ignoring: ignoreSIGTERM)
        let manager: BackgroundTaskManager
        do {
            manager = try await BackgroundTaskManager.connect(bus: BusAddress(parsing: bus), appID: appID)
        } catch {
            EventLog.fail(error)
        }
        // Before "ready" nothing is delivered (no handler yet), so "ready" is always the first line.
        if let launch = manager.launch {
            EventLog.emit("ready", [
                "unique_name": .string(manager.uniqueName), "pid": .int(Int(getpid())),
                "reason": .string(launch.reason.rawValue), "pending": .int(Int(launch.pending)),
            ])
        } else {
            EventLog.emit("ready", ["unique_name": .string(manager.uniqueName), "pid": .int(Int(getpid()))])
        }

        // Installed before any handler: the SDK checks in again by itself when the daemon restarts.
        manager.onReconnect = { launch, error in
            if let error {
                EventLog.emit("recheck_failed", ["name": .string(error.name), "message": .string(error.message)])
            } else if let launch {
                EventLog.emit("rechecked_in", [
                    "reason": .string(launch.reason.rawValue), "pending": .int(Int(launch.pending)),
                ])
            } else {
                // A manager that never checked in gets (nil, nil): nothing was checked in, no reason to tell.
                EventLog.emit("reconnected", [:])
            }
        }
        if let pushResult { Self.installNotificationHandler(pushResult, on: manager) }
        if pushEndpoint {
            manager.onRemoteNotificationEndpointChanged = { endpoint in
                EventLog.emit("push_endpoint_changed", ["endpoint": .string(endpoint ?? "")])
            }
            do {
                let endpoint = try await manager.remoteNotificationEndpoint()
                EventLog.emit("push_endpoint", ["endpoint": .string(endpoint ?? "")])
            } catch {
                EventLog.fail(error)
            }
        }
        if let locationHandler { Self.installLocationHandler(locationHandler, on: manager) }
        if transferHandler {
            manager.setTransferHandler { result, completion in
                EventLog.emit("transfer_finished", [
                    "id": .string(result.transfer.id), "result": .string("\(result.outcome)"), "path": .string(result.transfer.path),
                    "bytes": .int(Int(clamping: result.transfer.bytesDone)),
                ])
                completion()
            }
        }
        if !downloads.isEmpty {
            manager.onTransferProgress = { id, done, total in
                EventLog.emit("transfer_progress", ["id": .string(id), "done": .int(Int(clamping: done)), "total": .int(Int(clamping: total))])
            }
            for download in downloads {
                // The last "=": a URL may hold some in its query, a path seldom does.
                guard let equals = download.lastIndex(of: "=") else {
                    EventLog.emit("error", ["message": .string("--download wants URL=PATH, not \(download)")])
                    continue
                }
                do {
                    let id = try await manager.startDownload(
                        from: String(download[..<equals]), to: String(download[download.index(after: equals)...]), session: "testapp")
                    EventLog.emit("transfer_started", ["id": .string(id)])
                } catch {
                    EventLog.fail(error)
                }
            }
        }
        if let fetchResult {
            if let fetchHandlerDelay {
                Task {
                    try await Task.sleep(for: .seconds(fetchHandlerDelay))
                    Self.installFetchHandler(fetchResult, on: manager)
                }
            } else {
                Self.installFetchHandler(fetchResult, on: manager)
            }
        }
        if let fetchInterval {
            do {
                try await manager.setMinimumBackgroundFetchInterval(fetchInterval)
                let registration = try await manager.fetchRegistration()
                let next = registration.nextEarliest.map { Int(($0.timeIntervalSince1970 * 1_000_000).rounded()) } ?? 0
                EventLog.emit("fetch_registered", [
                    "policy": .string(registration.policy.rawValue), "seconds": .double(registration.seconds),
                    "next_usec": .int(next),
                ])
            } catch {
                EventLog.fail(error)
            }
        }
        do {
            for argument in monitorRegions {
                try await manager.startMonitoring(region: argument.region, notifyOnStart: notifyOnStart)
            }
            if !monitorRegions.isEmpty {
                for region in try await manager.monitoredRegions() {
                    EventLog.emit("monitored", [
                        "region_id": .string(region.id), "latitude": .double(region.latitude),
                        "longitude": .double(region.longitude), "radius": .double(region.radius),
                    ])
                }
            }
            if significantChanges {
                try await manager.startSignificantLocationChanges()
                EventLog.emit("significant_changes", ["state": .string("started")])
            }
        } catch {
            EventLog.fail(error)
        }

        let book = TaskBook()
        manager.onTaskExpiring = { [onExpire] id, secondsLeft in
            EventLog.emit("expiring", ["task_id": .int(Int(id.rawValue)), "seconds_left": .double(secondsLeft)])
            switch onExpire {
            case .ignore: break
            case .exit: Glibc.exit(0)
            case .end: Task { await Self.end(id, manager: manager, book: book) }
            }
        }
        manager.onTaskExpired = { id in
            if book.closed(id) { EventLog.emit("expired", ["task_id": .int(Int(id.rawValue))]) }
        }

        do {
            if foreground {
                try await manager.setApplicationState(.active)
                EventLog.emit("state", ["state": .string(ApplicationState.active.rawValue)])
            }
            if let beginAfter {
                try await manager.setApplicationState(.background)
                EventLog.emit("state", ["state": .string(ApplicationState.background.rawValue)])
                try await Task.sleep(for: .seconds(beginAfter))
            }
            for _ in 0..<tasks {
                let id = try await manager.beginBackgroundTask(name: name)
                book.opened(id)
                let remaining = try await manager.backgroundTimeRemaining
                EventLog.emit("begun", ["task_id": .int(Int(id.rawValue)), "seconds_remaining": .double(remaining)])
            }
            if background && beginAfter == nil {
                try await manager.setApplicationState(.background)
                EventLog.emit("state", ["state": .string(ApplicationState.background.rawValue)])
            }
        } catch {
            EventLog.fail(error)
        }

        if let endAfter {
            try await Task.sleep(for: .seconds(endAfter))
            for id in book.openTasks { await Self.end(id, manager: manager, book: book) }
        }
        if let work {
            try await Self.work(seconds: work)
            for id in book.openTasks { await Self.end(id, manager: manager, book: book) }
        }
        await book.waitUntilAllClosed()
        if let holdFor = hold ?? (endAfter != nil || work != nil ? 0 : nil) {
            try await Task.sleep(for: .seconds(holdFor))
            manager.close()
            return
        }
        while true { try await Task.sleep(for: .seconds(3600)) }
    }

    /// Works in 10 ms steps until `seconds` worth have run, printing each
    /// step with the time it ran: a frozen app prints nothing, so the lines
    /// show when the app really ran.
    private static func work(seconds: Double) async throws {
        let steps = Int((seconds * 100).rounded(.up))
        for step in 0..<steps {
            try await Task.sleep(for: .milliseconds(10))
            var now = timespec()
            clock_gettime(CLOCK_MONOTONIC, &now)
            EventLog.emit("worked", ["step": .int(step + 1), "t": .int(now.tv_sec * 1_000_000 + now.tv_nsec / 1000)])
        }
    }

    /// Reports every fetch handed over, and answers it with `answer` at once
    /// (or never).
    private static func installFetchHandler(_ answer: FetchAnswer, on manager: BackgroundTaskManager) {
        manager.onPerformFetch = { token in
            EventLog.emit("perform_fetch", ["token": .string(token)])
        }
        manager.onFetchCompleted = { _, result, error in
            if let error { EventLog.fail(error) }
            EventLog.emit("fetch_completed", ["result": .string(result.rawValue)])
        }
        manager.setFetchHandler { completion in
            if let result = answer.result { completion(result) }
        }
    }

    /// Reports every push handed over, and answers it with `answer` at once
    /// (or never).
    private static func installNotificationHandler(_ answer: PushAnswer, on manager: BackgroundTaskManager) {
        manager.onNotificationReceived = { token, notification in
            EventLog.emit("notification", ["token": .string(token), "json": .string(notification.json)])
        }
        manager.onNotificationCompleted = { _, result, error in
            if let error { EventLog.fail(error) }
            EventLog.emit("notification_completed", ["result": .string(result.rawValue)])
        }
        manager.setNotificationHandler { _, completion in
            if let result = answer.result { completion(result) }
        }
    }

    /// Reports every location event handed over, and completes it at once
    /// (or never).
    private static func installLocationHandler(_ answer: LocationAnswer, on manager: BackgroundTaskManager) {
        manager.onLocationEventReceived = { token, event in
            EventLog.emit("location_event", fields(of: event, token: token))
        }
        manager.onLocationEventCompleted = { token, event, error in
            if let error { EventLog.fail(error) }
            EventLog.emit("location_completed", fields(of: event, token: token))
        }
        manager.setLocationHandler { _, completion in
            if answer == .complete { completion() }
        }
    }

    /// An event's fields for the log: the token, the kind, and what the event says.
    private static func fields(of event: LocationEvent, token: String) -> KeyValuePairs<String, EventValue> {
        switch event {
        case .region(let id, let crossing):
            ["token": .string(token), "kind": .string("region"), "region_id": .string(id), "crossing": .string(crossing.rawValue)]
        case .significantChange(let latitude, let longitude, let accuracy):
            ["token": .string(token), "kind": .string("significant_change"), "latitude": .double(latitude),
             "longitude": .double(longitude), "accuracy": .double(accuracy)]
        }
    }

    /// Ends one task and reports it; a task that expired meanwhile is no error.
    private static func end(_ id: BackgroundTaskIdentifier, manager: BackgroundTaskManager, book: TaskBook) async {
        do {
            try await manager.endBackgroundTask(id)
            if book.closed(id) { EventLog.emit("ended", ["task_id": .int(Int(id.rawValue))]) }
        } catch let error as BackgroundTasksError where error.code == .noSuchTask && book.isClosed(id) {
            // TaskExpired came first: the daemon closed it.
        } catch {
            EventLog.fail(error)
        }
    }
}
