import BgTaskProtocol

/// Which way the device crossed a monitored region's boundary, as iOS's
/// `locationManager(_:didEnterRegion:)` and `didExitRegion`.
///
/// A crossing counts only once the device has stayed on the new side for a
/// while (`Location.DwellSec`, 20 s by default) and a margin beyond the
/// boundary, so a device standing on the line does not flicker in and out.
///
/// ```swift
/// switch crossing {
/// case .enter: print("arrived")
/// case .exit: print("left")
/// }
/// ```
public enum RegionCrossing: String, Sendable, Hashable, CaseIterable, CustomStringConvertible {
    /// The device entered the region (RegionEvent's `enter`).
    ///
    /// ```swift
    /// if crossing == .enter { showArrivalReminder() }
    /// ```
    case enter

    /// The device left the region (RegionEvent's `exit`).
    ///
    /// ```swift
    /// if crossing == .exit { syncBeforeLeavingWiFi() }
    /// ```
    case exit

    /// The D-Bus spelling (`enter`, `exit`).
    ///
    /// ```swift
    /// "\(RegionCrossing.enter)"   // "enter"
    /// ```
    public var description: String { rawValue }

    /// The crossing RegionEvent's `event` names; nil for a spelling this SDK does not know.
    init?(wire: String) {
        guard let crossing = LocationInterface.Crossing(rawValue: wire) else { return nil }
        switch crossing {
        case .enter: self = .enter
        case .exit: self = .exit
        }
    }
}
