import ArgumentParser
import BgTaskProtocol

/// `bgtaskctl status`: is the daemon there, and what state is it in.
struct StatusCommand: ClientCommand {
    static let configuration = CommandConfiguration(
        commandName: "status",
        abstract: "Show whether bgtaskd is running, and its version, sleep state, tasks and plugins.",
        discussion: """
            Asks the bus who owns org.bgtaskd.BackgroundTasks1 and which process \
            that is (org.freedesktop.DBus.GetConnectionUnixProcessID), then reads the \
            Manager's properties (Version, Sleeping, Tasks, Plugins) from that same \
            connection. Does not start the daemon by D-Bus activation: if it is not \
            running, says so and exits with status 1.

            --json prints one object: bus, name, unique_name, pid (null when the bus \
            cannot tell), version, sleeping, task_count, plugins (a list of objects \
            with name, version and abi_version).
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
        var taskCount: Int
        var plugins: [ManagerState.Plugin]

        private enum CodingKeys: String, CodingKey {
            case bus, name, uniqueName = "unique_name", pid, version, sleeping, taskCount = "task_count", plugins
        }

        func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encode(bus, forKey: .bus)
            try container.encode(name, forKey: .name)
            try container.encode(uniqueName, forKey: .uniqueName)
            try container.encode(pid, forKey: .pid)  // null, not absent, when unknown
            try container.encode(version, forKey: .version)
            try container.encode(sleeping, forKey: .sleeping)
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
            pid: try? pid.get(), version: state.version, sleeping: state.sleeping,
            taskCount: state.tasks.count, plugins: state.plugins)
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
            ("Sleeping", state.sleeping ? "yes (background clocks paused)" : "no"),
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
            print("  " + head + String(repeating: " ", count: width - head.count) + " " + TextTable.printable(value))
        }
    }
}
