import BgTaskTestKit
import Foundation
import SDBus

/// A plain D-Bus connection to the daemon under test, for calls that must
/// come from one connection (CheckIn, then a mode method) and for waiting on
/// unicast signals.
final class RawClient {
    let bus: Bus
    private var matches: [Slot] = []
    private(set) var received: [Message] = []

    init(_ daemon: DaemonUnderTest) throws {
        bus = try Bus.open(.address(daemon.bus.address))
    }

    var uniqueName: String { bus.uniqueName }

    /// Calls a method; `build` appends the arguments.
    @discardableResult
    func call(_ interface: String, _ member: String, _ build: (Message) throws -> Void = { _ in }) throws -> Message {
        let message = try bus.newMethodCall(
            destination: "org.bgtaskd.BackgroundTasks1", path: "/org/bgtaskd/BackgroundTasks1",
            interface: "org.bgtaskd.BackgroundTasks1." + interface, member: member)
        try build(message)
        return try bus.call(message, timeout: 10_000_000)
    }

    /// The D-Bus error name a call answers with (nil when it succeeds).
    func errorName(_ interface: String, _ member: String, _ build: (Message) throws -> Void = { _ in }) -> String? {
        do {
            _ = try call(interface, member, build)
            return nil
        } catch let error as BusError {
            return error.name
        } catch {
            return "\(error)"
        }
    }

    /// `GetApplications`, as one dictionary per app (variants unwrapped).
    func applications() throws -> [[String: BusValue]] {
        let reply = try call("Manager", "GetApplications")
        guard case .array(_, let apps) = try reply.readValue() else { return [] }
        return apps.map { app in
            guard case .dictionary(_, _, let entries) = app else { return [:] }
            var fields: [String: BusValue] = [:]
            for entry in entries { if case .string(let key) = entry.key { fields[key] = entry.value.unwrapped } }
            return fields
        }
    }

    /// Forgets the signals received so far.
    func clearReceived() { received.removeAll() }

    /// Records every signal named `member` that reaches this connection.
    func listen(for member: String) throws {
        matches.append(try bus.addMatch("type='signal',member='\(member)'", async: false) { [unowned self] message in
            received.append(message)
        })
    }

    /// Processes the connection until `count` signals were received or the timeout passes.
    func waitForSignals(_ count: Int, timeout: Duration = .seconds(10)) -> Bool {
        let deadline = ContinuousClock.now + timeout
        while received.count < count && ContinuousClock.now < deadline {
            do {
                if try !bus.processPending() { try bus.wait(timeout: 20_000) }
            } catch {
                return false
            }
        }
        return received.count >= count
    }
}
