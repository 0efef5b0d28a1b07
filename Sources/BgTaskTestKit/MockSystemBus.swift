import Foundation
import Synchronization

/// A private `dbus-daemon` that stands in for the system bus, with
/// python-dbusmock services on it (UPower, power-profiles-daemon …), for
/// tests of code that follows system services.
///
/// The bus is a session-type bus of the test's own; point code at it with
/// ``environment`` (`DBUS_SYSTEM_BUS_ADDRESS`) or ``address``. Every process
/// here is owned by this object and stopped by PID in ``stop()`` or, at the
/// latest, when it goes away. dbusmock runs under `/usr/bin/python3`, the
/// interpreter that sees Debian's `python3-dbusmock`.
///
/// State changes at run time go through dbusmock's own interfaces
/// (`org.freedesktop.DBus.Properties.Set`, `org.freedesktop.DBus.Mock.UpdateProperties`)
/// with `busctl`, so each emits `PropertiesChanged` as the real service would.
public final class MockSystemBus: @unchecked Sendable {
    /// A running mock: what it stands for and its process.
    private struct Running {
        let service: MockService
        let process: ChildProcess
    }

    private var bus: PrivateBus
    /// The bus's socket, when it listens at a path of the test's own (see ``crashAndRestart()``).
    private let socket: String?
    private let running = Mutex<[Running]>([])
    private let templates = Mutex<String?>(nil)
    /// How long to wait for a mock to own its name (python start-up is slow on a busy machine).
    private let startTimeout: Duration
    /// Mocks the bus starts itself when asked (D-Bus activation), and where
    /// their start scripts, `.service` files and PID files are.
    private let activatable: [MockService]
    private let activationDirectory: String?

    /// The bus's D-Bus address (`unix:path=…`).
    public var address: String { bus.address }

    /// Environment that makes this the system bus for a child process
    /// (sd-bus, GDBus and dbus-python all honour it).
    public var environment: [String: String] { ["DBUS_SYSTEM_BUS_ADDRESS": address] }

    /// Starts the bus and `services` on it, and returns once each owns its
    /// name and is set up.
    /// With `restartable`, the bus listens at a path of its own, so that
    /// ``crashAndRestart()`` can start it again at the same address.
    /// The bus starts each of `activatable` itself, the first time a client
    /// calls it or asks the bus to start it (as GeoClue on most systems).
    public init(
        services: [MockService] = [], activatable: [MockService] = [], startTimeout: Duration = .seconds(20), restartable: Bool = false
    ) throws {
        self.startTimeout = startTimeout
        socket = restartable ? FileManager.default.temporaryDirectory.appendingPathComponent("bgtaskd-system-\(UUID())").path : nil
        self.activatable = activatable
        activationDirectory = activatable.isEmpty ? nil
            : try Self.writeActivationFiles(for: activatable)
        bus = try PrivateBus(socket: socket, serviceDirectory: activationDirectory.map { $0 + "/services" })
        do {
            for service in services { try startService(service) }
        } catch {
            stop()
            throw error
        }
    }

    deinit { stop() }

    /// The services running now (those the bus started itself not included).
    public var services: [MockService] { running.withLock { $0.map(\.service) } }

    /// Whether the bus has started `service` (one of `activatable`) and it owns its name.
    public func wasActivated(_ service: MockService) throws -> Bool {
        guard let directory = activationDirectory, activatable.contains(service) else { return false }
        guard FileManager.default.fileExists(atPath: directory + "/\(service.busName).pid") else { return false }
        return try isOwned(service.busName)
    }

    /// For each service, a `.service` file whose `Exec` is a script that
    /// notes its PID (see ``stop()``) and runs the mock on the bus that
    /// started it. Returns the directory.
    private static func writeActivationFiles(for services: [MockService]) throws -> String {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("bgtaskd-activation-\(UUID())").path
        try FileManager.default.createDirectory(atPath: directory + "/services", withIntermediateDirectories: true)
        let templateDirectory = directory + "/templates"
        try FileManager.default.createDirectory(atPath: templateDirectory, withIntermediateDirectories: true)
        func quoted(_ word: String) -> String { "'" + word.replacingOccurrences(of: "'", with: "'\\''") + "'" }
        for service in services {
            let arguments = try service.dbusmockArguments { templateDirectory }
            let script = directory + "/start-\(service.busName).sh"
            try """
                #!/bin/sh
                echo $$ > \(quoted(directory + "/\(service.busName).pid"))
                DBUS_SYSTEM_BUS_ADDRESS="$DBUS_STARTER_ADDRESS" PYTHONDONTWRITEBYTECODE=1 exec /usr/bin/python3 -m dbusmock \(arguments.map(quoted).joined(separator: " "))

                """.write(toFile: script, atomically: true, encoding: .utf8)
            try "[D-BUS Service]\nName=\(service.busName)\nExec=/bin/sh \(script)\n"
                .write(toFile: directory + "/services/\(service.busName).service", atomically: true, encoding: .utf8)
        }
        return directory
    }

    /// Stops a mock the bus started (by the PID its script noted) and
    /// returns once it is gone: a service that exits. The bus starts it
    /// again when asked.
    public func stopActivated(_ service: MockService) {
        guard let directory = activationDirectory else { return }
        let pidFile = directory + "/\(service.busName).pid"
        guard let text = try? String(contentsOfFile: pidFile, encoding: .utf8),
              let pid = pid_t(text.trimmingCharacters(in: .whitespacesAndNewlines)), pid > 1 else { return }
        unlink(pidFile)
        kill(pid, SIGTERM)
        let deadline = ContinuousClock.now + .seconds(5)
        while kill(pid, 0) == 0, ContinuousClock.now < deadline { Thread.sleep(forTimeInterval: 0.02) }
        if kill(pid, 0) == 0 { kill(pid, SIGKILL) }
    }

    /// Stops every mock the bus started, and removes their files.
    private func stopAllActivated() {
        guard let directory = activationDirectory else { return }
        for service in activatable { stopActivated(service) }
        try? FileManager.default.removeItem(atPath: directory)
    }

    /// Starts one more mock (a service that appears while the code under
    /// test runs) and waits until it owns its name and is set up.
    public func startService(_ service: MockService) throws {
        if running.withLock({ $0.contains { $0.service.busName == service.busName } }) {
            throw TestKitError("\(service.busName) is already mocked on this bus")
        }
        let arguments = try service.dbusmockArguments(templateDirectory: templateDirectory)
        let process = try ChildProcess(
            "/usr/bin/python3", ["-m", "dbusmock"] + arguments,
            environment: environment.merging(["PYTHONDONTWRITEBYTECODE": "1"]) { $1 })
        running.withLock { $0.append(Running(service: service, process: process)) }
        do {
            try waitUntilOwned(service.busName, by: process)
            for call in service.setupCalls { try busctlChecked(call) }
        } catch {
            stopService(service)
            throw error
        }
    }

    /// Kills the bus daemon (SIGKILL, as a crash: no NameOwnerChanged goes
    /// out), stops the mocks, then starts the bus again at the same address
    /// with `services` on it. Needs `restartable`.
    public func crashAndRestart(with services: [MockService]) throws {
        guard let socket else { throw TestKitError("the bus was not made restartable") }
        bus.crash()
        let all = running.withLock { list -> [Running] in
            defer { list.removeAll() }
            return list
        }
        for mock in all { mock.process.stop() }
        unlink(socket)
        bus = try PrivateBus(socket: socket)
        for service in services { try startService(service) }
    }

    /// Stops the mock that owns `service`'s bus name (a service that goes away).
    /// Returns once the name is released.
    public func stopService(_ service: MockService) {
        let stopped = running.withLock { list -> [Running] in
            let matching = list.filter { $0.service.busName == service.busName }
            list.removeAll { $0.service.busName == service.busName }
            return matching
        }
        for mock in stopped { mock.process.stop() }
        // The bus releases a dead connection's names at once; wait for it, bounded.
        let deadline = ContinuousClock.now + .seconds(5)
        while !stopped.isEmpty, (try? isOwned(service.busName)) == true, ContinuousClock.now < deadline {
            Thread.sleep(forTimeInterval: 0.02)
        }
    }

    /// Stops (SIGSTOP) or continues (SIGCONT) the mock that owns `service`'s
    /// bus name: stopped, it keeps its name and answers no call, as a
    /// service that hangs.
    public func setHung(_ service: MockService, _ hung: Bool) throws {
        let mocks = running.withLock { $0.filter { $0.service.busName == service.busName } }
        guard !mocks.isEmpty else { throw TestKitError("\(service.busName) is not mocked on this bus") }
        for mock in mocks { mock.process.send(hung ? SIGSTOP : SIGCONT) }
    }

    /// Whether `name` has an owner on this bus now.
    public func isOwned(_ name: String) throws -> Bool {
        let result = try busctlChecked([
            "call", "org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus", "NameHasOwner", "s", name,
        ])
        return result.standardOutput.trimmingCharacters(in: .whitespacesAndNewlines) == "b true"
    }

    // MARK: Changing state at run time

    /// Sets UPower's `OnBattery` and its display device's charge (nil: no
    /// battery) on the running UPower mock, as UPower would on a power change:
    /// first the display device, then `OnBattery`, each with its own `PropertiesChanged`.
    public func setOnBattery(_ onBattery: Bool, percentage: Double?) throws {
        guard let upower = services.first(where: { if case .upower = $0 { true } else { false } }) else {
            throw TestKitError("no UPower mock is running on this bus")
        }
        try busctlChecked(MockService.displayDeviceUpdate(onBattery: onBattery, percentage: percentage))
        try busctlChecked([
            "set-property", upower.busName, upower.objectPath, upower.interface, "OnBattery", "b", onBattery ? "true" : "false",
        ])
        replace(upower, with: .upower(onBattery: onBattery, percentage: percentage))
    }

    /// Sets `ActiveProfile` on every running power-profiles-daemon mock
    /// (`org.freedesktop.DBus.Properties.Set`, which emits `PropertiesChanged`).
    public func setPowerProfile(_ profile: String) throws {
        let mocks = services.filter { if case .powerProfiles = $0 { true } else { false } }
        guard !mocks.isEmpty else { throw TestKitError("no power-profiles-daemon mock is running on this bus") }
        for mock in mocks {
            guard case .powerProfiles(_, let name) = mock else { continue }
            try busctlChecked(["set-property", mock.busName, mock.objectPath, mock.interface, "ActiveProfile", "s", profile])
            replace(mock, with: .powerProfiles(profile: profile, name: name))
        }
    }

    /// Sets NetworkManager's `Connectivity` and `Metered` on the running mock,
    /// each with its own `PropertiesChanged`, as NetworkManager would.
    public func setNetwork(connectivity: UInt32, metered: UInt32) throws {
        guard let manager = services.first(where: { if case .networkManager = $0 { true } else { false } }) else {
            throw TestKitError("no NetworkManager mock is running on this bus")
        }
        try busctlChecked(["set-property", manager.busName, manager.objectPath, manager.interface, "Metered", "u", "\(metered)"])
        try busctlChecked(["set-property", manager.busName, manager.objectPath, manager.interface, "Connectivity", "u", "\(connectivity)"])
        replace(manager, with: .networkManager(connectivity: connectivity, metered: metered))
    }

    /// Emits logind's `PrepareForSleep(sleeping)` from the running logind mock.
    public func emitPrepareForSleep(_ sleeping: Bool) throws {
        guard let logind = services.first(where: { if case .logind = $0 { true } else { false } }) else {
            throw TestKitError("no logind mock is running on this bus")
        }
        try busctlChecked([
            "call", logind.busName, logind.objectPath, "org.freedesktop.DBus.Mock", "EmitSignal", "sssav",
            logind.interface, "PrepareForSleep", "b", "1", "b", sleeping ? "true" : "false",
        ])
    }

    /// Moves the device of the running GeoClue2 mock: every started client
    /// whose thresholds the move passes gets a new `Location` and `LocationUpdated`.
    public func moveDevice(latitude: Double, longitude: Double, accuracy: Double) throws {
        let started = activatable.filter { (try? wasActivated($0)) == true }
        guard let geoclue = (services + started).first(where: { if case .geoclue = $0 { true } else { false } }) else {
            throw TestKitError("no GeoClue2 mock is running on this bus")
        }
        try busctlChecked([
            "call", geoclue.busName, geoclue.objectPath, "org.freedesktop.DBus.Mock", "Move", "ddd",
            "\(latitude)", "\(longitude)", "\(accuracy)",
        ])
        replace(geoclue, with: .geoclue(latitude: latitude, longitude: longitude, accuracy: accuracy))
    }

    /// Whether the GeoClue2 mock lets clients start: while not, `Start`
    /// fails with AccessDenied, as GeoClue's does when its agent denies location.
    public func allowLocation(_ allowed: Bool) throws {
        guard let geoclue = services.first(where: { if case .geoclue = $0 { true } else { false } }) else {
            throw TestKitError("no GeoClue2 mock is running on this bus")
        }
        try busctlChecked(["call", geoclue.busName, geoclue.objectPath, "org.freedesktop.DBus.Mock", "Allow", "b", allowed ? "true" : "false"])
    }

    /// The mock logind's inhibitors, as `ListInhibitors` returns them: (what, who, why, mode).
    public func inhibitors() throws -> [(what: String, who: String, why: String, mode: String)] {
        let result = try busctlChecked([
            "--json=short", "call", "org.freedesktop.login1", "/org/freedesktop/login1",
            "org.freedesktop.login1.Manager", "ListInhibitors",
        ])
        guard let object = try JSONSerialization.jsonObject(with: Data(result.standardOutput.utf8)) as? [String: Any],
              let data = object["data"] as? [[[Any]]], let list = data.first
        else { throw TestKitError("cannot read ListInhibitors' answer: \(result.standardOutput)") }
        return list.compactMap { entry in
            guard entry.count >= 4, let what = entry[0] as? String, let who = entry[1] as? String,
                  let why = entry[2] as? String, let mode = entry[3] as? String else { return nil }
            return (what, who, why, mode)
        }
    }

    // MARK: Tools

    /// `busctl --address=ADDRESS ARGS` against this bus.
    public func busctl(_ arguments: [String]) throws -> CommandResult {
        try CommandResult.run("/usr/bin/busctl", ["--address=\(address)"] + arguments, timeout: .seconds(15))
    }

    /// Stops every mock, then the bus, each by PID. Safe to call twice.
    public func stop() {
        let all = running.withLock { list -> [Running] in
            defer { list.removeAll() }
            return list
        }
        for mock in all { mock.process.stop() }
        stopAllActivated()
        bus.stop()
        if let socket { unlink(socket) }
        if let directory = templates.withLock({ dir -> String? in
            defer { dir = nil }
            return dir
        }) {
            try? FileManager.default.removeItem(atPath: directory)
        }
    }

    // MARK: Private

    @discardableResult
    private func busctlChecked(_ arguments: [String]) throws -> CommandResult {
        let result = try busctl(arguments)
        guard result.succeeded else {
            throw TestKitError("busctl \(arguments.joined(separator: " ")) failed: \(result)")
        }
        return result
    }

    /// Polls the bus until `name` is owned; fails early if the mock died.
    private func waitUntilOwned(_ name: String, by process: ChildProcess) throws {
        let deadline = ContinuousClock.now + startTimeout
        while ContinuousClock.now < deadline {
            if try isOwned(name) { return }
            guard process.isRunning else {
                throw TestKitError("the dbusmock for \(name) exited: \(process.standardError)")
            }
            Thread.sleep(forTimeInterval: 0.05)
        }
        throw TestKitError("the dbusmock for \(name) did not own its name within \(startTimeout): \(process.standardError)")
    }

    /// A directory for our own dbusmock templates, made on first use.
    private func templateDirectory() throws -> String {
        try templates.withLock { dir in
            if let dir { return dir }
            let path = FileManager.default.temporaryDirectory
                .appendingPathComponent("bgtaskd-dbusmock-\(UUID().uuidString)").path
            try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
            dir = path
            return path
        }
    }

    /// Records the state a mock was moved to.
    private func replace(_ old: MockService, with new: MockService) {
        running.withLock { list in
            guard let index = list.firstIndex(where: { $0.service == old }) else { return }
            list[index] = Running(service: new, process: list[index].process)
        }
    }
}
