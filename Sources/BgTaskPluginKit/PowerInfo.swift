/// The machine's power as the daemon follows it on the system bus (UPower,
/// power-profiles-daemon): ``PluginHost/power``. A change comes as
/// ``PluginEvent/refreshChanged``.
public struct PowerInfo: Sendable, Equatable {
    /// On battery (true), on AC power (false); nil when unknown.
    public var onBattery: Bool?
    /// The active power profile is `power-saver`.
    public var powerSaver: Bool
    /// The battery's charge, 0–100; nil when unknown or there is no battery.
    public var batteryPercent: Double?

    public init(onBattery: Bool? = nil, powerSaver: Bool = false, batteryPercent: Double? = nil) {
        self.onBattery = onBattery
        self.powerSaver = powerSaver
        self.batteryPercent = batteryPercent
    }
}
