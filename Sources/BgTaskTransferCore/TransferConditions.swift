/// What the system says about the network and power (NetworkManager, UPower,
/// power-profiles-daemon). Nil where a service is absent or has not answered:
/// unknown holds no transfer back, except that a NetworkManager that is
/// there but cannot be read (``networkUnreadable``) holds back what must
/// avoid a metered network.
public struct TransferConditions: Sendable, Equatable {
    /// NetworkManager `Connectivity`: 0 unknown, 1 none, 2 portal, 3 limited, 4 full.
    public var connectivity: UInt32?
    /// NetworkManager `Metered`: 0 unknown, 1 yes, 2 no, 3 guess-yes, 4 guess-no.
    public var metered: UInt32?
    /// UPower `OnBattery`.
    public var onBattery: Bool?
    /// power-profiles-daemon's `ActiveProfile` is `power-saver`.
    public var powerSaver = false
    /// NetworkManager is on the bus but its last read failed (it did not
    /// answer in time, it refused): what it said before holds; with nothing
    /// said before, the network may be metered.
    public var networkUnreadable = false

    public init(
        connectivity: UInt32? = nil, metered: UInt32? = nil, onBattery: Bool? = nil, powerSaver: Bool = false, networkUnreadable: Bool = false
    ) {
        self.connectivity = connectivity
        self.metered = metered
        self.onBattery = onBattery
        self.powerSaver = powerSaver
        self.networkUnreadable = networkUnreadable
    }

    /// A guess that the network is metered counts as metered, and so does a
    /// network whose NetworkManager is there but has never been read.
    public var isMetered: Bool { metered == 1 || metered == 3 || (metered == nil && networkUnreadable) }

    /// NetworkManager says there is no way out (none, a captive portal, limited).
    public var isOffline: Bool { connectivity.map { (1...3).contains($0) } ?? false }

    /// Why a transfer with `options` may not run now, or nil when it may.
    public func blocker(for options: TransferOptions) -> String? {
        if isOffline { return "network" }
        if isMetered && (options.discretionary || !options.allowMetered) { return "unmetered network" }
        if options.discretionary {
            if onBattery == true { return "AC power" }
            if powerSaver { return "power-saver mode to end" }
        }
        return nil
    }
}
