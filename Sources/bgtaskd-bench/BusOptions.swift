import ArgumentParser
import SDBus

/// Where the daemon is: the bus, and optionally its pid (else asked of the bus).
struct BusOptions: ParsableArguments {
    @Option(help: ArgumentHelp("Bus the daemon serves on: session or a D-Bus address.", valueName: "session|ADDRESS"))
    var bus: String = "session"

    @Option(help: ArgumentHelp("The daemon's pid (default: the owner of org.bgtaskd.BackgroundTasks1).", valueName: "PID"))
    var daemonPID: Int32?

    var address: Bus.Address { Bus.Address(parsing: bus) }

    /// Connects a client.
    func connect() throws -> ManagerClient {
        try ManagerClient(address)
    }

    /// The daemon's /proc view, located through `client` when no pid was given.
    func daemon(via client: ManagerClient) throws -> ProcStatus {
        let pid = try daemonPID ?? client.daemonPID()
        let status = ProcStatus(pid: pid)
        guard status.exists else { throw ValidationError("no process \(pid)") }
        return status
    }
}
