// bgtaskd-example-fetch: a small app that keeps a local copy of something
// (a file, or a page on a local web server) up to date with bgtaskd's
// background fetch, the way an iOS app uses Background App Refresh, and
// refreshes it at once when a push says there is something new.
//
// What it shows, step by step (see `run()` below):
//   1. Connect to bgtaskd and check in (the SDK does it with --app-id, or
//      with BGTASKD_APP_ID when bgtaskd launched the app).
//   2. Install the fetch and notification handlers right away: a launched
//      app's fetch or push arrives just after checking in, and the SDK keeps
//      it until a handler is set.
//   3. Ask for a fetch interval (SetMinimumFetchInterval).
//   4. On every fetch, and on every push that says content-available:
//      download, compare with the cache, answer newData, noData or failed
//      through the completion. An alert-only push is just logged (bgtaskd
//      has shown it to the user already).
//   5. When launched in the background, exit once the fetch is answered;
//      when started by the user, say it is in the background (it has no
//      window) so that bgtaskd fetches it at its interval, and stay until
//      SIGTERM.
//
// To try it, install a desktop entry that declares the fetch mode, e.g.
// ~/.local/share/applications/org.example.FetchDemo.desktop:
//
//   [Desktop Entry]
//   Type=Application
//   Name=Fetch Demo
//   Exec=/path/to/bgtaskd-example-fetch --app-id org.example.FetchDemo --source file:///tmp/news.txt --cache /tmp/news.cache
//   X-BgTaskd-Modes=fetch;remote-notification;
//
// then `bgtaskctl fetch simulate org.example.FetchDemo` (or `bgtaskctl push
// org.example.FetchDemo -n`) launches it in the background, and `bgtaskctl
// apps` shows what the last fetch found.

import ArgumentParser
import BackgroundTasks
import Dispatch
import Foundation
import Glibc

/// `--interval`: `minimum`, `never`, or seconds.
struct FetchIntervalArgument: ExpressibleByArgument, Sendable {
    var seconds: TimeInterval

    init?(argument: String) {
        switch argument {
        case "minimum": seconds = BackgroundTaskManager.minimumFetchInterval
        case "never": seconds = BackgroundTaskManager.fetchIntervalNever
        default:
            guard let value = Double(argument), value >= 0, !value.isNaN else { return nil }
            seconds = value
        }
    }
}

struct FetchExample: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "bgtaskd-example-fetch",
        abstract: "An example bgtaskd app: keeps a cached copy of a file or local HTTP URL fresh with background fetch.",
        discussion: """
            On start the app checks in with bgtaskd (as --app-id, else as BGTASKD_APP_ID \
            from the environment, which bgtaskd sets when it launches the app), installs \
            its fetch handler and asks for a fetch interval. Whenever bgtaskd wakes it for \
            a fetch (PerformFetch), it reads --source, compares it with --cache, writes the \
            new copy, and completes the fetch with newData when the content changed, \
            noData when it is the same, and failed when it could not be read or written.

            A push (NotificationReceived) with aps.content-available refreshes the cache the \
            same way and completes the push with the result; a push without it only logs \
            its alert and completes with noData.

            The app's desktop entry must declare the modes: X-BgTaskd-Modes=fetch;remote-notification;

            Lifetime: launched by bgtaskd for a background event (CheckIn says reason \
            fetch, remote-notification or location), the app exits --stay seconds after \
            its fetches are complete, unless bgtaskd suspends it first: bgtaskd freezes an \
            app it launched 1 s after it has nothing left to do, as iOS suspends one, and \
            thaws it for its next event. Started by the user \
            (reason user), it tells bgtaskd it is in the background (it has no window; \
            bgtaskd does not fetch apps in the foreground), stays running, and is fetched \
            whenever bgtaskd wakes it, until SIGTERM or SIGINT.

            Standard output carries one JSON object per line:
              ready       app_id, reason, pending      (checked in)
              registered  policy, interval, next_usec, refresh  (interval set; refresh status)
              state       state                         (started by the user: "background")
              fetching                                  (a fetch began)
              push        json, alert, title, content_available  (a push arrived)
              fetched     result, bytes                 (the fetch's own outcome)
              completed   result, [of]                  (bgtaskd recorded the result; of: push for a push)
              error       stage, [name], message        (stage: connect, register, state, fetch, complete)
              exit        reason                        (done, or the signal)
            """)

    @Option(name: .customLong("app-id"), help: ArgumentHelp(
        "The app's desktop-file id (org.example.FetchDemo). Default: BGTASKD_APP_ID from the environment.",
        valueName: "ID"))
    var appID: String?

    @Option(help: ArgumentHelp("What to fetch: a file:// URL, or an http:// URL.", valueName: "URL"))
    var source: String

    @Option(help: ArgumentHelp("File that keeps the last copy fetched; created when missing.", valueName: "FILE"))
    var cache: String

    @Option(help: ArgumentHelp(
        "Minimum fetch interval to ask for: seconds, 'minimum' (0: as often as bgtaskd allows) or 'never'.",
        valueName: "SECONDS"))
    var interval: FetchIntervalArgument = FetchIntervalArgument(argument: "minimum")!

    @Option(help: ArgumentHelp(
        "Bus bgtaskd runs on: session (the default), system, or a D-Bus address such as unix:path=/tmp/bus.",
        valueName: "ADDRESS"))
    var bus: String = "session"

    @Option(help: ArgumentHelp(
        "When launched in the background: seconds to stay after the last fetch is complete, then exit (unless bgtaskd suspends the app first, as it does 1 s after its work is done where it can freeze it).",
        valueName: "SECONDS"))
    var stay: Double = 5

    func validate() throws {
        guard let url = URL(string: source), let scheme = url.scheme?.lowercased(),
              ["file", "http", "https"].contains(scheme) else {
            throw ValidationError("--source must be a file:// or http:// URL, not '\(source)'")
        }
        if cache.isEmpty { throw ValidationError("--cache needs a file name") }
        guard stay >= 0, stay.isFinite else { throw ValidationError("--stay must be a number of seconds, 0 or more") }
        if appID == nil, ProcessInfo.processInfo.environment["BGTASKD_APP_ID", default: ""].isEmpty {
            throw ValidationError("give --app-id (or run the app from bgtaskd, which sets BGTASKD_APP_ID)")
        }
    }

    func run() async throws {
        let fetcher = Fetcher(source: URL(string: source)!, cache: URL(fileURLWithPath: cache))
        let (stopSignals, signalSources) = Self.handleStopSignals()
        defer { withExtendedLifetime(signalSources) {} }

        // 1. Connect and check in. With appID nil the SDK uses BGTASKD_APP_ID.
        let manager: BackgroundTaskManager
        do {
            manager = try await BackgroundTaskManager.connect(bus: BusAddress(parsing: bus), appID: appID)
        } catch {
            EventLog.error("connect", error)
            throw ExitCode.failure
        }
        let launch = manager.launch ?? LaunchInfo()
        // bgtaskd launched us for an event, or the user started us.
        let inBackground = launch.reason != .user
        let lifetime = BackgroundLifetime(stay: stay) {
            EventLog.emit("exit", ["reason": .string("done")])
        }

        // 2. The fetch handler, before anything else: fetches that wait for a
        //    launched app arrive right after the check-in.
        // Handlers run on the SDK's thread: do the work in a task and return
        // at once; the completion may be called from anywhere.
        let refresh: @Sendable (_ completion: @escaping @Sendable (FetchResult) -> Void) -> Void = { completion in
            Task {
                do {
                    let outcome = try await fetcher.fetch()
                    EventLog.emit("fetched", ["result": .string(outcome.result.rawValue), "bytes": .int(outcome.bytes)])
                    completion(outcome.result)
                } catch {
                    EventLog.error("fetch", error)
                    completion(.failed)
                }
            }
        }
        manager.setFetchHandler { completion in
            lifetime.wakeStarted()
            EventLog.emit("fetching")
            refresh(completion)
        }
        // The daemon has (or refused) the answer: now a background app may go.
        manager.onFetchCompleted = { _, result, error in
            if let error {
                EventLog.error("complete", error)
            } else {
                EventLog.emit("completed", ["result": .string(result.rawValue)])
            }
            if inBackground { lifetime.wakeFinished() }
        }

        //    The notification handler: a push that says there is new content
        //    refreshes like a fetch; an alert alone was shown by bgtaskd.
        manager.setNotificationHandler { notification, completion in
            lifetime.wakeStarted()
            EventLog.emit("push", [
                "json": .string(notification.json),
                "alert": notification.alert?.body.map { .string($0) } ?? .null,
                "title": notification.alert?.title.map { .string($0) } ?? .null,
                "content_available": .bool(notification.contentAvailable),
            ])
            guard notification.contentAvailable else { return completion(.noData) }
            refresh(completion)
        }
        manager.onNotificationCompleted = { _, result, error in
            if let error {
                EventLog.error("complete", error)
            } else {
                EventLog.emit("completed", ["result": .string(result.rawValue), "of": .string("push")])
            }
            if inBackground { lifetime.wakeFinished() }
        }
        EventLog.emit("ready", [
            "app_id": .string(appID ?? ProcessInfo.processInfo.environment["BGTASKD_APP_ID"] ?? ""),
            "reason": .string(launch.reason.rawValue), "pending": .int(Int(launch.pending)),
        ])

        // 3. Ask for an interval, and show what bgtaskd made of it.
        do {
            try await manager.setMinimumBackgroundFetchInterval(interval.seconds)
            let registration = try await manager.fetchRegistration()
            let refresh = try await manager.backgroundRefreshStatus()
            let next = registration.nextEarliest.map { Int(($0.timeIntervalSince1970 * 1_000_000).rounded()) } ?? 0
            EventLog.emit("registered", [
                "policy": .string(registration.policy.rawValue), "interval": .double(registration.seconds),
                "next_usec": .int(next), "refresh": .string(refresh.rawValue),
            ])
        } catch {
            // Not fatal: a fetch already under way still gets its answer.
            EventLog.error("register", error)
        }
        if !inBackground {
            // A real app does this when its last window is hidden. This one has
            // none; in the foreground it would be fetched only on request.
            do {
                try await manager.setApplicationState(.background)
                EventLog.emit("state", ["state": .string(ApplicationState.background.rawValue)])
            } catch {
                EventLog.error("state", error)
            }
        }

        // 4./5. Wait. A background launch with nothing waiting leaves soon;
        //        otherwise the lifetime exits after the fetch is complete.
        if inBackground && launch.pending == 0 { lifetime.idle() }
        let signal = await stopSignals.next()
        EventLog.emit("exit", ["reason": .string(signal)])
        manager.close()
    }

    /// Turns SIGTERM and SIGINT into a value to await, so the app can say
    /// goodbye and close its connection instead of dying mid-line.
    private static func handleStopSignals() -> (StopSignals, [any DispatchSourceSignal]) {
        let signals = StopSignals()
        var sources: [any DispatchSourceSignal] = []
        for (number, name) in [(SIGTERM, "SIGTERM"), (SIGINT, "SIGINT")] {
            signal(number, SIG_IGN)  // the dispatch source gets it instead
            let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
            source.setEventHandler { signals.received(name) }
            source.resume()
            sources.append(source)
        }
        return (signals, sources)
    }
}

// main.swift cannot use @main, and top-level code calls ParsableCommand's
// synchronous main()/run() (which only print the help); so parse and run
// the async command by hand from an async function, as
// AsyncParsableCommand's own main() does.
func runFetchExample() async {
    do {
        let command = try FetchExample.parse()
        try await command.run()
    } catch {
        FetchExample.exit(withError: error)
    }
}

await runFetchExample()
