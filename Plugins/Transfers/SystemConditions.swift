import BgTaskPluginKit
import BgTaskTransferCore

/// What decides when transfers may run: NetworkManager's `Connectivity` and
/// `Metered`, watched here on the system bus, and the power (on battery,
/// power saver) as the daemon follows it (``PluginHost/power``), read again
/// at each ``powerChanged()``. A service that is absent leaves its part
/// unknown, which holds nothing back; one that appears later is read then.
/// NetworkManager there but not answering a read within 10 s is not
/// absent: what it said before holds, with nothing said before the network
/// counts as metered (``TransferConditions/networkUnreadable``), and it is
/// read again after 5 s, doubling to 5 minutes (``retryAt``). A read it
/// refuses (a policy that denies it) leaves the part unknown, as absence does.
final class SystemConditions {
    private let host: PluginHost
    private(set) var current = TransferConditions()
    /// Whether the sources are followed on the system bus now (not before
    /// ``start()``, nor after the bus was lost until it is back).
    private var following = false
    /// Called on the loop when ``current`` changed, with what it was before.
    var changed: ((_ before: TransferConditions) -> Void)?
    /// Reads of the services' properties under way: until they are
    /// answered, what ``current`` says may be older than the services
    /// (nothing yet at start-up, what was said before the bus restarted).
    private var reading = 0
    /// Whether every read has been answered (``current`` is what the services say).
    var isSettled: Bool { reading == 0 }
    /// Called on the loop when the last read under way is answered.
    var settled: (() -> Void)?
    /// Properties whose last read failed while their service was there.
    private var failedReads: Set<String> = []
    /// When to read a service that failed its read again (realtime µs); the
    /// owner's timer calls ``retryIfDue(at:)``.
    private(set) var retryAt: UInt64?
    private var retryDelay = SystemConditions.firstRetryDelay
    private static let firstRetryDelay: UInt64 = 5_000_000, longestRetryDelay: UInt64 = 300_000_000

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
                    // No message: the system bus went away. What the service said last
                    // holds until the bus is back and it is read again: forgetting it
                    // would let a download that must avoid a metered network run on one.
                    guard let message else {
                        if self.following { self.host.log(.notice, "lost the system bus: the network's last known state holds until it is back") }
                        self.following = false
                        return
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

    /// Reads the services that failed their last read again, if it is time.
    func retryIfDue(at now: UInt64) {
        guard let due = retryAt, now >= due else { return }
        retryAt = nil
        guard following else { return }
        host.log(.info, "reading NetworkManager again: its last read failed")
        // Not counted as reads to wait for: what it said before (or "may be
        // metered") holds meanwhile, and other transfers go on.
        for source in Self.sources { read(source, settling: false) }
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

    /// Reads `source`'s properties; `settling`: nothing starts until they are answered.
    private func read(_ source: Source, settling: Bool = true) {
        for property in source.properties {
            do {
                try host.call(source.service, path: source.path, interface: "org.freedesktop.DBus.Properties", member: "Get",
                              on: .system, timeout: 10) { (call) throws(ModeError) in
                    try call.append(source.interface)
                    try call.append(property)
                } reply: { [weak self] result in
                    guard let self else { return }
                    switch result {
                    case .success(let reply):
                        self.readSucceeded(property, try? reply.readVariant())
                    case .failure(let error) where Self.isTransient(error.code.rawValue):
                        self.readFailed(property, source, error.message)
                    case .failure:
                        // Not there (it left, the bus came back without it), or it will
                        // never say (a policy that denies the read): unknown.
                        self.readSucceeded(property, nil)
                    }
                    guard settling else { return }
                    self.reading -= 1
                    if self.reading == 0 { self.settled?() }
                }
                if settling { reading += 1 }
            } catch {
                host.log(.debug, "cannot read \(source.service) \(property): \(error.message)")
            }
        }
    }

    /// Errors of a service that is there and may answer later: no answer in time, a connection cut short.
    private static func isTransient(_ name: String) -> Bool {
        [".NoReply", ".Timeout", ".TimedOut", ".Disconnected", ".LimitsExceeded"].contains { name.hasSuffix($0) }
    }

    /// A read answered (nil: not there, or a value of another type: unknown).
    private func readSucceeded(_ property: String, _ value: PluginValue?) {
        failedReads.remove(property)
        if failedReads.isEmpty {
            retryAt = nil
            retryDelay = Self.firstRetryDelay
        }
        set(property, value)
    }

    /// A read failed while the service is there: what it said before
    /// holds, and it is read again later.
    private func readFailed(_ property: String, _ source: Source, _ why: String) {
        // Said once until it answers again; retries are logged at info.
        let first = failedReads.insert(property).inserted
        host.log(first ? .warning : .info, "cannot read \(source.service) \(property) (\(why)): \(current.metered == nil ? "transfers that must avoid metered networks wait" : "what it said before holds") until it answers")
        if retryAt == nil {
            retryAt = host.realtimeMicroseconds &+ retryDelay
            retryDelay = min(retryDelay * 2, Self.longestRetryDelay)
        }
        var next = current
        next.networkUnreadable = true
        update(next)
    }

    private func forget(_ source: Source) {
        failedReads.removeAll()
        retryAt = nil
        retryDelay = Self.firstRetryDelay
        var next = current
        next.networkUnreadable = false
        for property in source.properties {
            switch property {
            case "Connectivity": next.connectivity = nil
            case "Metered": next.metered = nil
            default: break
            }
        }
        update(next)
    }

    /// Sets a property from its value; nil (or a value of another type) makes it unknown.
    private func set(_ property: String, _ value: PluginValue?) {
        var next = current
        next.networkUnreadable = !failedReads.isEmpty
        let number: UInt32? = if case .uint(let number)? = value { UInt32(truncatingIfNeeded: number) } else { nil }
        switch property {
        case "Connectivity": next.connectivity = number
        case "Metered": next.metered = number
        default: return
        }
        update(next)
    }

    private func update(_ next: TransferConditions) {
        guard next != current else { return }
        let before = current
        current = next
        host.log(.info, "conditions for transfers: connectivity \(next.connectivity.map(String.init) ?? "unknown"), metered \(next.metered.map(String.init) ?? "unknown"), on battery \(next.onBattery.map(String.init) ?? "unknown"), power saver \(next.powerSaver)\(next.networkUnreadable ? ", NetworkManager not answering" : "")")
        changed?(before)
    }
}
