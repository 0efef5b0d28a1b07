import BgTaskPluginKit
import BgTaskTransferCore

/// Watches what decides when transfers may run, on the system bus:
/// NetworkManager's `Connectivity` and `Metered`, UPower's `OnBattery`,
/// power-profiles-daemon's `ActiveProfile`. A service that is absent leaves
/// its part unknown, which holds nothing back; one that appears later is read then.
final class SystemConditions {
    private let host: PluginHost
    private(set) var current = TransferConditions()
    /// Called on the loop when ``current`` changed, with what it was before.
    var changed: ((_ before: TransferConditions) -> Void)?

    private struct Source {
        var service: String
        var path: String
        var interface: String
        var properties: [String]
    }

    private static let sources = [
        Source(service: "org.freedesktop.NetworkManager", path: "/org/freedesktop/NetworkManager",
               interface: "org.freedesktop.NetworkManager", properties: ["Connectivity", "Metered"]),
        Source(service: "org.freedesktop.UPower", path: "/org/freedesktop/UPower",
               interface: "org.freedesktop.UPower", properties: ["OnBattery"]),
        Source(service: "org.freedesktop.UPower.PowerProfiles", path: "/org/freedesktop/UPower/PowerProfiles",
               interface: "org.freedesktop.UPower.PowerProfiles", properties: ["ActiveProfile"]),
        // power-profiles-daemon before 0.20 has only its old name.
        Source(service: "net.hadess.PowerProfiles", path: "/net/hadess/PowerProfiles",
               interface: "net.hadess.PowerProfiles", properties: ["ActiveProfile"]),
    ]

    init(host: PluginHost) {
        self.host = host
    }

    func start() {
        for source in Self.sources {
            do {
                _ = try host.subscribe(on: .system, sender: source.service, path: source.path,
                                       interface: "org.freedesktop.DBus.Properties", member: "PropertiesChanged", arg0: source.interface) {
                    [weak self] message in
                    guard let self, let message else { return }
                    _ = try? message.readString()
                    if let changed = try? message.readOptions() {
                        for (name, value) in changed { self.set(name, value) }
                    }
                }
                // A service that starts (or restarts) later is read again.
                _ = try host.subscribe(on: .system, sender: "org.freedesktop.DBus", path: "/org/freedesktop/DBus",
                                       interface: "org.freedesktop.DBus", member: "NameOwnerChanged", arg0: source.service) {
                    [weak self] message in
                    guard let self, let message else { return }
                    _ = try? message.readString()
                    _ = try? message.readString()
                    if let owner = try? message.readString(), !owner.isEmpty { self.read(source) } else { self.forget(source) }
                }
            } catch {
                // No system bus: nothing there to wait for, and nothing more to try.
                host.log(.info, "cannot watch the network and power (\(error.message)): transfers do not wait for them")
                return
            }
            read(source)
        }
    }

    private func read(_ source: Source) {
        for property in source.properties {
            do {
                try host.call(source.service, path: source.path, interface: "org.freedesktop.DBus.Properties", member: "Get",
                              on: .system, timeout: 10) { (call) throws(ModeError) in
                    try call.append(source.interface)
                    try call.append(property)
                } reply: { [weak self] result in
                    guard let self, case .success(let reply) = result, let value = try? reply.readVariant() else { return }
                    self.set(property, value)
                }
            } catch {
                host.log(.debug, "cannot read \(source.service) \(property): \(error.message)")
            }
        }
    }

    private func forget(_ source: Source) {
        var next = current
        for property in source.properties {
            switch property {
            case "Connectivity": next.connectivity = nil
            case "Metered": next.metered = nil
            case "OnBattery": next.onBattery = nil
            case "ActiveProfile": next.powerSaver = false
            default: break
            }
        }
        update(next)
    }

    private func set(_ property: String, _ value: PluginValue) {
        var next = current
        switch (property, value) {
        case ("Connectivity", .uint(let number)): next.connectivity = UInt32(truncatingIfNeeded: number)
        case ("Metered", .uint(let number)): next.metered = UInt32(truncatingIfNeeded: number)
        case ("OnBattery", .bool(let flag)): next.onBattery = flag
        case ("ActiveProfile", .string(let profile)): next.powerSaver = profile == "power-saver"
        default: return
        }
        update(next)
    }

    private func update(_ next: TransferConditions) {
        guard next != current else { return }
        let before = current
        current = next
        host.log(.info, "conditions for transfers: connectivity \(next.connectivity.map(String.init) ?? "unknown"), metered \(next.metered.map(String.init) ?? "unknown"), on battery \(next.onBattery.map(String.init) ?? "unknown"), power saver \(next.powerSaver)")
        changed?(before)
    }
}
