import BgTaskProtocol
import SDBus

/// The sleep and wake calls a trusted tool makes.
extension ManagerClient {
    /// The `SimulateSleep` or `SimulateWake` call, to send with ``simulate(sleeping:)`` or without waiting.
    func simulateCall(sleeping: Bool) throws(BusError) -> Message {
        try bus.newMethodCall(
            destination: BgTaskNames.busName, path: BgTaskNames.objectPath,
            interface: BgTaskNames.manager, member: sleeping ? ManagerInterface.Method.simulateSleep.rawValue : ManagerInterface.Method.simulateWake.rawValue)
    }

    /// `SimulateSleep` (answered once background apps are frozen) or `SimulateWake`.
    func simulate(sleeping: Bool) throws(BusError) {
        _ = try bus.call(try simulateCall(sleeping: sleeping), timeout: 30_000_000)
    }

    /// The `Draining` property.
    func isDraining() throws(BusError) -> Bool {
        let call = try bus.newMethodCall(
            destination: BgTaskNames.busName, path: BgTaskNames.objectPath,
            interface: "org.freedesktop.DBus.Properties", member: "Get")
        try call.append(BgTaskNames.manager)
        try call.append(ManagerInterface.Property.draining.rawValue)
        let reply = try bus.call(call)
        try reply.enterContainer("v", "b")
        return try reply.readBool()
    }
}
