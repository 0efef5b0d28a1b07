public import BgTaskProtocol
/// Decides whether Background App Refresh is available to an app
/// (docs/DESIGN.md §4, `GetBackgroundRefreshStatus`):
///
/// - `denied` when the user switched it off: the global switch (app id `""`),
///   or the app's own switch;
/// - else `restricted` when power-profiles-daemon reports `power-saver`, or
///   UPower reports running on battery below ``lowBatteryPercent``;
/// - else `available`.
///
/// `denied` beats `restricted`: the user's choice stands whatever the power.
/// Unknown power inputs never restrict.
public enum RefreshPolicy {
    /// On battery below this charge (percent), refresh is restricted.
    public static let lowBatteryPercent: Double = 20

    /// The status for one app. `appEnabled` is the app's own switch, nil when
    /// the user never set it (the app then follows the global switch).
    public static func status(appEnabled: Bool?, globalEnabled: Bool, power: PowerState) -> BackgroundRefreshStatus {
        explain(appEnabled: appEnabled, globalEnabled: globalEnabled, power: power).status
    }

    /// The status and why, in words for logs and `bgtaskctl`
    /// (`power saver is on`, `on battery at 15 %` …).
    public static func explain(
        appEnabled: Bool?, globalEnabled: Bool, power: PowerState
    ) -> (status: BackgroundRefreshStatus, reason: String) {
        if !globalEnabled {
            return (.denied, "Background App Refresh is switched off for all apps")
        }
        if appEnabled == false {
            return (.denied, "Background App Refresh is switched off for this app")
        }
        if power.powerSaver {
            return (.restricted, "power saver is on")
        }
        if let percent = lowBattery(power) {
            return (.restricted, "on battery at \(PowerState.format(percent: percent)) %")
        }
        return (.available, "switched on; \(power)")
    }

    /// The battery charge when it restricts refresh: on battery, known and below the threshold.
    private static func lowBattery(_ power: PowerState) -> Double? {
        guard power.onBattery == true, let percent = power.batteryPercent, percent.isFinite,
            percent < lowBatteryPercent
        else { return nil }
        return percent
    }
}
