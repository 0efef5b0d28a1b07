import BgTaskProtocol
import SDBus

/// One app's connection to bgtaskd for the transfer benchmark: checks in,
/// starts downloads, and waits for their TransferFinished.
final class TransferClient {
    let bus: Bus
    private var slot: Slot?
    /// Finished transfers seen so far: id → (token, result).
    private(set) var finished: [String: (token: String, result: String)] = [:]

    init(_ address: String, app: String) throws(BusError) {
        bus = try Bus.open(.address(address), description: "bgtaskd-bench-transfer")
        slot = try bus.addMatch("type='signal',interface='\(BgTaskNames.transfers)',member='TransferFinished'", async: false) {
            [unowned self] message in
            guard let token = try? message.readString(), let id = try? message.readString(), let result = try? message.readString() else { return }
            finished[id] = (token, result)
        }
        let call = try bus.newMethodCall(
            destination: BgTaskNames.busName, path: BgTaskNames.objectPath, interface: BgTaskNames.manager,
            member: ManagerInterface.Method.checkIn.rawValue)
        try call.append(app)
        _ = try bus.call(call)
    }

    private func transfersCall(_ member: TransfersInterface.Method) throws(BusError) -> Message {
        try bus.newMethodCall(
            destination: BgTaskNames.busName, path: BgTaskNames.objectPath, interface: BgTaskNames.transfers, member: member.rawValue)
    }

    /// `StartDownload`; returns the transfer id.
    func download(_ url: String, to path: String) throws(BusError) -> String {
        let call = try transfersCall(.startDownload)
        try call.append("bench")
        try call.append(url)
        try call.append(path)
        try call.append(value: .dictionary(key: "s", value: "v", []))
        return try bus.call(call).readString()
    }

    /// `ListTransfers("bench")`; returns how many it listed.
    func list() throws(BusError) -> Int {
        let call = try transfersCall(.listTransfers)
        try call.append("bench")
        let reply = try bus.call(call)
        try reply.enterContainer("a", "a{sv}")
        var count = 0
        while try reply.peekType() != nil {
            try reply.skip("a{sv}")
            count += 1
        }
        try reply.exitContainer()
        return count
    }

    func cancel(_ id: String) throws(BusError) {
        let call = try transfersCall(.cancel)
        try call.append(id)
        _ = try bus.call(call)
    }

    func complete(_ token: String) throws(BusError) {
        let call = try transfersCall(.completeEvents)
        try call.append(token)
        _ = try bus.call(call)
    }

    /// Waits up to `timeout` seconds for the TransferFinished of `id`.
    func waitForFinished(_ id: String, timeout: Double) throws(BusError) -> (token: String, result: String)? {
        let start = MonotonicTime.nanoseconds()
        while finished[id] == nil, MonotonicTime.microseconds(since: start) < timeout * 1e6 {
            if try !bus.processPending() { try bus.wait(timeout: 50_000) }
        }
        return finished[id]
    }
}
