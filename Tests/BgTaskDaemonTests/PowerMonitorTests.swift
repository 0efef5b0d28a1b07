@testable import BgTaskDaemon
import BgTaskCore
import Foundation
import Logging
import SDBus
import Synchronization
import Testing

/// The power inputs of `GetBackgroundRefreshStatus` (docs/DESIGN.md §4), against
/// python-dbusmock's UPower and power-profiles-daemon on a private bus that
/// plays the system bus. The monitor runs on a loop thread, as in the daemon.
@Suite(.serialized) struct PowerMonitorTests {
    /// A monitor on its own loop thread, with its log and every state it reported.
    final class Harness: @unchecked Sendable {
        let loopThread: LoopThread
        let log = RecordingLog()
        let changes = Mutex<[PowerState]>([])
        private var monitor: PowerMonitor?

        init(systemBus: Bus.Address) throws {
            loopThread = try LoopThread()
            try loopThread.sync { [self] in
                let monitor = PowerMonitor(systemBus: systemBus, loop: loopThread.loop, logger: log.logger)
                monitor.onChange = { [weak self] state in self?.changes.withLock { $0.append(state) } }
                monitor.start()
                self.monitor = monitor
            }
        }

        /// The monitor's state, read on its loop.
        var state: PowerState {
            (try? loopThread.sync { [self] in monitor?.state }) ?? nil ?? .unknown
        }

        /// Waits until the monitor's state is `expected`.
        @discardableResult
        func wait(for expected: PowerState, timeout: Duration = .seconds(10)) -> Bool {
            loopThread.wait(timeout: timeout) { [self] in monitor?.state == expected }
        }

        /// Drops the monitor on its loop, then stops the loop. Safe to call twice.
        func stop() {
            _ = try? loopThread.sync { [self] in monitor = nil }
            loopThread.stop()
        }

        deinit { stop() }
    }

    @Test func staysUnknownWithoutASystemBus() throws {
        let harness = try Harness(systemBus: .address("unix:path=/nonexistent/bgtaskd-test/system_bus_socket"))
        defer { harness.stop() }
        Thread.sleep(forTimeInterval: 0.2)
        #expect(harness.state == .unknown)
        #expect(harness.changes.withLock { $0 }.isEmpty)
        let infos = harness.log.lines(atLeast: .info)
        #expect(infos.count == 1, "\(infos)")
        #expect(infos.allSatisfy { $0.level == .info }, "\(infos)")
        #expect(infos.first?.message.contains("no system bus") == true, "\(infos)")
        #expect(RefreshPolicy.status(appEnabled: nil, globalEnabled: true, power: harness.state) == .available)
    }

    @Test func staysUnknownWhenTheServicesAreMissing() throws {
        let mocks = try MockPowerServices()
        let harness = try Harness(systemBus: .address(mocks.address))
        defer { harness.stop() }
        #expect(harness.loopThread.wait { harness.log.lines(atLeast: .info).count == 1 })
        Thread.sleep(forTimeInterval: 0.1)
        #expect(harness.state == .unknown)
        let infos = harness.log.lines(atLeast: .info)
        #expect(infos.count == 1 && infos[0].level == .info, "\(infos)")
        #expect(infos.first?.message.contains("upower=absent") == true, "\(infos)")
        #expect(harness.changes.withLock { $0 }.isEmpty)
    }

    @Test func readsInitialBatteryAndProfile() throws {
        let mocks = try MockPowerServices()
        try mocks.startUPower(onBattery: true, percentage: 55)
        try mocks.startPowerProfiles("power-saver")
        let harness = try Harness(systemBus: .address(mocks.address))
        defer { harness.stop() }
        let expected = PowerState(onBattery: true, batteryPercent: 55, powerSaver: true)
        #expect(harness.wait(for: expected), "state: \(harness.state); log: \(harness.log.all)")
        // One summary line naming what was found.
        #expect(harness.loopThread.wait { harness.log.all.contains { $0.message.contains("upower=present") } }, "\(harness.log.all)")
        #expect(harness.log.lines(atLeast: .warning).isEmpty, "\(harness.log.all)")
    }

    @Test func readsTheCurrentPowerProfilesName() throws {
        let mocks = try MockPowerServices()
        try mocks.startPowerProfiles("power-saver", name: .current)
        let harness = try Harness(systemBus: .address(mocks.address))
        defer { harness.stop() }
        #expect(harness.wait(for: PowerState(powerSaver: true)), "state: \(harness.state); log: \(harness.log.all)")
        try mocks.setPowerProfile("performance")
        #expect(harness.wait(for: PowerState(powerSaver: false)), "state: \(harness.state)")
    }

    @Test func noBatteryMeansUnknownPercentage() throws {
        let mocks = try MockPowerServices()
        try mocks.startUPower(onBattery: false, percentage: nil)
        let harness = try Harness(systemBus: .address(mocks.address))
        defer { harness.stop() }
        #expect(harness.wait(for: PowerState(onBattery: false, batteryPercent: nil)), "state: \(harness.state)")
    }

    @Test func followsBatteryAndPowerSaver() throws {
        let mocks = try MockPowerServices()
        try mocks.startUPower(onBattery: false, percentage: 80)
        try mocks.startPowerProfiles("balanced")
        let harness = try Harness(systemBus: .address(mocks.address))
        defer { harness.stop() }
        let onAC = PowerState(onBattery: false, batteryPercent: 80, powerSaver: false)
        #expect(harness.wait(for: onAC), "state: \(harness.state)")
        #expect(RefreshPolicy.status(appEnabled: nil, globalEnabled: true, power: harness.state) == .available)

        try mocks.setOnBattery(true, percentage: 15)
        let low = PowerState(onBattery: true, batteryPercent: 15, powerSaver: false)
        #expect(harness.wait(for: low), "state: \(harness.state)")
        let explained = RefreshPolicy.explain(appEnabled: nil, globalEnabled: true, power: harness.state)
        #expect(explained.status == .restricted)
        #expect(explained.reason == "on battery at 15 %")

        try mocks.setOnBattery(false, percentage: 15)
        try mocks.setPowerProfile("power-saver")
        let saver = PowerState(onBattery: false, batteryPercent: 15, powerSaver: true)
        #expect(harness.wait(for: saver), "state: \(harness.state)")
        #expect(RefreshPolicy.explain(appEnabled: nil, globalEnabled: true, power: harness.state).reason == "power saver is on")

        try mocks.setPowerProfile("balanced")
        #expect(harness.wait(for: PowerState(onBattery: false, batteryPercent: 15, powerSaver: false)))

        // onChange reports real changes only: never the same state twice in a row.
        let changes = harness.changes.withLock { $0 }
        #expect(changes.first == onAC, "\(changes)")
        #expect(zip(changes, changes.dropFirst()).allSatisfy { $0 != $1 }, "\(changes)")
        #expect(changes.contains(low) && changes.contains(saver), "\(changes)")
    }

    @Test func picksUpServicesThatComeAndGo() throws {
        let mocks = try MockPowerServices()
        let harness = try Harness(systemBus: .address(mocks.address))
        defer { harness.stop() }
        #expect(harness.loopThread.wait { harness.log.all.contains { $0.message.contains("upower=absent") } })
        #expect(harness.state == .unknown)

        try mocks.startUPower(onBattery: true, percentage: 12)
        #expect(harness.wait(for: PowerState(onBattery: true, batteryPercent: 12)), "state: \(harness.state); log: \(harness.log.all)")

        try mocks.startPowerProfiles("power-saver")
        #expect(harness.wait(for: PowerState(onBattery: true, batteryPercent: 12, powerSaver: true)), "state: \(harness.state)")

        try mocks.stopMock("net.hadess.PowerProfiles")
        #expect(harness.wait(for: PowerState(onBattery: true, batteryPercent: 12)), "state: \(harness.state)")
        try mocks.stopMock("org.freedesktop.UPower")
        #expect(harness.wait(for: .unknown), "state: \(harness.state)")

        // And back again, with new values.
        try mocks.startUPower(onBattery: false, percentage: 90)
        #expect(harness.wait(for: PowerState(onBattery: false, batteryPercent: 90)), "state: \(harness.state)")
        #expect(harness.log.lines(atLeast: .warning).isEmpty, "\(harness.log.all)")
    }

    @Test func systemBusGoingAwayLeavesStateUnknown() throws {
        let mocks = try MockPowerServices()
        try mocks.startPowerProfiles("power-saver")
        let harness = try Harness(systemBus: .address(mocks.address))
        defer { harness.stop() }
        #expect(harness.wait(for: PowerState(powerSaver: true)))
        mocks.stop()
        #expect(harness.wait(for: .unknown), "state: \(harness.state)")
        #expect(harness.log.lines(atLeast: .warning).isEmpty, "\(harness.log.all)")
    }
}
