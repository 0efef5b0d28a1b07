import BgTaskProtocol
import Foundation
import SDBus

/// A blocking client of bgtaskd's D-Bus API, shared by every subcommand.
///
/// Calls go through `Bus.call` (no event loop): bgtaskctl asks, waits for the
/// answer and prints it. Errors come back as ``ClientError``s, with "the name
/// has no owner" turned into "bgtaskd is not running".
final class DaemonClient {
    /// The bus this client is connected to.
    let address: Bus.Address
    private let bus: Bus

    /// How long one call may take, in microseconds.
    private let timeout: UInt64 = 10_000_000

    /// Connects to `address`.
    init(connectingTo address: Bus.Address) throws(ClientError) {
        self.address = address
        do {
            bus = try Bus.open(address, description: "bgtaskctl")
            try bus.waitUntilReady(timeout: timeout)
        } catch {
            // The message reads "connecting to …: <strerror>"; say it once.
            let reason = error.message.components(separatedBy: ": ").last ?? error.message
            let unset = address == .session && getenv("DBUS_SESSION_BUS_ADDRESS") == nil
            throw ClientError(
                "cannot connect to \(address.spelledOut): \(reason)", name: error.name,
                hint: unset ? "DBUS_SESSION_BUS_ADDRESS is not set, and $XDG_RUNTIME_DIR/bus could not be reached" : nil)
        }
    }

    // MARK: The daemon

    /// The unique name of the running daemon. Throws "bgtaskd is not running"
    /// when nobody owns the name; never starts the daemon by activation.
    func daemonUniqueName() throws(ClientError) -> String {
        do {
            let reply = try callBus("GetNameOwner") { (call) throws(BusError) in try call.append(BgTaskNames.busName) }
            return try reply.readString()
        } catch let error where Self.meansNoOwner(error.name) {
            throw ClientError.notRunning(on: address, activatable: isActivatable())
        } catch {
            throw Self.connectionFailure(error, address: address) ?? ClientError(error)
        }
    }

    /// Calls a method of the daemon and returns the reply. `destination` is
    /// the well-known name unless a unique name is given (to be sure every
    /// answer comes from the same process).
    @discardableResult
    func call(
        _ member: String, interface: String = BgTaskNames.manager, destination: String = BgTaskNames.busName,
        timeout: UInt64? = nil, _ arguments: (Message) throws(BusError) -> Void = { _ throws(BusError) in }
    ) throws(ClientError) -> Message {
        do {
            let call = try bus.newMethodCall(
                destination: destination, path: BgTaskNames.objectPath, interface: interface, member: member)
            try arguments(call)
            return try bus.call(call, timeout: timeout ?? self.timeout)
        } catch where Self.meansNoOwner(error.name) {
            throw ClientError.notRunning(on: address, activatable: isActivatable())
        } catch where error.name == "org.freedesktop.DBus.Error.Timeout" || error.name == "org.freedesktop.DBus.Error.NoReply" {
            var failure = ClientError(error)
            // The bus daemon's NoReply for a peer that left; sd-bus's own says "timed out".
            if error.message.contains("disconnected") {
                failure.hint = "bgtaskd left the bus before it answered \(member): it exited, crashed or was killed; its log may say why"
            } else if destination == BgTaskNames.busName, !hasOwner() {
                failure.hint = "no process owns \(BgTaskNames.busName): the bus was starting bgtaskd through D-Bus activation, and it did not"
                    + " take its name in time; the activation's log (the journal, or the bus's) may say why"
            } else {
                failure.hint = "bgtaskd owns its name but did not answer \(member): it may be stopped (SIGSTOP, a debugger) or stuck; its log may say why"
            }
            throw failure
        } catch {
            throw Self.connectionFailure(error, address: address) ?? ClientError(error)
        }
    }

    /// All properties of one of the daemon's interfaces.
    func properties(
        of interface: String = BgTaskNames.manager, destination: String = BgTaskNames.busName
    ) throws(ClientError) -> [String: BusValue] {
        let reply = try call("GetAll", interface: "org.freedesktop.DBus.Properties", destination: destination) {
            (call) throws(BusError) in try call.append(interface)
        }
        do { return try reply.readOptions() } catch { throw ClientError(error) }
    }

    /// One property of one of the daemon's interfaces.
    func property(
        _ name: String, of interface: String = BgTaskNames.manager, destination: String = BgTaskNames.busName
    ) throws(ClientError) -> BusValue {
        let reply = try call("Get", interface: "org.freedesktop.DBus.Properties", destination: destination) {
            (call) throws(BusError) in
            try call.append(interface)
            try call.append(name)
        }
        do throws(BusError) {
            guard let value = try reply.readValue() else {
                throw BusError.failed("the daemon answered Get(\(name)) with no value")
            }
            return value.unwrapped
        } catch {
            throw ClientError(error)
        }
    }

    // MARK: The bus

    /// The process id of the connection `name`, as the bus daemon knows it.
    func processID(of name: String) throws(ClientError) -> UInt32 {
        do {
            let reply = try callBus("GetConnectionUnixProcessID") { (call) throws(BusError) in try call.append(name) }
            return try reply.readUInt32()
        } catch {
            throw ClientError(error)
        }
    }

    /// Whether the bus could start the daemon by D-Bus activation.
    /// Whether a process owns the daemon's name now.
    func hasOwner() -> Bool {
        guard let reply = try? callBus("NameHasOwner", { (call) throws(BusError) in try call.append(BgTaskNames.busName) }) else { return true }
        return (try? reply.readBool()) ?? true
    }

    func isActivatable() -> Bool {
        guard let reply = try? callBus("ListActivatableNames"),
              case .array(_, let names)? = try? reply.readValue() else { return false }
        return names.contains(.string(BgTaskNames.busName))
    }

    private func callBus(
        _ member: String, _ arguments: (Message) throws(BusError) -> Void = { _ throws(BusError) in }
    ) throws(BusError) -> Message {
        let call = try bus.newMethodCall(
            destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus",
            interface: "org.freedesktop.DBus", member: member)
        try arguments(call)
        return try bus.call(call, timeout: timeout)
    }

    /// A bus that could not be reached, said with its address: sd-bus
    /// connects to a TCP address only at the first call, whose error named
    /// neither the bus nor the connection ("Transport endpoint is not connected").
    static func connectionFailure(_ error: BusError, address: Bus.Address) -> ClientError? {
        let unreachable = ["ENOTCONN", "ECONNREFUSED", "ECONNRESET", "EHOSTUNREACH", "ENETUNREACH", "ETIMEDOUT", "EADDRNOTAVAIL"]
        guard unreachable.contains(where: { error.name == "System.Error." + $0 }) else { return nil }
        return ClientError("cannot connect to \(address.spelledOut): \(error.message.trimmingCharacters(in: .whitespacesAndNewlines))", name: error.name)
    }

    /// The errors that say the daemon's name has no owner (and could not be activated).
    private static func meansNoOwner(_ name: String) -> Bool {
        name == "org.freedesktop.DBus.Error.NameHasNoOwner" || name == "org.freedesktop.DBus.Error.ServiceUnknown"
    }
}
