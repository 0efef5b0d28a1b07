import ArgumentParser
import SDBus

/// A subcommand that talks to the daemon. It implements ``run(with:)``; the
/// shared ``run()`` connects to the bus first and turns every failure into
/// one line on standard error (`bgtaskctl: <message> (<error name>)`) and
/// exit status 1, so all subcommands fail the same way.
protocol ClientCommand: ParsableCommand {
    /// `--bus` and `--json`.
    var global: GlobalOptions { get }

    /// Does the subcommand's work with a connected client.
    func run(with client: DaemonClient) throws
}

extension ClientCommand {
    func run() throws {
        do {
            let client = try DaemonClient(connectingTo: global.address)
            try run(with: client)
        } catch let error as ClientError {
            error.report()
            throw ExitCode.failure
        } catch let error as BusError {
            ClientError(error).report()
            throw ExitCode.failure
        }
    }
}
