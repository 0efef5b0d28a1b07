import BgTaskProtocol
import SDBus

/// One client connection to bgtaskd making blocking calls, as a simple app
/// (or the C baseline's callbench) would.
final class ManagerClient {
    let bus: Bus

    init(_ address: Bus.Address) throws(BusError) {
        bus = try Bus.open(address, description: "bgtaskd-bench")
    }

    /// `BeginBackgroundTask(name)`.
    func begin(_ name: String) throws(BusError) -> (id: UInt32, secondsRemaining: Double) {
        let call = try managerCall(ManagerInterface.Method.beginBackgroundTask.rawValue)
        try call.append(name)
        let reply = try bus.call(call)
        return (try reply.readUInt32(), try reply.readDouble())
    }

    /// `EndBackgroundTask(id)`.
    func end(_ id: UInt32) throws(BusError) {
        let call = try managerCall(ManagerInterface.Method.endBackgroundTask.rawValue)
        try call.append(id)
        _ = try bus.call(call)
    }

    /// `SetApplicationState(state)`: `active`, `inactive` or `background`.
    func setState(_ state: String) throws(BusError) {
        let call = try managerCall(ManagerInterface.Method.setApplicationState.rawValue)
        try call.append(state)
        _ = try bus.call(call)
    }

    /// `GetBackgroundTimeRemaining()`.
    func timeRemaining() throws(BusError) -> Double {
        try bus.call(try managerCall(ManagerInterface.Method.getBackgroundTimeRemaining.rawValue)).readDouble()
    }

    /// How many tasks the daemon reports open (the `Tasks` property).
    func openTaskCount() throws(BusError) -> Int {
        let call = try bus.newMethodCall(
            destination: BgTaskNames.busName, path: BgTaskNames.objectPath,
            interface: "org.freedesktop.DBus.Properties", member: "Get")
        try call.append(BgTaskNames.manager)
        try call.append(ManagerInterface.Property.tasks.rawValue)
        let reply = try bus.call(call)
        try reply.enterContainer("v", "a(ussd)")
        try reply.enterContainer("a", "(ussd)")
        var count = 0
        while try reply.enterContainer("r", "ussd") {
            try reply.skip("ussd")
            try reply.exitContainer()
            count += 1
        }
        return count
    }

    /// The pid of the process that owns bgtaskd's bus name.
    func daemonPID() throws(BusError) -> Int32 {
        let call = try bus.newMethodCall(
            destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus",
            interface: "org.freedesktop.DBus", member: "GetConnectionUnixProcessID")
        try call.append(BgTaskNames.busName)
        return Int32(bitPattern: try bus.call(call).readUInt32())
    }

    private func managerCall(_ member: String) throws(BusError) -> Message {
        try bus.newMethodCall(
            destination: BgTaskNames.busName, path: BgTaskNames.objectPath,
            interface: BgTaskNames.manager, member: member)
    }
}
