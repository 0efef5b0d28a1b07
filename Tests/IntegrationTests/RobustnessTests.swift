import BgTaskCore
import BgTaskTestKit
import Foundation
import SDBus
import Testing

/// The daemon survives any message sequence: random members, signatures and
/// values, from clients that vanish mid-call.
@Suite struct RobustnessTests {
    static let members = [
        "BeginBackgroundTask", "EndBackgroundTask", "GetBackgroundTimeRemaining", "SetApplicationState",
        "CheckIn", "SimulateSleep", "SimulateWake", "NoSuchMethod", "",
    ]


    static func randomValue(_ rng: inout SplitMix64, depth: Int = 0) -> BusValue {
        let strings = ["", "background", "active", "inactive", "org.example.App", "x", "a.b.c",
                       String(repeating: "é", count: 300), "org.example.\u{1F600}", "a\u{1}b"]  // a NUL cannot be sent: refused before sd-bus
        switch Int.random(in: 0..<(depth > 1 ? 6 : 9), using: &rng) {
        case 0: return .string(strings.randomElement(using: &rng)!)
        case 1: return .uint32(UInt32.random(in: 0...UInt32.max, using: &rng))
        case 2: return .uint32([0, 1, 2, UInt32.max].randomElement(using: &rng)!)
        case 3: return .double([Double.nan, .infinity, -1, 0, 1e300].randomElement(using: &rng)!)
        case 4: return .bool(Bool.random(using: &rng))
        case 5: return .int64(Int64.random(in: .min ... .max, using: &rng))
        case 6: return .array(element: "s", (0..<Int.random(in: 0..<4, using: &rng)).map { _ in .string("x") })
        case 7: return .dictionary(key: "s", value: "v", [.init(key: .string("k"), value: .variant(randomValue(&rng, depth: depth + 1)))])
        default: return .structure([randomValue(&rng, depth: depth + 1), randomValue(&rng, depth: depth + 1)])
        }
    }

    /// The log went through Foundation's FileHandle.write, which traps when
    /// the write fails: a daemon whose standard error went to a full disk
    /// died at its first log line (SIGILL). A line that cannot be written is
    /// lost now, and the daemon goes on.
    @Test func aLogThatCannotBeWrittenDoesNotStopTheDaemon() throws {
        let bus = try PrivateBus()
        defer { bus.stop() }
        let state = NSTemporaryDirectory() + "bgtaskd-full-log-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        defer { try? FileManager.default.removeItem(atPath: state) }
        let daemon = try ChildProcess("/bin/sh", ["-c", "exec \"$1\" --bus \"$2\" --state-dir \"$3\" --log-level debug 2>/dev/full",
                                                  "sh", BinaryLocator.path(of: "bgtaskd"), bus.address, state])
        let ready = ContinuousClock.now + .seconds(20)
        var answered = false
        while !answered, ContinuousClock.now < ready, daemon.isRunning {
            answered = (try? CommandResult.run("/usr/bin/busctl", ["--address", bus.address, "call", "org.bgtaskd.BackgroundTasks1",
                "/org/bgtaskd/BackgroundTasks1", "org.bgtaskd.BackgroundTasks1.Manager", "BeginBackgroundTask", "s", "logged"]))?.succeeded == true
            if !answered { Thread.sleep(forTimeInterval: 0.1) }
        }
        #expect(answered, "the daemon answered with its log going nowhere")
        #expect(daemon.isRunning)
        daemon.send(SIGTERM)
        #expect(daemon.waitForExit(timeout: .seconds(10)) == .status(0))
    }

    /// The database deleted under the running daemon: writes were still
    /// answered, went into the deleted file, and the next start began afresh
    /// without a word. The daemon now stops at once, saying why.
    @Test func aDatabaseDeletedWhileTheDaemonRunsStopsIt() throws {
        let daemon = try DaemonUnderTest()
        for suffix in ["", "-wal", "-shm"] { unlink(daemon.stateDirectory + "/bgtaskd.sqlite3" + suffix) }
        let exit = daemon.process.waitForExit(timeout: .seconds(15))
        #expect(exit == .status(74), "\(String(describing: exit)) \(daemon.log.suffix(1000))")
        #expect(daemon.log.contains("was deleted or replaced while bgtaskd ran"), "\(daemon.log.suffix(1000))")
    }

    /// The write-ahead log alone deleted under the running daemon: commits
    /// went on into the deleted log, each reply claiming a write the next
    /// start would not see (found by an outside test). It stops the daemon too.
    @Test func aWriteAheadLogDeletedWhileTheDaemonRunsStopsIt() throws {
        let daemon = try DaemonUnderTest()
        #expect(FileManager.default.fileExists(atPath: daemon.stateDirectory + "/bgtaskd.sqlite3-wal"))
        unlink(daemon.stateDirectory + "/bgtaskd.sqlite3-wal")
        let exit = daemon.process.waitForExit(timeout: .seconds(15))
        #expect(exit == .status(74), "\(String(describing: exit)) \(daemon.log.suffix(1000))")
        #expect(daemon.log.contains("was deleted or replaced while bgtaskd ran"), "\(daemon.log.suffix(1000))")
    }

    /// One connection pipelining GetApplications held every other caller up
    /// for tens of seconds and piled the replies up in memory. Beyond its
    /// share (50 at once, 50 a second) a connection is refused at once with
    /// LimitsExceeded, which costs next to nothing; others are served.
    @Test func aConnectionFloodingGetApplicationsIsRefusedBeyondItsShare() throws {
        let daemon = try DaemonUnderTest(desktopEntries: (1...20).map {
            DesktopEntrySpec(id: "org.example.App\($0)", modes: ["fetch", "remote-notification"], exec: "/bin/true")
        })
        let flooder = try RawClient(daemon)
        // Identified first: calls that wait for that are limited on their own (256).
        #expect(flooder.errorName("Manager", "GetBackgroundTimeRemaining") == nil)
        var answered = 0, refused = 0, other: [String] = []
        let count = 1000
        for _ in 0..<count {
            let call = try flooder.bus.newMethodCall(
                destination: "org.bgtaskd.BackgroundTasks1", path: "/org/bgtaskd/BackgroundTasks1",
                interface: "org.bgtaskd.BackgroundTasks1.Manager", member: "GetApplications")
            try flooder.bus.callAsync(call) { result in
                switch result {
                case .success: answered += 1
                case .failure(let error) where error.name == "org.freedesktop.DBus.Error.LimitsExceeded": refused += 1
                case .failure(let error): other.append(error.description)
                }
            }
        }
        flooder.bus.flush()
        let deadline = ContinuousClock.now + .seconds(60)
        while answered + refused + other.count < count, ContinuousClock.now < deadline {
            if try !flooder.bus.processPending() { try flooder.bus.wait(timeout: 100_000) }
        }
        #expect(other.isEmpty, "\(other.prefix(3))")
        #expect(answered >= 50 && refused >= count / 2, "\(answered) answered, \(refused) refused")
        #expect(try RawClient(daemon).errorName("Manager", "GetApplications") == nil, "another connection is served")
        #expect(daemon.stop() == .status(0))
    }

    /// The foreground history the daemon keeps grew for good: every switch
    /// to the foreground of any id any client checked in as added a row.
    /// Intervals are kept 60 days, and only for apps with a desktop entry.
    @Test func theUsageHistoryKeepsSixtyDaysOfInstalledAppsOnly() throws {
        let daemon = try DaemonUnderTest(desktopEntries: [DesktopEntrySpec(id: "org.example.Used", modes: ["fetch"], exec: "/bin/true")])
        func rows() throws -> String {
            let query = try CommandResult.run("/usr/bin/python3", ["-c", """
                import sqlite3, sys
                db = sqlite3.connect(sys.argv[1])
                for app, count in db.execute("SELECT app_id, count(*) FROM usage_interval GROUP BY app_id ORDER BY app_id"):
                    print(app, count)
                """, daemon.stateDirectory + "/bgtaskd.sqlite3"])
            return query.standardOutput
        }
        _ = try daemon.crashAndRestart {
            let now = UInt64(Date().timeIntervalSince1970 * 1_000_000)
            let seed = try CommandResult.run("/usr/bin/python3", ["-c", """
                import sqlite3, sys
                db = sqlite3.connect(sys.argv[1])
                old, recent = int(sys.argv[2]) - 90 * 86400 * 10**6, int(sys.argv[2]) - 86400 * 10**6
                db.execute("INSERT INTO usage_interval (app_id, start_usec, end_usec) VALUES ('org.example.Used', ?, ?)", (old, old + 10**6))
                db.execute("INSERT INTO usage_interval (app_id, start_usec, end_usec) VALUES ('org.example.Used', ?, ?)", (recent, recent + 10**6))
                db.commit()
                """, daemon.stateDirectory + "/bgtaskd.sqlite3", String(now)])
            #expect(seed.succeeded, "\(seed)")
        }
        for id in ["org.example.Used", "org.example.NoEntry"] {
            let app = try RawClient(daemon)
            try app.call("Manager", "CheckIn") { try $0.append(id) }
            for state in ["background", "active", "background", "active", "background"] {
                try app.call("Manager", "SetApplicationState") { try $0.append(state) }
            }
        }
        #expect(daemon.stop() == .status(0))
        // The 90-day-old interval is gone; the recent one is kept, and the
        // installed app's switches, back within a minute each, make one more.
        let kept = try rows()
        #expect(kept.trimmingCharacters(in: .whitespacesAndNewlines) == "org.example.Used 2", "\(kept)")
    }

    /// Task ids started again at 1 after a restart: an SDK that ended a task
    /// begun before the daemon was killed ended whichever task of the new run
    /// had that id. Ids now go on from run to run, and start again from 1
    /// only when too few are left.
    @Test func taskIDsAreNotHandedOutAgainAfterARestart() throws {
        let daemon = try DaemonUnderTest()
        var client = try RawClient(daemon)
        let old = try client.call("Manager", "BeginBackgroundTask") { try $0.append("before") }.readUInt32()
        #expect(try daemon.crashAndRestart() == .signal(SIGKILL))
        client = try RawClient(daemon)
        let new = try client.call("Manager", "BeginBackgroundTask") { try $0.append("after") }.readUInt32()
        #expect(new > old, "\(new) after \(old)")
        #expect(client.errorName("Manager", "EndBackgroundTask") { try $0.append(old) } == "org.bgtaskd.BackgroundTasks1.Error.NoSuchTask")
        _ = try client.call("Manager", "EndBackgroundTask") { try $0.append(new) }
        // This run reserved the block after its first id; nearly at the end of the id space, the next run starts from 1.
        let reserved = String(new - 1 + (1 << 16))
        var rewritten = 0
        let exit = try daemon.crashAndRestart {
            rewritten = try daemon.rewriteStoredRecords(plugin: "/daemon", collection: "tasks", replacing: reserved, with: "'4294967000'")
        }
        #expect(exit == .signal(SIGKILL) && rewritten == 1)
        client = try RawClient(daemon)
        #expect(try client.call("Manager", "BeginBackgroundTask") { try $0.append("again") }.readUInt32() == 1)
        #expect(daemon.stop() == .status(0))
    }

    /// A value sd-bus refuses leaves the message unsendable: sd-bus may have
    /// added the value's type to the signature already, and a bus daemon
    /// cuts off a connection that sends a message whose body does not match.
    @Test func aMessageAWriteToWhichFailedIsNeverSent() throws {
        let bus = try PrivateBus()
        defer { bus.stop() }
        let connection = try Bus.open(Bus.Address(parsing: bus.address), description: "spoiled")
        let noncharacter = String(Character(Unicode.Scalar(0xFFFE)!))
        let signal = try connection.newSignal(path: "/t", interface: "org.example.T", member: "S")
        #expect(throws: BusError.self) { try signal.append("bad " + noncharacter) }
        #expect(signal.isSpoiled)
        #expect(throws: BusError.self) { try connection.send(signal) }
        let other = try connection.newSignal(path: "/t", interface: "org.example.T", member: "S")
        #expect(throws: BusError.self) { try other.append(value: .signature("((")) }
        #expect(other.isSpoiled)
        let fine = try connection.newSignal(path: "/t", interface: "org.example.T", member: "S")
        try fine.append("fine")
        #expect(!fine.isSpoiled)
        try connection.send(fine)
    }

    @Test func survivesRandomCallsFromVanishingClients() throws {
        let daemon = try DaemonUnderTest()
        var rng = SplitMix64(seed: 20261121)
        var answered = 0
        for client in 0..<40 {
            let bus = try Bus.open(.address(daemon.bus.address))
            for _ in 0..<25 {
                let member = Self.members.randomElement(using: &rng)!
                // An empty member is not even a valid message; Ping on the wrong interface stands in.
                let call = try bus.newMethodCall(
                    destination: "org.bgtaskd.BackgroundTasks1", path: "/org/bgtaskd/BackgroundTasks1",
                    interface: "org.bgtaskd.BackgroundTasks1.Manager", member: member.isEmpty ? "Ping" : member)
                for _ in 0..<Int.random(in: 0..<3, using: &rng) { try call.append(value: Self.randomValue(&rng)) }
                if client % 2 == 0 {
                    // Fire and forget: this client leaves before its answers arrive.
                    try bus.send(call)
                } else {
                    do {
                        _ = try bus.call(call, timeout: 5_000_000)
                    } catch {
                        #expect(!error.name.contains("NoReply") && !error.name.contains("Timeout"), "\(error)")
                    }
                    answered += 1
                }
            }
            // The connection closes here, often with calls in flight.
        }
        #expect(answered > 0)
        #expect(try daemon.property("Version") == "u 1")
        #expect(try daemon.waitForTasks { $0 == "a(ussd) 0" } == "a(ussd) 0", "every vanished client's tasks are gone")
        #expect(daemon.stop() == .status(0))
    }

    @Test func manyCallsBeforeCredentialsArriveAreAllAnswered() throws {
        let daemon = try DaemonUnderTest()
        let bus = try Bus.open(.address(daemon.bus.address))
        // 300 Begins at once: the connection's credentials are still being looked
        // up while they arrive. Up to 256 wait for the lookup (and 100 of those open
        // tasks, Tasks.MaxPerConnection); the rest are refused at once. None hangs.
        for i in 0..<300 {
            let call = try bus.newMethodCall(
                destination: "org.bgtaskd.BackgroundTasks1", path: "/org/bgtaskd/BackgroundTasks1",
                interface: "org.bgtaskd.BackgroundTasks1.Manager", member: "BeginBackgroundTask")
            try call.append("t\(i)")
            try bus.send(call)
        }
        bus.flush()
        var answered: Message?
        let deadline = ContinuousClock.now + .seconds(10)
        while answered == nil && ContinuousClock.now < deadline {
            let check = try bus.newMethodCall(
                destination: "org.bgtaskd.BackgroundTasks1", path: "/org/bgtaskd/BackgroundTasks1",
                interface: "org.bgtaskd.BackgroundTasks1.Manager", member: "GetBackgroundTimeRemaining")
            do {
                answered = try bus.call(check, timeout: 10_000_000)
            } catch {
                #expect(error.name == "org.bgtaskd.BackgroundTasks1.Error.LimitExceeded", "\(error)")
                Thread.sleep(forTimeInterval: 0.05)
            }
        }
        #expect(answered?.signature == "d")
        let tasks = try daemon.property("Tasks")
        #expect(tasks.hasPrefix("a(ussd) 100 "), "Tasks.MaxPerConnection (100) caps the connection: \(tasks.prefix(40))")
        #expect(daemon.stop() == .status(0))
    }
}
