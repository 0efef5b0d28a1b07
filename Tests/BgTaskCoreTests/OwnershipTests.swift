import BgTaskCore
import BgTaskTestKit
import Testing

/// An app belongs to one uid: claims from another are refused, and the
/// daemon terminates only processes it can tie to what overstayed.
@Suite struct OwnershipTests {
    let clock = ManualClock()
    var engine: BackgroundEngine<ManualClock>
    let weather = try! AppID(validating: "org.example.Weather")
    let plain = try! AppID(validating: "org.example.Plain")
    static let user: UInt32 = 1000
    static let stranger: UInt32 = 65534

    init() {
        let weather = self.weather
        // Weather has a desktop entry of the daemon's user; Plain has none.
        engine = BackgroundEngine(
            policy: TaskPolicy(budget: .seconds(600), warning: .seconds(5), killGrace: .seconds(2)), clock: clock,
            defaultOwner: { $0 == weather ? Self.user : nil })
    }

    func caller(_ name: String, pid: Int32, uid: UInt32, appID: AppID? = nil) -> CallerIdentity {
        CallerIdentity(connection: ConnectionID(name), process: ProcessRef(pid: pid, serial: UInt64(pid)), uid: uid,
                       appID: appID, appIDSource: appID == nil ? nil : .flatpak, isSandboxed: appID != nil)
    }

    @Test mutating func anotherUserCannotCheckInAsTheUsersApp() throws {
        let mine = caller(":1.1", pid: 100, uid: Self.user)
        _ = try engine.checkIn(appID: weather.rawValue, caller: mine)
        let theirs = caller(":1.2", pid: 200, uid: Self.stranger)
        let refused = #expect(throws: CoreError.self) { try engine.checkIn(appID: weather.rawValue, caller: theirs) }
        #expect(refused?.code == .notPermitted)
        // Even while the app is not running: its events wait for its own user.
        _ = engine.disconnect(mine.connection)
        #expect(throws: CoreError.self) { try engine.checkIn(appID: weather.rawValue, caller: theirs) }
        // The stranger's state changes stay its own: the user's app keeps its foreground clock.
        _ = try engine.checkIn(appID: weather.rawValue, caller: caller(":1.3", pid: 101, uid: Self.user))
        _ = try engine.beginTask(named: "save", caller: caller(":1.3", pid: 101, uid: Self.user))
        #expect(engine.setState(.background, caller: theirs) == [])
        #expect(engine.state(of: .app(weather)) == .active)
    }

    @Test mutating func anAppWithoutAnEntryBelongsToItsFirstClaimant() throws {
        _ = try engine.checkIn(appID: plain.rawValue, caller: caller(":1.1", pid: 200, uid: Self.stranger))
        #expect(throws: CoreError.self) { try engine.checkIn(appID: plain.rawValue, caller: caller(":1.2", pid: 100, uid: Self.user)) }
        _ = try engine.checkIn(appID: plain.rawValue, caller: caller(":1.3", pid: 201, uid: Self.stranger))
    }

    /// Another uid that claimed an app before its desktop entry came loses it
    /// when the entry comes: its connection becomes an app of its own, the
    /// wake it held fails, and the user's own process may check in.
    @Test mutating func anAppClaimedBeforeItsEntryCameIsTheUsersOnceItComes() throws {
        final class Entries: @unchecked Sendable { var ids: Set<AppID> = [] }
        let entries = Entries()
        var engine = BackgroundEngine(
            policy: TaskPolicy(budget: .seconds(600), warning: .seconds(5), killGrace: .seconds(2)), clock: clock,
            defaultOwner: { entries.ids.contains($0) ? Self.user : nil })
        // Another user's Flatpak of that id (a verified id: frozen while the machine sleeps).
        let theirs = caller(":1.2", pid: 200, uid: Self.stranger, appID: plain)
        _ = try engine.checkIn(appID: plain.rawValue, caller: theirs)
        #expect(engine.reclaimApps() == [], "no entry yet: the first claimant keeps it")
        // In the background while the machine sleeps: frozen as the app.
        _ = engine.setState(.background, caller: theirs)
        #expect(engine.setSleeping(true).contains(.freeze(.app(plain), [theirs.process!])))
        entries.ids.insert(plain)
        let actions = engine.reclaimApps()
        #expect(actions.contains(.appGone(plain)), "\(actions)")
        #expect(actions.contains(.thaw(.app(plain), [theirs.process!])), "nothing would thaw it later: \(actions)")
        _ = engine.setSleeping(false)
        #expect(engine.app(of: theirs.connection) == .connection(theirs.connection))
        _ = try engine.checkIn(appID: plain.rawValue, caller: caller(":1.3", pid: 101, uid: Self.user))
        #expect(throws: CoreError.self) { try engine.checkIn(appID: plain.rawValue, caller: caller(":1.4", pid: 201, uid: Self.stranger)) }
        #expect(engine.reclaimApps() == [])
    }

    @Test mutating func aSandboxedAppOfAnotherUserIsAnAppOfItsOwn() throws {
        _ = try engine.checkIn(appID: weather.rawValue, caller: caller(":1.1", pid: 100, uid: Self.user))
        // Another user's Flatpak of the same id: its own connection-app, never the user's.
        let foreign = caller(":1.2", pid: 200, uid: Self.stranger, appID: weather)
        _ = try engine.beginTask(named: "t", caller: foreign)
        #expect(engine.app(of: foreign.connection) == .connection(foreign.connection))
        #expect(throws: CoreError.self) { try engine.checkIn(appID: weather.rawValue, caller: foreign) }
    }

    @Test mutating func aMissedWakeTerminatesOnlyTheConnectionItWentToAndTheLaunchedProcess() throws {
        let genuine = caller(":1.1", pid: 100, uid: Self.user)
        _ = try engine.checkIn(appID: weather.rawValue, caller: genuine)
        _ = engine.setState(.background, caller: genuine)
        // A same-user process claims the app too; events go to the latest check-in.
        let claimant = caller(":1.2", pid: 300, uid: Self.user)
        _ = try engine.checkIn(appID: weather.rawValue, caller: claimant)
        let request = WakeRequest(app: weather, reason: "fetch", plugin: "fetch", budget: .seconds(30), token: "t1")
        #expect(try engine.requestWake(request) == [
            .deliverWake(token: "t1", plugin: "fetch", app: weather, connection: claimant.connection),
        ])
        clock.advance(by: .seconds(30))
        // The claimant overstayed; the genuine process is not killed on its account.
        #expect(engine.fireDueTimers() == [
            .wakeExpired(token: "t1", plugin: "fetch", app: weather),
            .signalProcess(claimant.process!, .terminate, app: .app(weather)),
        ])
    }
}
