import Foundation

/// A system service that ``MockSystemBus`` can stand in for with
/// python-dbusmock, and the state it starts in.
///
/// More services (`networkManager`, `geoclue`) are meant to join as
/// further cases: each needs only its ``busName``, ``objectPath`` and launch
/// arguments below.
public enum MockService: Sendable, Equatable, CustomStringConvertible {
    /// UPower (`org.freedesktop.UPower`, dbusmock's `upower` template) with
    /// `OnBattery` and a display device at `percentage` percent; a nil
    /// percentage means no battery (the display device is not present).
    case upower(onBattery: Bool, percentage: Double?)
    /// power-profiles-daemon with `ActiveProfile` = `profile`
    /// (`power-saver`, `balanced` or `performance`) under one of its bus names.
    case powerProfiles(profile: String, name: PowerProfilesName = .legacy)
    /// A notification server (`org.freedesktop.Notifications`, dbusmock's
    /// `notification_daemon` template). It is a session service: here it sits
    /// on the mock bus, so a daemon meant to use it must be on that bus too.
    case notificationDaemon
    /// logind (`org.freedesktop.login1`, dbusmock's `logind` template), with
    /// `InhibitDelayMaxUSec` added (the template has none). Its `Inhibit`
    /// hands out a real fd and lists the lock until the fd is closed; it never
    /// emits `PrepareForSleep` itself (``MockSystemBus/emitPrepareForSleep(_:)``).
    case logind(inhibitDelayMaxUSec: UInt64 = 5_000_000)
    /// GeoClue2 (`org.freedesktop.GeoClue2`, a template of our own: dbusmock
    /// ships none) with the device at `latitude`, `longitude` (`accuracy` m).
    case geoclue(latitude: Double, longitude: Double, accuracy: Double)
    /// NetworkManager (dbusmock's template) with its `Connectivity` (4 full)
    /// and `Metered` (1 yes, 2 no, 3 guess-yes …), which the template lacks and the setup adds.
    case networkManager(connectivity: UInt32, metered: UInt32)

    /// The bus names power-profiles-daemon has had.
    public enum PowerProfilesName: Sendable, Equatable, CaseIterable {
        /// `net.hadess.PowerProfiles` at `/net/hadess/PowerProfiles`: before
        /// 0.20, and what Debian 12's python3-dbusmock (0.28.7) template provides.
        case legacy
        /// `org.freedesktop.UPower.PowerProfiles` at
        /// `/org/freedesktop/UPower/PowerProfiles`: 0.20 and later. Mocked
        /// with a template of our own, as the same template in every dbusmock version.
        case current
    }

    /// The well-known name the mock owns.
    public var busName: String {
        switch self {
        case .upower: "org.freedesktop.UPower"
        case .powerProfiles(_, .legacy): "net.hadess.PowerProfiles"
        case .powerProfiles(_, .current): "org.freedesktop.UPower.PowerProfiles"
        case .notificationDaemon: "org.freedesktop.Notifications"
        case .logind: "org.freedesktop.login1"
        case .geoclue: "org.freedesktop.GeoClue2"
        case .networkManager: "org.freedesktop.NetworkManager"
        }
    }

    /// The mock's main object.
    public var objectPath: String {
        switch self {
        case .upower: "/org/freedesktop/UPower"
        case .powerProfiles(_, .legacy): "/net/hadess/PowerProfiles"
        case .powerProfiles(_, .current): "/org/freedesktop/UPower/PowerProfiles"
        case .notificationDaemon: "/org/freedesktop/Notifications"
        case .logind: "/org/freedesktop/login1"
        case .geoclue: "/org/freedesktop/GeoClue2/Manager"
        case .networkManager: "/org/freedesktop/NetworkManager"
        }
    }

    /// The main object's own interface (where its properties are).
    public var interface: String {
        switch self {
        case .upower: "org.freedesktop.UPower"
        case .powerProfiles(_, .legacy): "net.hadess.PowerProfiles"
        case .powerProfiles(_, .current): "org.freedesktop.UPower.PowerProfiles"
        case .notificationDaemon: "org.freedesktop.Notifications"
        case .logind: "org.freedesktop.login1.Manager"
        case .geoclue: "org.freedesktop.GeoClue2.Manager"
        case .networkManager: "org.freedesktop.NetworkManager"
        }
    }

    public var description: String {
        switch self {
        case .upower(let onBattery, let percentage):
            "UPower (on battery: \(onBattery), battery: \(percentage.map { "\($0) %" } ?? "none"))"
        case .powerProfiles(let profile, _): "power-profiles-daemon as \(busName) (\(profile))"
        case .notificationDaemon: "notification daemon"
        case .logind(let delay): "logind (InhibitDelayMaxUSec \(delay))"
        case .geoclue(let latitude, let longitude, let accuracy): "GeoClue2 at \(latitude),\(longitude) (±\(accuracy) m)"
        case .networkManager(let connectivity, let metered): "NetworkManager (connectivity \(connectivity), metered \(metered))"
        }
    }

    /// `python3 -m dbusmock` arguments; `templateDirectory` holds our own templates.
    func dbusmockArguments(templateDirectory: () throws -> String) throws -> [String] {
        switch self {
        case .upower(let onBattery, _):
            return ["--system", "-t", "upower", "-p", try Self.json(["OnBattery": onBattery])]
        case .powerProfiles(let profile, .legacy):
            return ["--system", "-t", "power_profiles_daemon", "-p", try Self.json(["ActiveProfile": profile])]
        case .powerProfiles(let profile, .current):
            let template = try templateDirectory() + "/upower_power_profiles_daemon.py"
            if !FileManager.default.fileExists(atPath: template) {
                try Self.currentPowerProfilesTemplate.write(toFile: template, atomically: true, encoding: .utf8)
            }
            return ["--system", "-t", template, "-p", try Self.json(["ActiveProfile": profile])]
        case .notificationDaemon:
            // The template says "session bus"; --system puts it on the mock bus.
            return ["--system", "-t", "notification_daemon"]
        case .logind:
            return ["--system", "-t", "logind"]
        case .geoclue(let latitude, let longitude, let accuracy):
            let template = try templateDirectory() + "/geoclue2.py"
            if !FileManager.default.fileExists(atPath: template) {
                try Self.geoclueTemplate.write(toFile: template, atomically: true, encoding: .utf8)
            }
            return ["--system", "-t", template, "-p", try Self.json(["Latitude": latitude, "Longitude": longitude, "Accuracy": accuracy])]
        case .networkManager:
            return ["--system", "-t", "networkmanager"]
        }
    }

    /// `busctl` argument lists that finish setting the mock up once its name is owned.
    var setupCalls: [[String]] {
        switch self {
        case .upower(let onBattery, let percentage):
            [Self.displayDeviceUpdate(onBattery: onBattery, percentage: percentage)]
        case .logind(let delay):
            [[
                "call", busName, objectPath, "org.freedesktop.DBus.Mock", "AddProperty", "ssv", interface,
                "InhibitDelayMaxUSec", "t", "\(delay)",
            ]]
        case .networkManager(let connectivity, let metered):
            [
                ["call", busName, objectPath, "org.freedesktop.DBus.Mock", "AddProperty", "ssv", interface, "Metered", "u", "\(metered)"],
                ["set-property", busName, objectPath, interface, "Connectivity", "u", "\(connectivity)"],
            ]
        case .powerProfiles, .notificationDaemon, .geoclue:
            []
        }
    }

    /// Sets UPower's display device in one `PropertiesChanged` (dbusmock's
    /// `org.freedesktop.DBus.Mock.UpdateProperties` on the device object).
    static func displayDeviceUpdate(onBattery: Bool, percentage: Double?) -> [String] {
        // UPower: Type 2 = battery; State 1 charging, 2 discharging, 4 fully charged.
        let present = percentage != nil
        let type = present ? "2" : "0"
        let state = !present ? "0" : onBattery ? "2" : (percentage ?? 0) >= 100 ? "4" : "1"
        return [
            "call", "org.freedesktop.UPower", "/org/freedesktop/UPower/devices/DisplayDevice",
            "org.freedesktop.DBus.Mock", "UpdateProperties", "sa{sv}", "org.freedesktop.UPower.Device",
            "4", "Type", "u", type, "State", "u", state, "Percentage", "d", "\(percentage ?? 0)",
            "IsPresent", "b", present ? "true" : "false",
        ]
    }

    private static func json(_ parameters: [String: Any]) throws -> String {
        String(decoding: try JSONSerialization.data(withJSONObject: parameters, options: [.sortedKeys]), as: UTF8.self)
    }

    /// power-profiles-daemon ≥ 0.20 under `org.freedesktop.UPower.PowerProfiles`:
    /// the properties of Debian's `power_profiles_daemon` template, under the new names.
    static let currentPowerProfilesTemplate = """
        '''power-profiles-daemon >= 0.20 mock template (org.freedesktop.UPower.PowerProfiles), from bgtaskd's tests'''
        import dbus

        BUS_NAME = 'org.freedesktop.UPower.PowerProfiles'
        MAIN_OBJ = '/org/freedesktop/UPower/PowerProfiles'
        MAIN_IFACE = 'org.freedesktop.UPower.PowerProfiles'
        SYSTEM_BUS = True


        def load(mock, parameters):
            profiles = [dbus.Dictionary({'Profile': name, 'Driver': 'dbusmock'}, signature='sv')
                        for name in ('power-saver', 'balanced', 'performance')]
            mock.AddProperties(MAIN_IFACE, dbus.Dictionary({
                'ActiveProfile': parameters.get('ActiveProfile', 'balanced'),
                'PerformanceDegraded': parameters.get('PerformanceDegraded', ''),
                'Profiles': dbus.Array(profiles, signature='a{sv}'),
                'Actions': dbus.Array([], signature='s'),
                'ActiveProfileHolds': dbus.Array([], signature='a{sv}'),
            }, signature='sv'))

        """
}
