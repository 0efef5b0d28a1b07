import BgTaskPluginKit
import BgTaskTransferCore

/// What decides when transfers may run: NetworkManager's `Connectivity` and
/// `Metered`, watched here on the system bus, and the power (on battery,
/// power saver) as the daemon follows it (``PluginHost/power``), read again
/// at each ``powerChanged()``. A service that is absent leaves its part
/// unknown, which holds nothing back; one that appears later is read then.
final class SystemConditions {
    private let host: PluginHost
    private(set) var current = TransferConditions()
    /// Whether the sources are followed on the system bus now (not before
    /// ``start()``, nor after the bus was lost until it is back).
    private var following = false
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
    ]

    init(host: PluginHost) {
        self.host = host
    }

    func start() {
        powerChanged()
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
                    guard let self else { return }
                    // No message: the system bus went away, and the service with it.
                    guard let message else {
                        self.following = false
                        return self.forget(source)
                    }
                    _ = try? message.readString()
                    _ = try? message.readString()
                    if let owner = try? message.readString(), !owner.isEmpty { self.read(source) } else { self.forget(source) }
                }
            } catch {
                // No system bus: nothing there to wait for, and nothing more to try.
                host.log(.info, "cannot watch the network (\(error.message)): transfers do not wait for it")
                return
            }
            read(source)
        }
        following = true
    }

    /// The system bus is back after it was lost: the sources are followed
    /// and read again.
    func systemBusBack() {
        guard !following else { return }
        host.log(.info, "the system bus is back: following the network again")
        start()
    }

    /// Takes the daemon's power state again (it may have changed: the host
    /// said `refreshChanged`).
    func powerChanged() {
        let power = host.power
        var next = current
        next.onBattery = power?.onBattery
        next.powerSaver = power?.powerSaver ?? false
        update(next)
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
