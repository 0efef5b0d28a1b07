import BgTaskTestKit
import Foundation
import SDBus
import Testing

/// The state directory on a small tmpfs that the test fills: a write that
/// cannot be made durable leaves no trace (no reply claims it, no memory
/// keeps it, no app is punished for a wake it never got), and the daemon
/// writes again by itself once there is room.
@Suite(.serialized) struct StorageFullTests {
    static let chat = "org.example.Chat"
    static let alerts = "org.example.Alerts"
    static let storageFailed = "org.bgtaskd.BackgroundTasks1.Error.StorageFailed"

    /// A tmpfs of `size` mounted for one test, unmounted at the end.
    final class SmallDisk {
        let path: String
        init(size: String) throws {
            path = FileManager.default.temporaryDirectory.appendingPathComponent("bgtaskd-full-\(UUID())").path
            try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
            let mounted = try CommandResult.run("/bin/mount", ["-t", "tmpfs", "-o", "size=\(size)", "tmpfs", path])
            guard mounted.succeeded else { throw TestKitError("cannot mount a tmpfs: \(mounted)") }
        }

        /// Writes a file until the file system has no room left.
        func fill() {
            // Close-on-exec: a process another test starts meanwhile must not
            // keep the filler, whose room then never comes back.
            let descriptor = open(path + "/filler", O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0o600)
            let block = [UInt8](repeating: 0, count: 4096)
            while write(descriptor, block, block.count) > 0 {}
            var byte: UInt8 = 0
            while write(descriptor, &byte, 1) > 0 {}
            close(descriptor)
        }

        /// Emptied before it goes: its room comes back even if some process holds it open.
        func makeRoom() {
            truncate(path + "/filler", 0)
            unlink(path + "/filler")
        }

        deinit {
            _ = try? CommandResult.run("/bin/umount", ["-l", path])
            try? FileManager.default.removeItem(atPath: path)
        }
    }

    /// Root may mount a tmpfs here (CI runs as root); elsewhere these tests are skipped.
    static let canMount: Bool = {
        guard getuid() == 0, let disk = try? SmallDisk(size: "64k") else { return false }
        _ = disk
        return true
    }()

    func daemon(on disk: SmallDisk) throws -> DaemonUnderTest {
        try DaemonUnderTest(
            settings: ["RemoteNotifications.SilentPerHour=0", "RemoteNotifications.WakeBudgetSec=2"],
            stateDirectory: disk.path + "/state",
            desktopEntries: [
                DesktopEntrySpec(id: Self.chat, name: "Chat", modes: ["remote-notification", "fetch"], exec: "/bin/false"),
                DesktopEntrySpec(id: Self.alerts, name: "Alerts", modes: ["remote-notification"], exec: "/bin/false"),
            ])
    }

    static func silentPush(_ n: Int) -> (Message) throws -> Void {
        PushTests.push(#"{"aps":{"content-available":1},"n":\#(n),"pad":"\#(String(repeating: "x", count: 3000))"}"#, app: chat)
    }

    /// A 1 MB disk under a daemon whose pushes have 2 s, and a silent push
    /// (`"n":7`) handed to a test app that never completes it: the disk, the
    /// daemon, the push's sender, the app and the push's token.
    func pushHeldByAnAppThatNeverCompletesIt() throws -> (SmallDisk, DaemonUnderTest, RawClient, ChildProcess, String) {
        let disk = try SmallDisk(size: "1m")
        let daemon = try DaemonUnderTest(
            settings: ["RemoteNotifications.WakeBudgetSec=2"], stateDirectory: disk.path + "/state",
            desktopEntries: [DesktopEntrySpec(id: Self.chat, name: "Chat", modes: ["remote-notification", "fetch"], exec: "/bin/false")])
        let sender = try RawClient(daemon)
        let app = try daemon.startTestApp(["--app-id", Self.chat, "--tasks", "0", "--background", "--push-result", "never"])
        #expect(app.waitForEvent("ready") != nil)
        try sender.call("RemoteNotifications", "DeliverPush", PushTests.push(#"{"aps":{"content-available":1},"n":7}"#, app: Self.chat))
        let token = try #require(app.waitForEvent("notification")?["token"] as? String, "\(app.lines)")
        return (disk, daemon, sender, app, token)
    }

    func held(_ client: RawClient) throws -> Int { try PushTests().held(client, app: Self.chat).count }

    func registration(_ client: RawClient) throws -> (String, Double) {
        let reply = try client.call("Fetch", "GetFetchRegistration")
        return (try reply.readString(), try reply.readDouble())
    }

    @Test(.enabled(if: StorageFullTests.canMount, "needs root to mount a tmpfs"))
    func aFullDiskUndoesTheCallAndTheDaemonRecoversWhenThereIsRoom() throws {
        let disk = try SmallDisk(size: "1m")
        let daemon = try daemon(on: disk)
        let app = try RawClient(daemon)
        try app.listen(for: "PerformFetch")
        try app.call("Manager", "CheckIn") { try $0.append(Self.chat) }
        try app.call("Fetch", "SetMinimumFetchInterval") { try $0.append(3600.0) }
        let sender = try RawClient(daemon)
        // An app that would never complete a push: if a wake it never got were
        // still counted, it would be terminated when the budget (2 s) ran out.
        let alerts = try daemon.startTestApp(["--app-id", Self.alerts, "--tasks", "0", "--background", "--push-result", "never"])
        #expect(alerts.waitForEvent("ready") != nil)
        let notifications = try ChildProcess("/usr/bin/python3", ["-m", "dbusmock", "--session", "-t", "notification_daemon"],
                                             environment: daemon.environment)
        defer { notifications.stop() }
        #expect(try PushTests().waitUntil { try daemon.busctl(["status", "org.freedesktop.Notifications"]).succeeded })
        func notified() throws -> String {
            try daemon.gdbus(["call", "--session", "--dest", "org.freedesktop.Notifications", "--object-path",
                              "/org/freedesktop/Notifications", "--method", "org.freedesktop.DBus.Mock.GetCalls"]).standardOutput
        }

        disk.fill()
        // Writes may still fit in what the write-ahead log already holds; go on until one does not.
        var accepted = 0
        var failure: String?
        for n in 0..<500 {
            do {
                _ = try sender.call("RemoteNotifications", "DeliverPush", Self.silentPush(n))
                accepted += 1
            } catch let error as BusError {
                #expect(error.name == Self.storageFailed, "\(error)")
                failure = error.message
                break
            }
        }
        #expect(failure?.contains("the disk is full") == true, "\(failure ?? "no push failed")")
        #expect(try held(sender) == accepted, "every push answered with an id is held, and no other")
        // The failure emptied the daemon's write-ahead log to make room; take that room too.
        #expect(daemon.waitForLog(containing: "emptied the state database's write-ahead log"), "\(daemon.log.suffix(2000))")
        disk.fill()

        // The disk is still full: each of these fails, and none leaves a trace.
        #expect(app.errorName("Fetch", "SetMinimumFetchInterval") { try $0.append(7200.0) } == Self.storageFailed)
        #expect(try registration(app) == ("custom", 3600), "the interval that failed to be stored is not in force")
        let alert = PushTests.push(#"{"aps":{"alert":"NotStored"}}"#, app: Self.alerts)
        #expect(sender.errorName("RemoteNotifications", "DeliverPush", alert) == Self.storageFailed)
        #expect(sender.errorName("Manager", "SetBackgroundRefreshEnabled") { try $0.append(Self.chat); try $0.append(false) }
                == Self.storageFailed)

        // A fetch wake: PerformFetch goes out (it tells of no write); its completion cannot be stored.
        try sender.call("Fetch", "SimulateFetch") { try $0.append(Self.chat) }
        #expect(app.waitForSignals(1))
        try app.received[0].rewind()
        let token = try app.received[0].readString()
        let complete: (Message) throws -> Void = { try $0.append(token); try $0.append("newData") }
        #expect(app.errorName("Fetch", "CompleteFetch", complete) == Self.storageFailed)
        #expect(!daemon.log.contains("completed its fetch"), "the log does not claim what was undone")

        // Past the alert's budget: the app never got the wake, so it is neither terminated nor counted against.
        Thread.sleep(forTimeInterval: 3.5)
        #expect(alerts.isRunning, "\(alerts.lines)")
        #expect(!alerts.eventNames.contains("notification"))
        #expect(!daemon.log.contains("did not complete"), "\(daemon.log.suffix(3000))")

        // Room again: the daemon writes by itself, and the token of the undone completion is still good.
        disk.makeRoom()
        #expect(app.errorName("Fetch", "CompleteFetch", complete) == nil)
        #expect(daemon.process.waitForStandardError(containing: "completed its fetch", timeout: .seconds(5)))
        try app.call("Fetch", "SetMinimumFetchInterval") { try $0.append(7200.0) }
        #expect(try registration(app) == ("custom", 7200))
        _ = try sender.call("RemoteNotifications", "DeliverPush", Self.silentPush(1000))
        #expect(try held(sender) == accepted + 1)
        // An alert whose push could not be stored was not shown (a sender that retries would show it twice); a stored one is.
        _ = try sender.call("RemoteNotifications", "DeliverPush", PushTests.push(#"{"aps":{"alert":"Stored"}}"#, app: Self.alerts))
        var calls = ""
        #expect(try PushTests().waitUntil { calls = try notified(); return calls.contains("Stored") }, "\(calls)")
        #expect(!calls.contains("NotStored"), "\(calls)")
        alerts.stop()
        #expect(daemon.stop() == .status(0))
    }

    /// A launch whose note (which process the app runs as) could not be
    /// stored on a full disk was never noted later: after a crash of the
    /// daemon the app it had launched ran on as the user's, never suspended.
    /// The note is now tried again until there is room.
    @Test(.enabled(if: StorageFullTests.canMount && IdentityTests.canMakeScopes, "needs root and a writable cgroup v2 hierarchy"))
    func aLaunchNotedOnceThereIsRoomIsTakenOverAfterACrash() throws {
        let disk = try SmallDisk(size: "1m")
        let app = "org.example.Survivor"
        let testapp = BinaryLocator.path(of: "bgtaskd-testapp")
        let daemon = try DaemonUnderTest(
            settings: ["RemoteNotifications.WakeBudgetSec=60"], stateDirectory: disk.path + "/state",
            desktopEntries: [DesktopEntrySpec(id: app, modes: ["remote-notification"],
                                              exec: "\(testapp) --push-result newData --tasks 0 --hold 120"),
                             DesktopEntrySpec(id: Self.alerts, modes: ["fetch"], exec: "/bin/false")])
        let admin = try RawClient(daemon)
        // A push stored while the machine sleeps launches its app at the wake, when the disk is full.
        try admin.call("Manager", "SimulateSleep")
        try admin.call("RemoteNotifications", "DeliverPush", PushTests.push(#"{"aps":{"content-available":1}}"#, app: app))
        disk.fill()
        // Writes may still fit in what the write-ahead log holds: go on until one fails, then take the room it gave back.
        var switched = false
        while admin.errorName("Manager", "SetBackgroundRefreshEnabled", { try $0.append(Self.alerts); try $0.append(switched) }) == nil {
            switched.toggle()
        }
        #expect(daemon.waitForLog(containing: "emptied the state database's write-ahead log"), "\(daemon.log.suffix(2000))")
        disk.fill()
        try admin.call("Manager", "SimulateWake")
        #expect(daemon.waitForLog(containing: "cannot note which process \(app) runs as"), "\(daemon.log.suffix(2000))")
        let cgroup = try LaunchTests.launchedCgroup(of: app, in: daemon)
        defer { LaunchTests.removeCgroup(cgroup) }
        disk.makeRoom()
        #expect(daemon.waitForLog(containing: "noted which process \(app) runs as, now that it could be stored", timeout: .seconds(15)),
                "\(daemon.log.suffix(2000))")

        _ = try daemon.crashAndRestart()
        #expect(daemon.waitForLog(containing: "took over \(app) (pid"), "\(daemon.log.suffix(2000))")
        let again = try RawClient(daemon)
        #expect(try again.waitForAppState(app, in: ["background, suspended"]) == "background, suspended", "\(daemon.log.suffix(2000))")
        #expect(daemon.stop() == .status(0))
    }

    /// On a small file system the daemon's own write-ahead log is what fills
    /// it: 400 pushes that replace one another (one collapse id) hold one
    /// push, yet the log grew to the whole 1 MB, and from then on every write
    /// failed and the daemon could not start again. A write that fails for
    /// want of room now empties the log, so the next ones succeed.
    @Test(.enabled(if: StorageFullTests.canMount, "needs root to mount a tmpfs"))
    func theDaemonsOwnLogDoesNotKeepASmallDiskFull() throws {
        let disk = try SmallDisk(size: "1m")
        let daemon = try daemon(on: disk)
        let sender = try RawClient(daemon)
        var failed = 0
        for n in 0..<400 {
            let push = PushTests.push(#"{"aps":{},"n":\#(n),"pad":"\#(String(repeating: "x", count: 1000))"}"#,
                                      app: Self.chat, options: ["collapse_id": .string("same")])
            if sender.errorName("RemoteNotifications", "DeliverPush", push) != nil { failed += 1 }
        }
        // One write fails each time the log has filled the disk (about every 70 here); all failed from the 58th before.
        #expect(failed <= 20, "\(failed) of 400 failed: \(daemon.log.suffix(2000))")
        #expect(try held(sender) == 1)
        _ = try daemon.crashAndRestart()
        let again = try RawClient(daemon)
        #expect(try held(again) == 1, "\(daemon.log.suffix(2000))")
        #expect(daemon.stop() == .status(0))
    }

    /// The app completes its push in time, but the disk is full and the
    /// completion is refused with StorageFailed: when the budget runs out it
    /// was SIGTERMed and an offence counted, for the daemon's disk. Now the
    /// wake fails without either, and the push waits for the next wake.
    @Test(.enabled(if: StorageFullTests.canMount, "needs root to mount a tmpfs"))
    func anAppWhoseCompletionCouldNotBeStoredIsNotPunished() throws {
        // The app's process gets the push and leaves it to the test's connection of the same app to complete.
        let (disk, daemon, sender, woken, token) = try pushHeldByAnAppThatNeverCompletesIt()
        let completer = try RawClient(daemon)
        try completer.call("Manager", "CheckIn") { try $0.append(Self.chat) }
        try completer.call("Manager", "SetApplicationState") { try $0.append("background") }

        disk.fill()
        var refused = false
        for _ in 0..<3 where !refused {
            disk.fill()  // the room a failed write makes by emptying the write-ahead log
            refused = completer.errorName("RemoteNotifications", "CompleteNotification") {
                try $0.append(token)
                try $0.append("newData")
            } == Self.storageFailed
        }
        #expect(refused, "\(daemon.log.suffix(1500))")
        // Past the budget (2 s): no SIGTERM, no offence.
        #expect(daemon.process.waitForStandardError(containing: "the completion could not be stored", timeout: .seconds(10)), "\(daemon.log.suffix(2000))")
        #expect(woken.isRunning, "\(woken.lines)")
        #expect(!daemon.log.contains("overstayed"), "\(daemon.log.suffix(2000))")
        disk.makeRoom()
        let chat = try sender.applications().first { $0["app_id"] == .string(Self.chat) }
        #expect(chat?["push_offences"] == .uint64(0), "\(String(describing: chat))")
        #expect(try held(sender) == 1, "the push waits for the next wake")
        woken.stop()
        #expect(daemon.stop() == .status(0))
    }

    /// A wake whose budget runs out while the disk is full: the push plugin
    /// cannot store the offence nor put the push back, so the batch is undone,
    /// but the wake is gone. The push stayed "being delivered" until a restart;
    /// now the expiry is handed to the plugin again once there is room.
    @Test(.enabled(if: StorageFullTests.canMount, "needs root to mount a tmpfs"))
    func anExpiryThatCannotBeStoredIsHandedOverAgainWhenThereIsRoom() throws {
        let (disk, daemon, sender, stubborn, _) = try pushHeldByAnAppThatNeverCompletesIt()

        disk.fill()
        // Writes may still fit in what the write-ahead log already holds; go on until one does not.
        var full = false
        for n in 0..<500 where !full {
            full = sender.errorName("RemoteNotifications", "DeliverPush", Self.silentPush(n)) == Self.storageFailed
        }
        #expect(full, "the disk never filled")
        disk.fill()  // the room the daemon made by emptying its write-ahead log

        // The budget runs out (2 s): the offence and the push's return cannot be stored.
        #expect(daemon.process.waitForStandardError(containing: "go to it again", timeout: .seconds(10)), "\(daemon.log.suffix(2000))")
        #expect(!daemon.log.contains("did not complete push"), "the log does not claim what was undone")

        disk.makeRoom()
        // Retried by itself (no call comes meanwhile): the offence is counted and the push waits for the next wake.
        #expect(daemon.process.waitForStandardError(containing: "did not complete push", timeout: .seconds(20)), "\(daemon.log.suffix(3000))")
        let next = try PushTests().app(daemon)
        #expect(next.waitForSignals(1), "the push goes to the next instance: \(daemon.log.suffix(3000))")
        let (token, json) = try PushTests().firstPush(next)
        #expect(json.contains(#""n":7"#))
        try next.call("RemoteNotifications", "CompleteNotification") { try $0.append(token); try $0.append("newData") }
        let chat = try sender.applications().first { $0["app_id"] == .string(Self.chat) }
        #expect(chat?["push_offences"] == .uint64(1), "\(String(describing: chat))")
        stubborn.stop()
        #expect(daemon.stop() == .status(0))
    }

    /// Two crossings in a row that cannot be stored are both undone, and the
    /// next fix once there is room sees the crossing. Before, undoing the
    /// first left its side change noted; the second batch's undo replayed it
    /// after its own, and the region stayed inside with no event, for good.
    @Test(.enabled(if: StorageFullTests.canMount, "needs root to mount a tmpfs"))
    func crossingsThatCannotBeStoredAreSeenWhenThereIsRoom() throws {
        let disk = try SmallDisk(size: "2m")
        let daemon = try DaemonUnderTest(settings: ["Location.DwellSec=0"], stateDirectory: disk.path + "/state", desktopEntries: [
            DesktopEntrySpec(id: LocationTests.app, name: "Walk", modes: ["location"], exec: "/bin/false"),
        ])
        let location = LocationTests()
        let app = try location.app(daemon)
        let admin = try RawClient(daemon)
        try location.monitor(app, "a")
        try location.simulate(admin, LocationTests.north(1500))
        location.pass(app, 0.3)
        #expect(try location.state(of: admin) == "outside")

        disk.fill()
        let inside = LocationTests.north(0)
        for attempt in 1...2 {
            disk.fill()  // again: a failed write empties the daemon's write-ahead log, which makes room
            let error = admin.errorName("Location", "SimulateLocation") {
                try $0.append(inside.0)
                try $0.append(inside.1)
                try $0.append(10.0)
            }
            #expect(error == Self.storageFailed, "fix \(attempt) inside on a full disk")
            location.pass(app, 0.3)
            #expect(try location.state(of: admin) == "outside", "after fix \(attempt): the crossing is undone")
            #expect(try location.regionEvents(app).isEmpty)
        }

        disk.makeRoom()
        try location.simulate(admin, inside)
        #expect(app.waitForSignals(1), "\(daemon.log.suffix(2000))")
        #expect(try location.regionEvents(app).map(\.event) == ["enter"])
        #expect(try location.state(of: admin) == "inside")
        #expect(daemon.stop() == .status(0))
    }

    /// A transfer that cannot be stored is not started: no id, no listing, no bytes fetched.
    @Test(.enabled(if: StorageFullTests.canMount, "needs root to mount a tmpfs"))
    func aTransferThatCannotBeStoredIsNeverStarted() throws {
        let disk = try SmallDisk(size: "1m")
        let server = try TransferServer()
        let daemon = try DaemonUnderTest(stateDirectory: disk.path + "/state", desktopEntries: [
            DesktopEntrySpec(id: TransfersTests.app, modes: ["transfer"], exec: "/bin/false"),
        ])
        let cache = daemon.home + "/.cache/" + TransfersTests.app
        try FileManager.default.createDirectory(atPath: cache, withIntermediateDirectories: true)
        let client = try TransfersTests().app(daemon)
        disk.fill()
        var accepted: [String] = []
        var failure: BusError?
        for n in 0..<2000 {
            do {
                // Long URLs fill the write-ahead log sooner; a throttled server keeps accepted ones unfinished.
                let url = server.url("/blob/1M?rate=1000&n=\(n)&pad=" + String(repeating: "x", count: 3000))
                accepted.append(try TransfersTests().start(client, url: url, path: cache + "/f\(n).bin"))
            } catch let error as BusError {
                failure = error
                break
            }
        }
        #expect(failure?.name == Self.storageFailed && failure?.message.contains("the disk is full") == true, "\(String(describing: failure))")
        let listed = try TransfersTests().list(client).compactMap { entry -> String? in
            if case .string(let id)? = entry["transfer_id"] { id } else { nil }
        }
        #expect(listed == accepted, "every transfer answered with an id is listed, and no other")
        let stats = try server.json("/stats")
        let requested = stats["requests"] as? Int ?? -1
        #expect(requested >= 0 && requested <= accepted.count, "no request for a transfer that was refused")
        // The refused one is number accepted.count: the server never saw its URL (whether or not a slot was free).
        let paths = (stats["per_path"] as? [String: Any])?.keys.map { $0 } ?? []
        #expect(!paths.contains { $0.contains("&n=\(accepted.count)&") }, "\(paths.count) paths asked for")
        disk.makeRoom()
        let id = try TransfersTests().start(client, url: server.url("/blob/1K"), path: cache + "/after.bin")
        #expect(try TransfersTests().waitForFinished(client, id)?.result == "success", "\(daemon.log.suffix(2000))")
        #expect(daemon.stop() == .status(0))
    }

    @Test(.enabled(if: StorageFullTests.canMount, "needs root to mount a tmpfs"))
    func startingOnAFullDiskSaysSoWithItsOwnExitStatus() throws {
        let disk = try SmallDisk(size: "256k")
        disk.fill()
        let result = try CommandResult.run(BinaryLocator.path(of: "bgtaskd"), [
            "--bus", "unix:path=/nonexistent/bus", "--state-dir", disk.path + "/state",
        ], environment: ["HOME": disk.path, "XDG_DATA_HOME": disk.path + "/data", "XDG_CONFIG_HOME": disk.path + "/config"])
        #expect(result.exit == .status(74), "\(result)")
        #expect(result.standardError.contains("the disk is full"), "\(result)")
        #expect(!result.standardError.contains("disk I/O error"), "\(result)")
        // With room it starts (and, here, stops at the missing bus: the database was fine).
        disk.makeRoom()
        let again = try CommandResult.run(BinaryLocator.path(of: "bgtaskd"), [
            "--bus", "unix:path=/nonexistent/bus", "--state-dir", disk.path + "/state",
        ], environment: ["HOME": disk.path, "XDG_DATA_HOME": disk.path + "/data", "XDG_CONFIG_HOME": disk.path + "/config"])
        #expect(again.exit == .status(69), "\(again)")
    }

    /// A state directory that could not be made said only "The operation
    /// could not be completed. (NSCocoaErrorDomain error 512.)".
    @Test func aStateDirectoryThatCannotBeMadeSaysWhy() throws {
        let scratch = FileManager.default.temporaryDirectory.appendingPathComponent("bgtaskd-afile-\(UUID())").path
        try "not a directory".write(toFile: scratch, atomically: true, encoding: .utf8)
        defer { unlink(scratch) }
        let bus = try PrivateBus()
        defer { bus.stop() }
        let result = try CommandResult.run(BinaryLocator.path(of: "bgtaskd"), ["--bus", bus.address, "--state-dir", scratch + "/state"])
        #expect(result.exit == .status(73) && result.standardError.contains("cannot create the state directory")
                && result.standardError.contains("Not a directory"), "\(result)")
    }

    /// A state directory that is a link to nothing said "File exists".
    @Test func aStateDirectoryLinkedToNothingSaysSo() throws {
        let link = FileManager.default.temporaryDirectory.appendingPathComponent("bgtaskd-dangling-\(UUID())").path
        #expect(symlink("/nonexistent/bgtaskd-state", link) == 0)
        defer { unlink(link) }
        let bus = try PrivateBus()
        defer { bus.stop() }
        let result = try CommandResult.run(BinaryLocator.path(of: "bgtaskd"), ["--bus", bus.address, "--state-dir", link])
        #expect(result.exit == .status(73) && result.standardError.contains(
            "cannot use the state directory \(link): \(link) is a symbolic link to /nonexistent/bgtaskd-state, which leads nowhere"), "\(result)")
        // A link on the way (a dotfiles link to a folder since moved) said "File exists" too.
        let below = try CommandResult.run(BinaryLocator.path(of: "bgtaskd"), ["--bus", bus.address, "--state-dir", link + "/bgtaskd"])
        #expect(below.exit == .status(73) && below.standardError.contains(
            "cannot use the state directory \(link)/bgtaskd: \(link) is a symbolic link to /nonexistent/bgtaskd-state, which leads nowhere"),
            "\(below)")
    }

    /// A state directory on a read-only mount stopped start-up with 65, the
    /// status of a database that must not be touched (and one systemd
    /// restarted into five times): nothing is wrong with it; it cannot be
    /// written. 73, as for one that cannot be made.
    @Test(.enabled(if: StorageFullTests.canMount, "needs root to mount a tmpfs"))
    func aReadOnlyStateDirectoryStopsStartUpWith73() throws {
        let disk = try SmallDisk(size: "4m")
        let first = try DaemonUnderTest(stateDirectory: disk.path + "/state")
        #expect(first.stop() == .status(0))
        let remounted = try CommandResult.run("/bin/mount", ["-o", "remount,ro", disk.path])
        try #require(remounted.succeeded, "\(remounted)")
        let second = try CommandResult.run(
            BinaryLocator.path(of: "bgtaskd"), ["--bus", "unix:path=/nonexistent", "--state-dir", disk.path + "/state"], timeout: .seconds(20))
        #expect(second.exit == .status(73), "\(second)")
    }

    @Test func anEmptyDatabaseStopsStartUp() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("bgtaskd-empty-\(UUID())").path
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        #expect(FileManager.default.createFile(atPath: directory + "/bgtaskd.sqlite3", contents: Data()))
        let result = try CommandResult.run(BinaryLocator.path(of: "bgtaskd"), [
            "--bus", "unix:path=/nonexistent/bus", "--state-dir", directory,
        ], environment: ["HOME": directory, "XDG_DATA_HOME": directory + "/data", "XDG_CONFIG_HOME": directory + "/config"])
        #expect(result.exit == .status(65), "\(result)")
        #expect(result.standardError.contains("is empty, but bgtaskd never leaves its database empty"), "\(result)")
    }
}
