import BgTaskProtocol
import CSystemd
import Glibc
import SDBus

/// The calls an app (and a trusted tool) makes for background fetch, and
/// what a client needs to take signals without an event loop.
extension ManagerClient {
    /// `Manager.CheckIn(app_id)`: binds this connection to the app.
    func checkIn(_ app: String) throws(BusError) {
        let call = try bus.newMethodCall(
            destination: BgTaskNames.busName, path: BgTaskNames.objectPath,
            interface: BgTaskNames.manager, member: ManagerInterface.Method.checkIn.rawValue)
        try call.append(app)
        _ = try bus.call(call)
    }

    /// `Fetch.SetMinimumFetchInterval(seconds)`.
    func setMinimumFetchInterval(_ seconds: Double) throws(BusError) {
        let call = try fetchCall(FetchInterface.Method.setMinimumFetchInterval.rawValue)
        try call.append(seconds)
        _ = try bus.call(call)
    }

    /// `Fetch.GetFetchRegistration()`: (policy, seconds, next_earliest_usec).
    func fetchRegistration() throws(BusError) -> (policy: String, seconds: Double, next: UInt64) {
        let reply = try bus.call(try fetchCall(FetchInterface.Method.getFetchRegistration.rawValue))
        return (try reply.readString(), try reply.readDouble(), try reply.readUInt64())
    }

    /// `Fetch.CompleteFetch(token, result)`.
    func completeFetch(_ token: String, _ result: String) throws(BusError) {
        let call = try fetchCall(FetchInterface.Method.completeFetch.rawValue)
        try call.append(token)
        try call.append(result)
        _ = try bus.call(call)
    }

    /// `Fetch.SimulateFetch(app_id)`, sent without waiting: `completion` gets
    /// the reply from ``process()``.
    func simulateFetchAsync(_ app: String, _ completion: @escaping (Result<Message, BusError>) -> Void) throws(BusError) {
        let call = try fetchCall(FetchInterface.Method.simulateFetch.rawValue)
        try call.append(app)
        try bus.callAsync(call, completion)
    }

    /// Calls `handler` for each `PerformFetch` the daemon sends this connection
    /// (a match rule, as an app's SDK adds; blocking until the bus has it).
    func onPerformFetch(_ handler: @escaping (Message) -> Void) throws(BusError) -> Slot {
        try bus.addMatch(
            "type='signal',sender='\(BgTaskNames.busName)',path='\(BgTaskNames.objectPath)',"
                + "interface='\(BgTaskNames.fetch)',member='PerformFetch'",
            async: false, handler)
    }

    /// Calls `handler` with `NameOwnerChanged(name, old_owner, new_owner)` of
    /// one well-known name (blocking until the bus has the rule).
    func onNameOwnerChanged(_ name: String, _ handler: @escaping (Message) -> Void) throws(BusError) -> Slot {
        try bus.addMatch(
            "type='signal',sender='org.freedesktop.DBus',path='/org/freedesktop/DBus',"
                + "interface='org.freedesktop.DBus',member='NameOwnerChanged',arg0='\(name)'",
            async: false, handler)
    }

    /// The pid of the connection that owns `name`.
    func ownerPID(of name: String) throws(BusError) -> Int32 {
        let call = try bus.newMethodCall(
            destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus",
            interface: "org.freedesktop.DBus", member: "GetConnectionUnixProcessID")
        try call.append(name)
        return Int32(bitPattern: try bus.call(call).readUInt32())
    }

    /// `org.freedesktop.DBus.NameHasOwner(name)`.
    func nameHasOwner(_ name: String) throws(BusError) -> Bool {
        let call = try bus.newMethodCall(
            destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus",
            interface: "org.freedesktop.DBus", member: "NameHasOwner")
        try call.append(name)
        return try bus.call(call).readBool()
    }

    /// The loaded plugins (the `Plugins` property): name and version.
    func plugins() throws(BusError) -> [(name: String, version: String)] {
        let call = try bus.newMethodCall(
            destination: BgTaskNames.busName, path: BgTaskNames.objectPath,
            interface: "org.freedesktop.DBus.Properties", member: "Get")
        try call.append(BgTaskNames.manager)
        try call.append(ManagerInterface.Property.plugins.rawValue)
        let reply = try bus.call(call)
        try reply.enterContainer("v", "a(ssu)")
        try reply.enterContainer("a", "(ssu)")
        var result: [(name: String, version: String)] = []
        while try reply.enterContainer("r", "ssu") {
            let name = try reply.readString()
            let version = try reply.readString()
            _ = try reply.readUInt32()
            try reply.exitContainer()
            result.append((name, version))
        }
        return result
    }

    /// How many apps `Manager.GetApplications` lists, and how many of them
    /// carry a fetch registration (a `fetch_policy` other than `never`).
    func applicationCounts() throws(BusError) -> (listed: Int, fetchRegistered: Int) {
        let call = try bus.newMethodCall(
            destination: BgTaskNames.busName, path: BgTaskNames.objectPath,
            interface: BgTaskNames.manager, member: ManagerInterface.Method.getApplications.rawValue)
        let reply = try bus.call(call)
        var listed = 0
        var registered = 0
        try reply.enterContainer("a", "a{sv}")
        while try reply.enterContainer("a", "{sv}") {
            listed += 1
            while try reply.enterContainer("e", "sv") {
                let key = try reply.readString()
                if key == "fetch_policy", try reply.enterContainer("v", "s") {
                    if try reply.readString() != "never" { registered += 1 }
                    try reply.exitContainer()
                } else {
                    try reply.skip("v")
                }
                try reply.exitContainer()
            }
            try reply.exitContainer()
        }
        return (listed, registered)
    }

    /// Dispatches whatever has arrived (replies to async calls, signals to
    /// matches) without blocking; true if anything was.
    @discardableResult
    func process() throws(BusError) -> Bool {
        var any = false
        while true {
            let r = sd_bus_process(bus.handle, nil)
            if r < 0 { throw BusError.errno(r, "processing the bus") }
            if r == 0 { return any }
            any = true
        }
    }

    /// A pollfd for this connection, asking for what sd-bus wants.
    var pollDescriptor: pollfd {
        pollfd(fd: sd_bus_get_fd(bus.handle), events: Int16(truncatingIfNeeded: sd_bus_get_events(bus.handle)), revents: 0)
    }

    private func fetchCall(_ member: String) throws(BusError) -> Message {
        try bus.newMethodCall(
            destination: BgTaskNames.busName, path: BgTaskNames.objectPath, interface: BgTaskNames.fetch, member: member)
    }
}
