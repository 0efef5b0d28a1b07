import SDBus

/// The systemd user manager as the launcher and the freezer use it: whether
/// it is on the session bus, `StartTransientUnit` for a launched app's scope,
/// and `FreezeUnit`/`ThawUnit`.
/// Asynchronous only; replies arrive on the bus's loop.
struct SystemdUserManager {
    static let busName = "org.freedesktop.systemd1"
    static let path = "/org/freedesktop/systemd1"
    static let interface = "org.freedesktop.systemd1.Manager"

    /// How long to wait for the bus daemon and for systemd (µs).
    static let timeout: UInt64 = 10_000_000

    let bus: Bus

    /// Whether `org.freedesktop.systemd1` has an owner. Asked of the bus
    /// daemon rather than by calling systemd, because many session buses have
    /// an activation file for the name (Exec=/bin/false) and a call would try
    /// to activate it.
    func checkPresence(_ completion: @escaping (Result<Bool, BusError>) -> Void) {
        do throws(BusError) {
            let call = try bus.newMethodCall(
                destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus",
                interface: "org.freedesktop.DBus", member: "NameHasOwner")
            try call.append(Self.busName)
            try bus.callAsync(call, timeout: Self.timeout) { result in
                completion(result.flatMap { reply in Result { () throws(BusError) in try reply.readBool() } })
            }
        } catch {
            completion(.failure(error))
        }
    }

    /// Asks systemd to make `pid` the scope unit `name`. Success means systemd
    /// queued the job (its path is the result); the scope then exists within
    /// moments.
    func startScope(
        name: String, pid: Int32, description: String,
        _ completion: @escaping (Result<String, BusError>) -> Void
    ) {
        do throws(BusError) {
            let call = try bus.newMethodCall(
                destination: Self.busName, path: Self.path, interface: Self.interface, member: "StartTransientUnit")
            try call.append(name)
            // "fail": refuse if a unit of that name exists or has a job queued.
            try call.append("fail")
            try call.append(value: Self.scopeProperties(pid: pid, description: description))
            try call.append(value: .array(element: "(sa(sv))", []))
            try bus.callAsync(call, timeout: Self.timeout) { result in
                completion(result.flatMap { reply in Result { () throws(BusError) in try reply.readObjectPath() } })
            }
        } catch {
            completion(.failure(error))
        }
    }

    /// Freezes or thaws a unit (`FreezeUnit`/`ThawUnit`); systemd answers
    /// once the unit's cgroup is frozen or thawed.
    func setFrozen(unit: String, _ frozen: Bool, _ completion: @escaping (Result<Void, BusError>) -> Void) {
        do throws(BusError) {
            try bus.callAsync(try freezeCall(unit: unit, frozen), timeout: Self.timeout) { result in completion(result.map { _ in () }) }
        } catch {
            completion(.failure(error))
        }
    }

    /// Thaws a unit and waits for systemd's answer: only where no event
    /// loop runs (a start that gives up).
    func thawAndWait(unit: String) throws(BusError) {
        _ = try bus.call(try freezeCall(unit: unit, false), timeout: Self.timeout)
    }

    private func freezeCall(unit: String, _ frozen: Bool) throws(BusError) -> Message {
        let call = try bus.newMethodCall(
            destination: Self.busName, path: Self.path, interface: Self.interface, member: frozen ? "FreezeUnit" : "ThawUnit")
        try call.append(unit)
        return call
    }

    /// The `a(sv)` properties of a launched app's scope.
    static func scopeProperties(pid: Int32, description: String) -> BusValue {
        .array(element: "(sv)", [
            .structure([.string("PIDs"), .variant(.array(element: "u", [.uint32(UInt32(bitPattern: pid))]))]),
            .structure([.string("Description"), .variant(.string(description))]),
            // Garbage-collect the unit when the app is gone, even if it failed.
            .structure([.string("CollectMode"), .variant(.string("inactive-or-failed"))]),
        ])
    }
}
