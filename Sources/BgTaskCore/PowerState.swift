/// What the machine's power sources report, as far as the daemon can tell:
/// the inputs that may restrict Background App Refresh (docs/DESIGN.md §4,
/// `GetBackgroundRefreshStatus`).
///
/// `nil` means unknown (no system bus, or the service that would say is not
/// running). An unknown value never restricts anything.
public struct PowerState: Sendable, Equatable, CustomStringConvertible {
    /// Whether the machine runs on battery (UPower `OnBattery`); nil when unknown.
    public var onBattery: Bool?
    /// The charge of the battery as a whole, 0–100 (UPower's display device
    /// `Percentage`); nil when unknown or when there is no battery.
    public var batteryPercent: Double?
    /// Whether the power profile is `power-saver` (power-profiles-daemon
    /// `ActiveProfile`); false when unknown.
    public var powerSaver: Bool

    public init(onBattery: Bool? = nil, batteryPercent: Double? = nil, powerSaver: Bool = false) {
        self.onBattery = onBattery
        self.batteryPercent = batteryPercent
        self.powerSaver = powerSaver
    }

    /// Nothing known: what the daemon assumes without a system bus.
    public static let unknown = PowerState()

    /// `on battery at 15 %, power saver`, `on AC power`, `power state unknown` …
    public var description: String {
        var parts: [String] = []
        switch onBattery {
        case true?:
            parts.append(batteryPercent.map { "on battery at \(Self.format(percent: $0)) %" } ?? "on battery")
        case false?:
            parts.append("on AC power" + (batteryPercent.map { ", battery at \(Self.format(percent: $0)) %" } ?? ""))
        case nil:
            if let batteryPercent { parts.append("battery at \(Self.format(percent: batteryPercent)) %") }
        }
        if powerSaver { parts.append("power saver") }
        return parts.isEmpty ? "power state unknown" : parts.joined(separator: ", ")
    }

    /// A percentage for people: `15`, `15.5`, cut (not rounded) to one
    /// decimal, so that 19.96 never reads as the 20 % threshold.
    public static func format(percent: Double) -> String {
        guard percent.isFinite else { return "\(percent)" }
        let tenths = (percent * 10).rounded(.towardZero) / 10
        if tenths == tenths.rounded(), abs(tenths) < 1e15 { return "\(Int(tenths))" }
        return "\(tenths)"
    }
}
