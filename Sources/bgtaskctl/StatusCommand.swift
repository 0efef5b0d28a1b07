import ArgumentParser
import BgTaskProtocol

/// `bgtaskctl status`: is the daemon there, and what state is it in.
struct StatusCommand: ClientCommand {
    static let configuration = CommandConfiguration(
        commandName: "status",
        abstract: "Show whether bgtaskd is running, and its version, sleep state, backlog, tasks and plugins.",
        discussion: """
            Asks the bus who owns org.bgtaskd.BackgroundTasks1 and which process \
            that is (org.freedesktop.DBus.GetConnectionUnixProcessID), then reads the \
            Manager's properties (Version, Sleeping, Draining, Backlog, Tasks, Plugins) from that same \
            connection. Does not start the daemon by D-Bus activation: if it is not \
            running, says so and exits with status 1.

            Sleeping is whether the machine sleeps as far as the daemon knows (logind's \
            PrepareForSleep, or bgtaskctl sleep): background apps are then frozen and \
            their clocks stopped. Draining is the time after a wake when the background \
            apps with work left run in turns (Scheduler.MaxConcurrentWakes at a time, \
            Scheduler.ChunkSec each); Backlog lists the apps having their turn, then \
            those waiting.

            --json prints one object: bus, name, unique_name, pid (null when the bus \
            cannot tell), version, sleeping, draining, backlog (app ids), task_count, \
            plugins (a list of objects with name, version and abi_version).
            """)

    @OptionGroup(title: "Global options")
    var global: GlobalOptions

    /// What `--json` prints.
    struct Report: Encodable {
        var bus: String
        var name: String
        var uniqueName: String
        var pid: UInt32?
        var version: UInt32
        var sleeping: Bool
        var draining: Bool
        var backlog: [String]
        var taskCount: Int
        var plugins: [ManagerState.Plugin]

        private enum CodingKeys: String, CodingKey {
            case bus, name, uniqueName = "unique_name", pid, version, sleeping, draining, backlog
            case taskCount = "task_count", plugins
        }

        func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encode(bus, forKey: .bus)
            try container.encode(name, forKey: .name)
            try container.encode(uniqueName, forKey: .uniqueName)
            try container.encode(pid, forKey: .pid)  // null, not absent, when unknown
            try container.encode(version, forKey: .version)
            try container.encode(sleeping, forKey: .sleeping)
            try container.encode(draining, forKey: .draining)
            try container.encode(backlog, forKey: .backlog)
            try container.encode(taskCount, forKey: .taskCount)
            try container.encode(plugins, forKey: .plugins)
        }
    }

    func run(with client: DaemonClient) throws {
        let uniqueName = try client.daemonUniqueName()
        // Every answer from the same connection, even if the daemon restarts meanwhile.
        let state = try ManagerState(properties: client.properties(destination: uniqueName))
        let pid: Result<UInt32, ClientError>
        do { pid = .success(try client.processID(of: uniqueName)) } catch { pid = .failure(error) }

        let report = Report(
            bus: client.address.description, name: BgTaskNames.busName, uniqueName: uniqueName,
            pid: try? pid.get(), version: state.version, sleeping: state.sleeping, draining: state.draining,
            backlog: state.backlog, taskCount: state.tasks.count, plugins: state.plugins)
        if global.json {
            try JSONOutput.print(report)
            return
        }
        var lines: [(String, String)] = [
            ("Name", "\(BgTaskNames.busName) (\(uniqueName))"),
            ("PID", {
                switch pid {
                case .success(let pid): "\(pid)"
                case .failure(let error): "unknown (\(error))"
                }
            }()),
            ("Version", "\(state.version)"),
            ("Sleeping", state.sleeping ? "yes (background apps frozen, their clocks paused)" : "no"),
            ("Backlog", Self.backlogText(draining: state.draining, backlog: state.backlog)),
            ("Tasks", state.tasks.isEmpty ? "none open" : "\(state.tasks.count) open (bgtaskctl tasks lists them)"),
        ]
        if state.plugins.isEmpty {
            lines.append(("Plugins", "none loaded"))
        } else {
            for (index, plugin) in state.plugins.enumerated() {
                lines.append((index == 0 ? "Plugins" : "", "\(plugin.name) \(plugin.version) (ABI \(plugin.abiVersion))"))
            }
        }
        print("bgtaskd is running on \(client.address.spelledOut)")
        let width = lines.map(\.0.count).max()! + 1
        for (label, value) in lines {
            let head = label.isEmpty ? "" : label + ":"
            print("  " + head + String(repeating: " ", count: width - head.count) + " " + LogText.escaped(value))
        }
    }

    /// The backlog line: who has a turn, how many wait.
    static func backlogText(draining: Bool, backlog: [String]) -> String {
        guard draining else { return "none (not draining)" }
        if backlog.isEmpty { return "draining, nobody left" }
        return "draining: \(backlog.count) app\(backlog.count == 1 ? "" : "s") (\(backlog.joined(separator: ", ")))"
    }
}
