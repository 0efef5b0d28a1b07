import ArgumentParser
import SDBus

/// A subcommand that talks to the daemon. It implements ``run(with:)``; the
/// shared ``run()`` connects to the bus first and turns every failure into
/// one line on standard error (`bgtaskctl: <message> (<error name>)`) and
/// exit status 1, so all subcommands fail the same way. With `--json` the
/// error is also one JSON document on standard output, so that a script
/// reading the output reads a document whatever happened.
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
            error.report(json: global.json)
            throw ExitCode.failure
        } catch let error as BusError {
            ClientError(error).report(json: global.json)
            throw ExitCode.failure
        }
    }
}
