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

/// `bgtaskd-testapp`: an app built on the BackgroundTasks SDK that the
/// integration tests start, drive with flags, read through JSON lines and kill.
@main
struct TestApp: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "bgtaskd-testapp",
        abstract: "A scriptable bgtaskd client: begins background tasks through the BackgroundTasks SDK and reports what happens.",
        discussion: """
            Connects (checking in when --app-id is given), begins --tasks tasks named --name, \
            switches to the background if asked, ends the tasks after --end-after seconds if \
            given, then stays alive for --hold seconds. Everything goes through the SDK.

            Lifetime: with --end-after the app exits 0 after the tasks ended and --hold \
            (default 0) passed. Without it the tasks stay open until they expire (or are \
            ended by --on-expire end); the app then stays --hold seconds if given, and \
            otherwise runs until it is killed.

            stdout carries one JSON object per line, written at once, such as \
            {"event":"begun","task_id":1,"seconds_remaining":1.7976931348623157e+308}. \
            Events and their fields:
              ready      unique_name, pid (with --app-id also reason, pending)
              begun      task_id, seconds_remaining (the app's background time)
              state      state ("background")
              expiring   task_id, seconds_left (the daemon's TaskExpiring)
              expired    task_id (the daemon's TaskExpired)
              ended      task_id (EndBackgroundTask succeeded)
              sigterm    (SIGTERM caught; exit 143 follows)
              error      name, message (the D-Bus error; exit 1 follows)

            Exit status: 0 when done or with --on-expire exit; 1 after an error \
            event; 143 after catching SIGTERM. With --ignore-sigterm only SIGKILL \
            stops it (137 in a shell).
            """)

    @Option(help: ArgumentHelp("Bus the daemon runs on: session, system or a D-Bus address such as unix:path=/tmp/bus.", valueName: "session|ADDRESS"))
    var bus: String = "session"

    @Option(name: .customLong("app-id"), help: ArgumentHelp("Check in as this app (desktop-file id) right after connecting; prints CheckIn's answer in \"ready\".", valueName: "ID"))
    var appID: String?

    @Option(help: ArgumentHelp("Name of every task begun (shown in the daemon's Tasks property).", valueName: "NAME"))
    var name: String = "testapp"

    @Option(help: ArgumentHelp("Number of tasks to begin, one after the other; 0 only connects.", valueName: "N"))
    var tasks: Int = 1

    @Flag(help: "Switch to the background (SetApplicationState background) once the tasks are begun, which starts the background clock.")
    var background = false

    @Option(name: .customLong("end-after"), help: ArgumentHelp("End every task still open this many seconds after beginning them (fractions allowed). Without it, tasks stay open.", valueName: "SECONDS"))
    var endAfter: Double?

    @Option(name: .customLong("on-expire"), help: ArgumentHelp("On TaskExpiring: 'end' ends that task, 'ignore' does nothing (the app overstays and is terminated), 'exit' exits 0.", valueName: "end|ignore|exit"))
    var onExpire: ExpireAction = .ignore

    @Flag(name: .customLong("ignore-sigterm"), help: "Ignore SIGTERM, so that only the daemon's SIGKILL stops the app. Without it, SIGTERM prints \"sigterm\" and exits 143.")
    var ignoreSIGTERM = false

    @Option(help: ArgumentHelp("Seconds to stay alive once every task is closed, then exit 0. Default: 0 with --end-after, else run until killed.", valueName: "SECONDS"))
    var hold: Double?

    func validate() throws {
        guard tasks >= 0 else { throw ValidationError("--tasks must be 0 or more") }
        guard (endAfter ?? 0) >= 0, (endAfter ?? 0).isFinite else { throw ValidationError("--end-after must be a number of seconds, 0 or more") }
        guard (hold ?? 0) >= 0, (hold ?? 0).isFinite else { throw ValidationError("--hold must be a number of seconds, 0 or more") }
    }

    func run() async throws {
        Termination.install(ignoring: ignoreSIGTERM)
        let manager: BackgroundTaskManager
        do {
            manager = try await BackgroundTaskManager.connect(bus: BusAddress(parsing: bus), appID: appID)
        } catch {
            EventLog.fail(error)
        }
        if let launch = manager.launch {
            EventLog.emit("ready", [
                "unique_name": .string(manager.uniqueName), "pid": .int(Int(getpid())),
                "reason": .string(launch.reason.rawValue), "pending": .int(Int(launch.pending)),
            ])
        } else {
            EventLog.emit("ready", ["unique_name": .string(manager.uniqueName), "pid": .int(Int(getpid()))])
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
            for _ in 0..<tasks {
                let id = try await manager.beginBackgroundTask(name: name)
                book.opened(id)
                let remaining = try await manager.backgroundTimeRemaining
                EventLog.emit("begun", ["task_id": .int(Int(id.rawValue)), "seconds_remaining": .double(remaining)])
            }
            if background {
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
        await book.waitUntilAllClosed()
        if let holdFor = hold ?? (endAfter != nil ? 0 : nil) {
            try await Task.sleep(for: .seconds(holdFor))
            manager.close()
            return
        }
        while true { try await Task.sleep(for: .seconds(3600)) }
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
