import ArgumentParser
import BgTaskProtocol
import SDBus

/// `bgtaskctl transfers [SESSION]`: the background transfers bgtaskd carries out.
struct TransfersCommand: ClientCommand {
    static let configuration = CommandConfiguration(
        commandName: "transfers",
        abstract: "List the background downloads and uploads bgtaskd carries out for apps.",
        discussion: """
            Calls Transfers.ListTransfers: every transfer of every app (of one session \
            with SESSION) that its app has not completed yet, oldest first. STATE is \
            'waiting' (WAITING FOR says what for: its turn, a retry, the network, an \
            unmetered network, AC power …), 'running' or 'finished' (its result waits \
            for the app's CompleteEvents). PROGRESS is bytes moved of bytes in all ('?' \
            while the server has not said); RESULT is 'success', 'failed' or 'timedOut' \
            once finished, with the HTTP status and why it failed.

            --json prints {"transfers": [...]}, one object per transfer with the keys \
            the daemon sent (transfer_id, session_id, app_id, kind, url, path, state, \
            bytes_done, bytes_total, attempts, resumed, restarted, discretionary, and \
            result, error, status, waiting_for when known). Keys may be added; ignore \
            the ones you do not know. Only trusted callers may list every app's transfers.
            """)

    @OptionGroup(title: "Global options")
    var global: GlobalOptions

    @Argument(help: ArgumentHelp("Only this session's transfers; omit it for all.", valueName: "SESSION"))
    var session: String?

    /// What `--json` prints.
    struct Report: Encodable {
        var transfers: [[String: BusValueJSON]]
    }

    func validate() throws { try EmptyArgument.refuse(session, as: "SESSION", leaveOut: "list every transfer") }

    func run(with client: DaemonClient) throws {
        let uniqueName = try client.daemonUniqueName()
        let reply: Message
        do {
            reply = try client.call(TransfersInterface.Method.listTransfers.rawValue, interface: BgTaskNames.transfers, destination: uniqueName) {
                (call) throws(BusError) in try call.append(session ?? "")
            }
        } catch {
            var error = error
            error.hint = error.name == BgTaskError.Code.notPermitted.rawValue
                ? "only unsandboxed processes of the daemon's user may list every app's transfers"
                : ClientError.modeHint(for: error.name, mode: .transfer)
            throw error
        }
        let transfers = try BusRecord.list(from: reply, member: TransfersInterface.Method.listTransfers.rawValue)
        if global.json {
            try JSONOutput.print(Report(transfers: transfers.map(\.json)))
            return
        }
        if transfers.isEmpty {
            print("No transfers.")
            return
        }
        typealias Key = TransfersInterface.Key
        var table = TextTable([
            .init("ID", maxWidth: 40), .init("APP", maxWidth: 48), .init("KIND"), .init("STATE"),
            .init("PROGRESS", alignment: .right), .init("RESULT", maxWidth: 60), .init("WAITING FOR"), .init("URL", maxWidth: 80),
        ])
        for transfer in transfers {
            let done = transfer.uint(Key.bytesDone.rawValue) ?? 0
            let total = transfer.uint(Key.bytesTotal.rawValue) ?? 0
            var result = transfer.string(Key.result.rawValue) ?? "-"
            if let status = transfer.uint(Key.status.rawValue), transfer.string(Key.result.rawValue) != nil { result += " (\(status))" }
            if let error = transfer.string(Key.error.rawValue), transfer.string(Key.result.rawValue) == TransfersInterface.Result.failed.rawValue {
                result += ": " + error
            }
            table.append([
                transfer.string(Key.transferID.rawValue) ?? "?", transfer.string(Key.appID.rawValue) ?? "?",
                transfer.string(Key.kind.rawValue) ?? "?", transfer.string(Key.state.rawValue) ?? "?",
                "\(done)/\(total == 0 ? "?" : "\(total)")", result, transfer.string(Key.waitingFor.rawValue) ?? "-",
                transfer.string(Key.url.rawValue) ?? "?",
            ])
        }
        print(table.render(), terminator: "")
    }
}
