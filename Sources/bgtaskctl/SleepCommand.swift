import BgTaskProtocol
import ArgumentParser

/// `bgtaskctl sleep` and `bgtaskctl wake`: the Manager's SimulateSleep and SimulateWake.
struct SleepCommand: ClientCommand {
    static let configuration = CommandConfiguration(
        commandName: "sleep",
        abstract: "Act as if the machine were going to sleep: freeze background apps and stop their clocks.",
        discussion: """
            Calls Manager.SimulateSleep, which takes the path logind's PrepareForSleep(true) \
            takes: every background app is suspended (frozen where the daemon can tie its \
            processes to it), every background clock stops and the state is written to \
            disk. Returns once that is done. For machines without logind, and for trying \
            things out; 'bgtaskctl wake' ends it. Only trusted callers (unsandboxed \
            processes of the daemon's user) may call it.

            --json prints {"sleeping": true}.
            """)

    @OptionGroup(title: "Global options")
    var global: GlobalOptions

    func run(with client: DaemonClient) throws {
        try Self.simulate(sleeping: true, client: client, json: global.json)
    }

    /// What `--json` prints.
    struct Report: Encodable {
        var sleeping: Bool
    }

    static func simulate(sleeping: Bool, client: DaemonClient, json: Bool) throws {
        // Asked as the call goes: a wake of a machine that is awake does nothing, and says so.
        let already = (try? client.property(ManagerInterface.Property.sleeping.rawValue)) == .bool(sleeping)
        try client.call(sleeping ? ManagerInterface.Method.simulateSleep.rawValue : ManagerInterface.Method.simulateWake.rawValue)
        if json {
            try JSONOutput.print(Report(sleeping: sleeping))
        } else if already {
            print(sleeping ? "Already asleep: nothing changed." : "Already awake: nothing changed.")
        } else if sleeping {
            print("Asleep: background apps are suspended and their clocks stopped. 'bgtaskctl wake' wakes the machine.")
        } else {
            print("Awake: the background apps with work left run in turns ('bgtaskctl status' shows the backlog).")
        }
    }
}
