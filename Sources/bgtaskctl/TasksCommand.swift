import BgTaskProtocol
import ArgumentParser

/// `bgtaskctl tasks`: the open background tasks of all apps.
struct TasksCommand: ClientCommand {
    static let configuration = CommandConfiguration(
        commandName: "tasks",
        abstract: "List the open background tasks of all apps.",
        discussion: """
            Reads the Manager's Tasks property: every task opened with \
            BeginBackgroundTask and not yet ended or expired, by id. OWNER is the \
            app id, or the connection's unique bus name when it never checked in. \
            REMAINING is the owner app's background time left (all tasks of one app \
            share one deadline); '∞ (active)' means the app is in the foreground and \
            its clock is not running.

            --json prints {"tasks": [...]} with id, owner, name, seconds_remaining \
            (1.7976931348623157e+308, DBL_MAX, while the app is not in the \
            background) and unlimited (true exactly then).
            """)

    @OptionGroup(title: "Global options")
    var global: GlobalOptions

    /// What `--json` prints.
    struct Report: Encodable {
        var tasks: [ManagerState.Task]
    }

    func run(with client: DaemonClient) throws {
        let uniqueName = try client.daemonUniqueName()
        let tasks = try ManagerState.tasks(from: client.property(ManagerInterface.Property.tasks.rawValue, destination: uniqueName))
        if global.json {
            try JSONOutput.print(Report(tasks: tasks))
            return
        }
        if tasks.isEmpty {
            print("No background tasks are open.")
            return
        }
        var table = TextTable([
            .init("ID", alignment: .right), .init("OWNER", maxWidth: 48), .init("NAME", maxWidth: 48),
            .init("REMAINING", alignment: .right),
        ])
        for task in tasks {
            table.append(["\(task.id)", task.owner, task.name, RemainingTime.text(seconds: task.secondsRemaining)])
        }
        print(table.render(), terminator: "")
    }
}
