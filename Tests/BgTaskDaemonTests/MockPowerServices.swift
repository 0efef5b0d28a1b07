import Foundation
import ServiceSpawn
import Glibc
import SDBus

/// A private `dbus-daemon` standing in for the system bus, with python-dbusmock
/// mocks of UPower and power-profiles-daemon on it.
///
/// A minimal copy of `BgTaskTestKit.MockSystemBus` for this target, which does
/// not depend on BgTaskTestKit: once it does, the tests can use that instead.
/// Every process is started with a clean signal state, owned by PID and
/// stopped in ``stop()`` or when this object goes away. Use it from one thread.
final class MockPowerServices {
    /// A process this object started.
    private struct Spawned {
        let pid: pid_t
        let name: String
    }

    /// The bus names power-profiles-daemon has had, with their object paths.
    enum ProfilesName: String {
        case legacy = "net.hadess.PowerProfiles"
        case current = "org.freedesktop.UPower.PowerProfiles"

        var path: String { "/" + rawValue.replacingOccurrences(of: ".", with: "/") }
    }

    let directory: String
    let address: String
    private var daemon: Spawned?
    private var mocks: [String: Spawned] = [:]
    private var client: Bus?

    /// Starts the bus and waits until it accepts connections.
    init() throws {
        directory = NSTemporaryDirectory() + "/bgtaskd-power-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        address = "unix:path=\(directory)/system_bus_socket"
        daemon = try Self.spawn(
            "/usr/bin/dbus-daemon", ["--session", "--nofork", "--address=\(address)"], log: directory + "/dbus-daemon.log")
        let deadline = ContinuousClock.now + .seconds(10)
        while client == nil {
            client = try? Bus.open(.address(address), description: "test-client")
            if client == nil {
                guard ContinuousClock.now < deadline else { throw MockError("dbus-daemon did not start: \(log("dbus-daemon"))") }
                Thread.sleep(forTimeInterval: 0.02)
            }
        }
    }

    deinit { stop() }

    // MARK: Services

    /// Starts UPower (dbusmock's `upower` template) and sets its display device.
    func startUPower(onBattery: Bool, percentage: Double?) throws {
        try startMock("org.freedesktop.UPower", ["-t", "upower", "-p", "{\"OnBattery\": \(onBattery)}"])
        try setDisplayDevice(onBattery: onBattery, percentage: percentage)
    }

    /// Starts power-profiles-daemon under one of its names with `profile` active.
    func startPowerProfiles(_ profile: String, name: ProfilesName = .legacy) throws {
        let parameters = "{\"ActiveProfile\": \"\(profile)\"}"
        switch name {
        case .legacy:
            try startMock(name.rawValue, ["-t", "power_profiles_daemon", "-p", parameters])
        case .current:
            // Debian 12's dbusmock (0.28.7) only has the old name: a template of our own.
            let template = directory + "/upower_power_profiles_daemon.py"
            try Self.currentProfilesTemplate.write(toFile: template, atomically: true, encoding: .utf8)
            try startMock(name.rawValue, ["-t", template, "-p", parameters])
        }
    }

    /// Stops one mock (the service leaves the bus) and waits until its name is free.
    func stopMock(_ name: String) throws {
        guard let mock = mocks.removeValue(forKey: name) else { return }
        Self.terminate(mock)
        let deadline = ContinuousClock.now + .seconds(5)
        while try isOwned(name) {
            guard ContinuousClock.now < deadline else { throw MockError("\(name) is still owned after its mock stopped") }
            Thread.sleep(forTimeInterval: 0.02)
        }
    }

    // MARK: Changing state

    /// UPower's display device first, then `OnBattery`, as UPower does on a power change.
    func setOnBattery(_ onBattery: Bool, percentage: Double?) throws {
        try setDisplayDevice(onBattery: onBattery, percentage: percentage)
        try setProperty("org.freedesktop.UPower", "/org/freedesktop/UPower", "org.freedesktop.UPower", "OnBattery", .bool(onBattery))
    }

    /// Sets `ActiveProfile` on every power-profiles-daemon mock.
    func setPowerProfile(_ profile: String) throws {
        for name in [ProfilesName.legacy, .current] where mocks[name.rawValue] != nil {
            try setProperty(name.rawValue, name.path, name.rawValue, "ActiveProfile", .string(profile))
        }
    }

    /// Stops the mocks, then the bus, each by PID. Safe to call twice.
    func stop() {
        client = nil
        for mock in mocks.values { Self.terminate(mock) }
        mocks.removeAll()
        if let daemon { Self.terminate(daemon) }
        daemon = nil
        try? FileManager.default.removeItem(atPath: directory)
    }

    // MARK: Bus calls (blocking, from the test's thread)

    func isOwned(_ name: String) throws -> Bool {
        let call = try bus().newMethodCall(
            destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus", interface: "org.freedesktop.DBus", member: "NameHasOwner")
        try call.append(name)
        return try bus().call(call, timeout: 5_000_000).readBool()
    }

    /// `org.freedesktop.DBus.Properties.Set`: dbusmock stores the value and emits `PropertiesChanged`.
    private func setProperty(_ service: String, _ path: String, _ interface: String, _ name: String, _ value: BusValue) throws {
        let call = try bus().newMethodCall(
            destination: service, path: path, interface: "org.freedesktop.DBus.Properties", member: "Set")
        try call.append(interface)
        try call.append(name)
        try call.append(value: .variant(value))
        _ = try bus().call(call, timeout: 5_000_000)
    }

    /// dbusmock's `org.freedesktop.DBus.Mock.UpdateProperties` on UPower's display
    /// device: every property in one `PropertiesChanged`.
    private func setDisplayDevice(onBattery: Bool, percentage: Double?) throws {
        let present = percentage != nil
        // UPower: Type 2 = battery; State 1 charging, 2 discharging, 4 fully charged.
        let state: UInt32 = !present ? 0 : onBattery ? 2 : (percentage ?? 0) >= 100 ? 4 : 1
        let values: [(String, BusValue)] = [
            ("Type", .uint32(present ? 2 : 0)), ("State", .uint32(state)),
            ("Percentage", .double(percentage ?? 0)), ("IsPresent", .bool(present)),
        ]
        let call = try bus().newMethodCall(
            destination: "org.freedesktop.UPower", path: "/org/freedesktop/UPower/devices/DisplayDevice",
            interface: "org.freedesktop.DBus.Mock", member: "UpdateProperties")
        try call.append("org.freedesktop.UPower.Device")
        try call.append(value: .dictionary(key: "s", value: "v", values.map { .init(key: .string($0.0), value: .variant($0.1)) }))
        _ = try bus().call(call, timeout: 5_000_000)
    }

    private func bus() throws -> Bus {
        guard let client else { throw MockError("the mock bus is stopped") }
        return client
    }

    // MARK: Processes

    private func startMock(_ name: String, _ arguments: [String]) throws {
        guard mocks[name] == nil else { throw MockError("\(name) is already mocked") }
        let mock = try Self.spawn(
            "/usr/bin/python3", ["-m", "dbusmock", "--system"] + arguments, log: directory + "/\(name).log",
            environment: ["DBUS_SYSTEM_BUS_ADDRESS": address, "PYTHONDONTWRITEBYTECODE": "1"])
        mocks[name] = mock
        let deadline = ContinuousClock.now + .seconds(20)
        while try !isOwned(name) {
            var status: Int32 = 0
            if waitpid(mock.pid, &status, WNOHANG) == mock.pid {
                mocks[name] = nil
                throw MockError("the dbusmock for \(name) exited: \(log(name))")
            }
            guard ContinuousClock.now < deadline else { throw MockError("\(name) was not owned in time: \(log(name))") }
            Thread.sleep(forTimeInterval: 0.05)
        }
    }

    private func log(_ name: String) -> String {
        (try? String(contentsOfFile: directory + "/\(name).log", encoding: .utf8)) ?? ""
    }

    /// Started with ``ServiceSpawn``: nothing blocked, every signal at its
    /// default; stdout and stderr go to `log`.
    private static func spawn(
        _ executable: String, _ arguments: [String], log: String, environment: [String: String] = [:]
    ) throws -> Spawned {
        do {
            let pid = try ServiceSpawn.start(path: executable, arguments: arguments, environment: environment, output: .log(log)).pid
            return Spawned(pid: pid, name: executable)
        } catch {
            throw MockError(error.description)
        }
    }

    /// SIGTERM, then SIGKILL after 5 s; reaps the process.
    private static func terminate(_ process: Spawned) {
        kill(process.pid, SIGTERM)
        let deadline = ContinuousClock.now + .seconds(5)
        var status: Int32 = 0
        while ContinuousClock.now < deadline {
            let r = waitpid(process.pid, &status, WNOHANG)
            if r == process.pid || (r < 0 && errno == ECHILD) { return }
            Thread.sleep(forTimeInterval: 0.01)
        }
        kill(process.pid, SIGKILL)
        while waitpid(process.pid, &status, 0) < 0 && errno == EINTR {}
    }

    /// power-profiles-daemon ≥ 0.20 (`org.freedesktop.UPower.PowerProfiles`).
    private static let currentProfilesTemplate = """
        import dbus
        BUS_NAME = 'org.freedesktop.UPower.PowerProfiles'
        MAIN_OBJ = '/org/freedesktop/UPower/PowerProfiles'
        MAIN_IFACE = 'org.freedesktop.UPower.PowerProfiles'
        SYSTEM_BUS = True


        def load(mock, parameters):
            mock.AddProperties(MAIN_IFACE, dbus.Dictionary({
                'ActiveProfile': parameters.get('ActiveProfile', 'balanced'),
                'PerformanceDegraded': '',
                'Actions': dbus.Array([], signature='s'),
            }, signature='sv'))

        """
}

/// A failure of ``MockPowerServices``.
struct MockError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}
