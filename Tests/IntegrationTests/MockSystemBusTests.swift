import BgTaskTestKit
import Foundation
import Testing

/// The mocked system services the daemon's power, sleep and notification
/// tests stand on: python-dbusmock on a private bus, changed at run time.
@Suite struct MockSystemBusTests {
    /// `busctl get-property` on the mock bus, as busctl prints it (`b true`, `d 15`).
    private func property(_ bus: MockSystemBus, _ service: String, _ path: String, _ interface: String, _ name: String) throws -> String {
        let result = try bus.busctl(["get-property", service, path, interface, name])
        #expect(result.succeeded, "\(result)")
        return result.standardOutput.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// Starts `dbus-monitor` on the bus for PropertiesChanged, and waits until it listens.
    private func monitor(_ bus: MockSystemBus) throws -> ChildProcess {
        let monitor = try ChildProcess(
            "/usr/bin/dbus-monitor", ["--address", bus.address, "type='signal',member='PropertiesChanged'"])
        // In monitor mode dbus-monitor first sees its own name being taken away.
        #expect(monitor.waitForLine(where: { $0.contains("NameLost") }) != nil, "\(monitor.standardError)")
        return monitor
    }

    @Test func servesUPowerAndBothPowerProfilesNames() throws {
        let bus = try MockSystemBus(services: [
            .upower(onBattery: true, percentage: 42),
            .powerProfiles(profile: "power-saver"),
            .powerProfiles(profile: "power-saver", name: .current),
        ])
        defer { bus.stop() }
        #expect(bus.environment == ["DBUS_SYSTEM_BUS_ADDRESS": bus.address])
        for name in ["org.freedesktop.UPower", "net.hadess.PowerProfiles", "org.freedesktop.UPower.PowerProfiles"] {
            #expect(try bus.isOwned(name), "\(name)")
        }
        let display = "/org/freedesktop/UPower/devices/DisplayDevice"
        #expect(try property(bus, "org.freedesktop.UPower", "/org/freedesktop/UPower", "org.freedesktop.UPower", "OnBattery") == "b true")
        #expect(try property(bus, "org.freedesktop.UPower", display, "org.freedesktop.UPower.Device", "Percentage") == "d 42")
        #expect(try property(bus, "org.freedesktop.UPower", display, "org.freedesktop.UPower.Device", "IsPresent") == "b true")
        #expect(try property(bus, "net.hadess.PowerProfiles", "/net/hadess/PowerProfiles", "net.hadess.PowerProfiles", "ActiveProfile")
            == "s \"power-saver\"")
        #expect(try property(
            bus, "org.freedesktop.UPower.PowerProfiles", "/org/freedesktop/UPower/PowerProfiles",
            "org.freedesktop.UPower.PowerProfiles", "ActiveProfile") == "s \"power-saver\"")
    }

    @Test func changesEmitPropertiesChanged() throws {
        let bus = try MockSystemBus(services: [
            .upower(onBattery: false, percentage: 80),
            .powerProfiles(profile: "balanced"),
            .powerProfiles(profile: "balanced", name: .current),
        ])
        defer { bus.stop() }
        let watcher = try monitor(bus)
        defer { watcher.stop() }

        try bus.setOnBattery(true, percentage: 15)
        try bus.setPowerProfile("power-saver")
        #expect(bus.services.contains(.upower(onBattery: true, percentage: 15)))
        #expect(bus.services.contains(.powerProfiles(profile: "power-saver", name: .current)))

        let display = "/org/freedesktop/UPower/devices/DisplayDevice"
        #expect(try property(bus, "org.freedesktop.UPower", display, "org.freedesktop.UPower.Device", "Percentage") == "d 15")
        #expect(try property(bus, "org.freedesktop.UPower", "/org/freedesktop/UPower", "org.freedesktop.UPower", "OnBattery") == "b true")

        // One PropertiesChanged per object: display device, UPower, each profiles name.
        let deadline = ContinuousClock.now + .seconds(10)
        var text = ""
        while ContinuousClock.now < deadline {
            text = watcher.lines.joined(separator: "\n")
            if text.components(separatedBy: "member=PropertiesChanged").count - 1 >= 4 { break }
            Thread.sleep(forTimeInterval: 0.02)
        }
        #expect(text.components(separatedBy: "member=PropertiesChanged").count - 1 == 4, "\(text)")
        for path in [display, "/org/freedesktop/UPower", "/net/hadess/PowerProfiles", "/org/freedesktop/UPower/PowerProfiles"] {
            #expect(text.contains("path=\(path);"), "\(path): \(text)")
        }
        #expect(text.contains("double 15"), "\(text)")
        #expect(text.contains("string \"power-saver\""), "\(text)")
    }

    @Test func noBatteryMeansNoDisplayDevice() throws {
        let bus = try MockSystemBus(services: [.upower(onBattery: false, percentage: nil)])
        defer { bus.stop() }
        #expect(try property(
            bus, "org.freedesktop.UPower", "/org/freedesktop/UPower/devices/DisplayDevice", "org.freedesktop.UPower.Device", "IsPresent")
            == "b false")
    }

    /// The GeoClue2 template: a client started reports at once; a move
    /// inside its distance threshold reports nothing, one beyond it reports
    /// a new Location with the new position.
    @Test func geoclueReportsMovesPastTheThresholds() throws {
        let bus = try MockSystemBus(services: [.geoclue(latitude: 48.85, longitude: 2.35, accuracy: 30)])
        defer { bus.stop() }
        let watcher = try ChildProcess("/usr/bin/dbus-monitor", ["--address", bus.address, "type='signal',member='LocationUpdated'"])
        defer { watcher.stop() }
        #expect(watcher.waitForLine(where: { $0.contains("NameLost") }) != nil)
        let manager = "/org/freedesktop/GeoClue2/Manager", client = "/org/freedesktop/GeoClue2/Client/1"
        let got = try bus.busctl(["call", "org.freedesktop.GeoClue2", manager, "org.freedesktop.GeoClue2.Manager", "GetClient"])
        #expect(got.standardOutput.contains(client), "\(got)")
        _ = try bus.busctl(["set-property", "org.freedesktop.GeoClue2", client, "org.freedesktop.GeoClue2.Client", "DistanceThreshold", "u", "100"])
        _ = try bus.busctl(["call", "org.freedesktop.GeoClue2", client, "org.freedesktop.GeoClue2.Client", "Start"])
        try bus.moveDevice(latitude: 48.8501, longitude: 2.35, accuracy: 20)  // 11 m: below the threshold
        try bus.moveDevice(latitude: 48.86, longitude: 2.35, accuracy: 20)
        #expect(try property(bus, "org.freedesktop.GeoClue2", client, "org.freedesktop.GeoClue2.Client", "Location")
            == #"o "/org/freedesktop/GeoClue2/Location/2""#)
        #expect(try property(bus, "org.freedesktop.GeoClue2", "/org/freedesktop/GeoClue2/Location/2", "org.freedesktop.GeoClue2.Location", "Latitude")
            == "d 48.86")
        let deadline = ContinuousClock.now + .seconds(10)
        while watcher.lines.filter({ $0.contains("member=LocationUpdated") }).count < 2, ContinuousClock.now < deadline {
            Thread.sleep(forTimeInterval: 0.02)
        }
        #expect(watcher.lines.filter { $0.contains("member=LocationUpdated") }.count == 2, "\(watcher.lines)")
    }

    @Test func servicesComeAndGo() throws {
        let bus = try MockSystemBus(services: [])
        defer { bus.stop() }
        #expect(try !bus.isOwned("net.hadess.PowerProfiles"))
        #expect(throws: (any Error).self) { try bus.setPowerProfile("power-saver") }
        #expect(throws: (any Error).self) { try bus.setOnBattery(true, percentage: 10) }

        try bus.startService(.powerProfiles(profile: "performance"))
        #expect(try bus.isOwned("net.hadess.PowerProfiles"))
        #expect(throws: (any Error).self) { try bus.startService(.powerProfiles(profile: "balanced")) }
        bus.stopService(.powerProfiles(profile: "performance"))
        #expect(try !bus.isOwned("net.hadess.PowerProfiles"))
        #expect(bus.services.isEmpty)
    }

    @Test func notificationDaemonAnswers() throws {
        let bus = try MockSystemBus(services: [.notificationDaemon])
        defer { bus.stop() }
        let result = try bus.busctl([
            "call", "org.freedesktop.Notifications", "/org/freedesktop/Notifications", "org.freedesktop.Notifications",
            "GetServerInformation",
        ])
        #expect(result.succeeded, "\(result)")
        #expect(result.standardOutput.contains("mock-notify"), "\(result)")
    }

    @Test func stopEndsEverything() throws {
        let bus = try MockSystemBus(services: [.upower(onBattery: false, percentage: 100)])
        let address = bus.address
        bus.stop()
        bus.stop()
        let result = try CommandResult.run("/usr/bin/busctl", ["--address=\(address)", "list"])
        #expect(!result.succeeded, "\(result)")
    }
}
