import BgTaskProtocol
import BgTaskCore
import Testing

/// `GetBackgroundRefreshStatus` (docs/DESIGN.md §4): the switches and the power inputs.
@Suite struct RefreshPolicyTests {
    let ac = PowerState(onBattery: false, batteryPercent: 80)

    @Test func availableWhenSwitchedOnAndPowerIsFine() {
        #expect(RefreshPolicy.status(appEnabled: nil, globalEnabled: true, power: ac) == .available)
        #expect(RefreshPolicy.status(appEnabled: true, globalEnabled: true, power: ac) == .available)
        #expect(RefreshPolicy.status(appEnabled: true, globalEnabled: true, power: PowerState(onBattery: true, batteryPercent: 20)) == .available)
    }

    @Test func unknownPowerNeverRestricts() {
        #expect(RefreshPolicy.status(appEnabled: nil, globalEnabled: true, power: .unknown) == .available)
        // Battery percentage without OnBattery (UPower half-read): not restricted.
        #expect(RefreshPolicy.status(appEnabled: nil, globalEnabled: true, power: PowerState(batteryPercent: 5)) == .available)
        // On battery with no known charge: not restricted.
        #expect(RefreshPolicy.status(appEnabled: nil, globalEnabled: true, power: PowerState(onBattery: true)) == .available)
        #expect(RefreshPolicy.explain(appEnabled: nil, globalEnabled: true, power: .unknown).reason.contains("power state unknown"))
    }

    @Test func deniedByTheGlobalSwitchWhateverTheAppSays() {
        for app in [nil, true, false] as [Bool?] {
            let result = RefreshPolicy.explain(appEnabled: app, globalEnabled: false, power: ac)
            #expect(result.status == .denied)
            #expect(result.reason.contains("all apps"))
        }
    }

    @Test func deniedByTheAppSwitch() {
        let result = RefreshPolicy.explain(appEnabled: false, globalEnabled: true, power: ac)
        #expect(result.status == .denied)
        #expect(result.reason.contains("this app"))
    }

    @Test func restrictedByPowerSaver() {
        let power = PowerState(onBattery: false, batteryPercent: 100, powerSaver: true)
        let result = RefreshPolicy.explain(appEnabled: nil, globalEnabled: true, power: power)
        #expect(result.status == .restricted)
        #expect(result.reason == "power saver is on")
        // Power saver alone, with UPower absent.
        #expect(RefreshPolicy.status(appEnabled: true, globalEnabled: true, power: PowerState(powerSaver: true)) == .restricted)
    }

    @Test func restrictedOnBatteryBelowTwentyPercent() {
        let result = RefreshPolicy.explain(appEnabled: nil, globalEnabled: true, power: PowerState(onBattery: true, batteryPercent: 15))
        #expect(result.status == .restricted)
        #expect(result.reason == "on battery at 15 %")
        // Shown cut to one decimal, never rounded up to the threshold.
        #expect(RefreshPolicy.explain(appEnabled: nil, globalEnabled: true, power: PowerState(onBattery: true, batteryPercent: 19.96)).reason
            == "on battery at 19.9 %")
        #expect(RefreshPolicy.status(appEnabled: nil, globalEnabled: true, power: PowerState(onBattery: true, batteryPercent: 19.9)) == .restricted)
        #expect(RefreshPolicy.explain(appEnabled: nil, globalEnabled: true, power: PowerState(onBattery: true, batteryPercent: 7.25)).reason
            == "on battery at 7.2 %")
        // The same charge on AC power is fine.
        #expect(RefreshPolicy.status(appEnabled: nil, globalEnabled: true, power: PowerState(onBattery: false, batteryPercent: 15)) == .available)
    }

    @Test func deniedBeatsRestricted() {
        let worst = PowerState(onBattery: true, batteryPercent: 3, powerSaver: true)
        #expect(RefreshPolicy.status(appEnabled: false, globalEnabled: true, power: worst) == .denied)
        #expect(RefreshPolicy.status(appEnabled: true, globalEnabled: false, power: worst) == .denied)
        #expect(RefreshPolicy.status(appEnabled: true, globalEnabled: true, power: worst) == .restricted)
    }

    @Test func nonsensePercentagesDoNotCrash() {
        for percent in [Double.nan, -.infinity, .infinity, -5, 1e300] {
            let power = PowerState(onBattery: true, batteryPercent: percent)
            let result = RefreshPolicy.explain(appEnabled: nil, globalEnabled: true, power: power)
            #expect(!result.reason.isEmpty)
            _ = power.description
        }
        #expect(RefreshPolicy.status(appEnabled: nil, globalEnabled: true, power: PowerState(onBattery: true, batteryPercent: -5)) == .restricted)
        #expect(RefreshPolicy.status(appEnabled: nil, globalEnabled: true, power: PowerState(onBattery: true, batteryPercent: .nan)) == .available)
    }

    @Test func statusStringsAreTheContract() {
        #expect(BackgroundRefreshStatus.available.rawValue == "available")
        #expect(BackgroundRefreshStatus.denied.rawValue == "denied")
        #expect(BackgroundRefreshStatus.restricted.rawValue == "restricted")
    }

    @Test func describesThePowerState() {
        #expect(PowerState.unknown.description == "power state unknown")
        #expect(PowerState(onBattery: true, batteryPercent: 15, powerSaver: true).description == "on battery at 15 %, power saver")
        #expect(PowerState(onBattery: false).description == "on AC power")
        #expect(PowerState(powerSaver: true).description == "power saver")
    }
}
