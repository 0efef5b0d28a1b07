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
        // SimulateFetch answers once a launched app checked in: under a full
        // parallel run a launch can wait for the CPU well past 10 s.
        return try bus.call(message, timeout: 60_000_000)
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

    /// `app`'s state as `GetApplications` lists it, with ", suspended" when
    /// it is ("background, suspended"); "" when it is listed without a state
    /// (it does not run), nil when it is not listed.
    func appState(_ app: String) throws -> String? {
        guard let entry = try applications().first(where: { $0["app_id"] == .string(app) }) else { return nil }
        var words: [String] = []
        if case .string(let state)? = entry["state"] { words.append(state) }
        if case .bool(true)? = entry["suspended"] { words.append("suspended") }
        return words.joined(separator: ", ")
    }

    /// Polls ``appState(_:)`` until it is one of `wanted` or `timeout` passes; the last state seen.
    func waitForAppState(_ app: String, in wanted: Set<String>, timeout: Duration = .seconds(20)) throws -> String? {
        let deadline = ContinuousClock.now + timeout
        var current = try appState(app)
        while !wanted.contains(current ?? "-"), ContinuousClock.now < deadline {
            Thread.sleep(forTimeInterval: 0.05)
            current = try appState(app)
        }
        return current
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
