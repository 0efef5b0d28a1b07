import BgTaskProtocol
import BgTaskTestKit
import Foundation
import Testing

/// `bgtaskctl` against the real daemon.
@Suite struct BgTaskCtlTests {
    /// One entry whose name D-Bus would refuse (U+FFFE is valid UTF-8) does
    /// not fail the list of every app.
    @Test func anEntryWithANoncharacterInItsNameDoesNotBreakTheAppList() throws {
        let daemon = try DaemonUnderTest(desktopEntries: [
            DesktopEntrySpec(id: "org.example.Odd", name: "Bad\u{FFFE}Name", modes: ["fetch"], exec: "/bin/true"),
            DesktopEntrySpec(id: "org.example.Fine", name: "Fine", modes: ["fetch"], exec: "/bin/true"),
        ])
        let apps = try daemon.bgtaskctl(["apps"])
        #expect(apps.succeeded && apps.standardOutput.contains("org.example.Odd") && apps.standardOutput.contains("org.example.Fine"), "\(apps)")
        #expect(daemon.stop() == .status(0))
    }

    @Test func statusAndTasksShowWhatTheDaemonHolds() throws {
        let daemon = try DaemonUnderTest()
        let app = try daemon.startTestApp(["--app-id", "org.example.Weather", "--tasks", "2", "--name", "forecast"])
        #expect(app.waitForEvent("ready") != nil, "\(app.lines) \(app.standardError)")
        _ = try daemon.waitForTasks { $0.hasPrefix("a(ussd) 2") }

        let table = try daemon.bgtaskctl(["tasks"])
        #expect(table.succeeded, "\(table)")
        let rows = table.standardOutput.split(separator: "\n")
        #expect(rows.first?.contains("OWNER") == true)
        #expect(rows.filter { $0.contains("org.example.Weather") && $0.contains("forecast") }.count == 2, "\(table)")

        let json = try daemon.bgtaskctl(["tasks", "--json"])
        let decoded = try JSONSerialization.jsonObject(with: Data(json.standardOutput.utf8)) as? [String: Any]
        let tasks = try #require(decoded?["tasks"] as? [[String: Any]])
        #expect(tasks.count == 2)
        #expect(tasks.allSatisfy { $0["owner"] as? String == "org.example.Weather" && $0["unlimited"] as? Bool == true })

        let status = try daemon.bgtaskctl(["status", "--json"])
        let state = try JSONSerialization.jsonObject(with: Data(status.standardOutput.utf8)) as? [String: Any]
        #expect(state?["task_count"] as? Int == 2)
        #expect(state?["version"] as? Int == 1)
        #expect(state?["pid"] as? Int == Int(daemon.process.pid))
        app.stop()
        #expect(daemon.stop() == .status(0))
    }

    /// `fetch simulate` answers once the app has its PerformFetch, and says
    /// why when it cannot get it (it used to print success for any launch).
    @Test func fetchSimulateReportsWhetherTheAppGotItsFetch() throws {
        let scratch = FileManager.default.temporaryDirectory.appendingPathComponent("bgtaskd-simulate-\(UUID())").path
        try FileManager.default.createDirectory(atPath: scratch, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: scratch) }
        try "x\n".write(toFile: scratch + "/source", atomically: true, encoding: .utf8)
        let example = BinaryLocator.path(of: "bgtaskd-example-fetch")
        let daemon = try DaemonUnderTest(settings: ["Fetch.WakeBudgetSec=5"], desktopEntries: [
            DesktopEntrySpec(id: "org.example.Good", modes: ["fetch"],
                             exec: "\(example) --source file://\(scratch)/source --cache \(scratch)/cache"),
            DesktopEntrySpec(id: "org.example.Missing", modes: ["fetch"], exec: "/nonexistent/weather --background"),
            DesktopEntrySpec(id: "org.example.Quits", modes: ["fetch"], exec: "/bin/true"),
        ])
        let good = try daemon.bgtaskctl(["fetch", "simulate", "org.example.Good"])
        #expect(good.succeeded && good.standardOutput.contains("it has its PerformFetch"), "\(good)")
        // Asleep, the fetch waits for the wake: it said "it has its PerformFetch" all the same.
        #expect(try daemon.bgtaskctl(["sleep"]).succeeded)
        let asleep = try daemon.bgtaskctl(["fetch", "simulate", "org.example.Good"])
        #expect(asleep.succeeded && asleep.standardOutput.contains("after the wake"), "\(asleep)")
        let asleepJSON = try daemon.bgtaskctl(["fetch", "simulate", "org.example.Good", "--json"])
        #expect(asleepJSON.standardOutput.contains(#""waits_for":"wake""#) || asleepJSON.standardOutput.contains(#""waits_for" : "wake""#),
                "\(asleepJSON)")
        let woken = try daemon.bgtaskctl(["wake"])
        #expect(woken.succeeded && woken.standardOutput.hasPrefix("Awake: "), "\(woken)")
        // Awake already it said the apps would run in turns; the daemon had nothing to do.
        let again = try daemon.bgtaskctl(["wake"])
        #expect(again.succeeded && again.standardOutput.hasPrefix("Already awake: nothing changed."), "\(again)")
        let missing = try daemon.bgtaskctl(["fetch", "simulate", "org.example.Missing"])
        #expect(missing.exit == .status(1), "\(missing)")
        #expect(missing.standardError.contains("cannot launch org.example.Missing") && missing.standardError.contains("/nonexistent/weather"),
                "\(missing)")
        #expect(!missing.standardError.contains("cannot launch org.example.Missing: cannot launch"), "said once: \(missing)")
        let quits = try daemon.bgtaskctl(["fetch", "simulate", "org.example.Quits"])
        #expect(quits.exit == .status(1), "\(quits)")
        // No "did not complete within 30 s": it went at once, and is no offence.
        #expect(quits.standardError.contains("exited with code 0 without checking in"), "\(quits)")
        #expect(!daemon.log.contains("offence counted") && !daemon.log.contains("did not complete"), "\(daemon.log)")
        #expect(daemon.stop() == .status(0))
    }

    /// The errors any mode's call may get come with the same advice, worded for the mode.
    /// The daemon dying while `fetch simulate` waited for the launch gave
    /// the bus's bare NoReply, and a call to a daemon killed while stopped
    /// said it "may be stopped or stuck" (found by an outside test).
    @Test func aDaemonThatDiesDuringACallIsSaidToHaveLeft() throws {
        let app = "org.example.SlowStart"
        let daemon = try DaemonUnderTest(settings: ["Fetch.WakeBudgetSec=60"], desktopEntries: [
            DesktopEntrySpec(id: app, modes: ["fetch"], exec: "/bin/sleep 60"),
        ])
        let ctl = try ChildProcess(BinaryLocator.path(of: "bgtaskctl"), ["--bus", daemon.bus.address, "fetch", "simulate", app])
        #expect(daemon.waitForLog(containing: "launched \(app) for fetch"), "\(daemon.log)")
        try daemon.crashAndRestart()
        #expect(ctl.waitForExit(timeout: .seconds(20)) == .status(1), "\(ctl.standardError)")
        #expect(ctl.standardError.contains("bgtaskd left the bus before it answered SimulateFetch"), "\(ctl.standardError)")
        #expect(daemon.stop() == .status(0))
    }

    /// A bus that takes the connection and never answers kept bgtaskctl
    /// waiting 90 s (found by an outside test).
    @Test func aBusThatNeverAnswersIsGivenUpOnAfterTheCallsTimeout() throws {
        let (directory, address, listener) = try StartupTests.silentBus()
        defer { close(listener); try? FileManager.default.removeItem(atPath: directory) }
        let started = ContinuousClock.now
        let result = try CommandResult.run(BinaryLocator.path(of: "bgtaskctl"), ["--bus", address, "status"], timeout: .seconds(60))
        #expect(result.exit == .status(1), "\(result)")
        #expect(result.standardError.contains("cannot connect to the bus at \(address): the bus took the connection but did not answer its handshake within 10 s"), "\(result)")
        #expect(ContinuousClock.now - started < .seconds(30))
    }

    @Test func modeErrorsComeWithAdviceForTheirMode() throws {
        let daemon = try DaemonUnderTest(desktopEntries: [DesktopEntrySpec(id: "org.example.Plain", modes: [], exec: "/bin/true")])
        let fetch = try daemon.bgtaskctl(["fetch", "simulate", "org.example.Plain"])
        #expect(fetch.standardError.contains("add fetch to X-BgTaskd-Modes="), "\(fetch)")
        let push = try daemon.bgtaskctl(["push", "org.example.Plain", "-n"])
        #expect(push.standardError.contains("add remote-notification to X-BgTaskd-Modes="), "\(push)")
        let unknown = try daemon.bgtaskctl(["push", "org.example.Nobody", "-n"])
        #expect(unknown.standardError.contains("the daemon finds apps by their desktop entries"), "\(unknown)")
        // With --json the error was on standard error only: a script reading the output got nothing to parse.
        let json = try daemon.bgtaskctl(["--json", "push", "org.example.Nobody", "-n"])
        #expect(json.exit == .status(1) && json.standardError.contains("bgtaskctl: "), "\(json)")
        let document = try #require(try JSONSerialization.jsonObject(with: Data(json.standardOutput.utf8)) as? [String: Any], "\(json)")
        let error = try #require(document["error"] as? [String: Any], "\(json)")
        #expect(error["name"] as? String == BgTaskError.Code.unknownApplication.rawValue, "\(json)")
        #expect((error["message"] as? String)?.isEmpty == false && (error["hint"] as? String)?.contains("desktop entries") == true, "\(json)")
        #expect(daemon.stop() == .status(0))
    }

    /// A number the daemon takes goes out as typed, even one `JSONDecoder`
    /// refuses (`1e-400`, read as 0): it went out as a string.
    @Test func aTinyNumberGoesOutAsANumber() throws {
        let daemon = try DaemonUnderTest(desktopEntries: [DesktopEntrySpec(id: "org.example.Tiny", modes: ["remote-notification"], exec: "/bin/true")])
        let sent = try daemon.bgtaskctl(["push", "org.example.Tiny", "-d", "tiny=1e-400", "--json"])
        #expect(sent.succeeded && sent.standardOutput.contains(#"{\"aps\":{},\"tiny\":1e-400}"#), "\(sent)")
        #expect(daemon.stop() == .status(0))
    }

    /// A region id is the app's text: a right-to-left override in it is shown
    /// escaped, not obeyed (it showed "gnp.exe" as "exe.png" and reversed
    /// the rest of its row).
    @Test func aRegionIdCannotReorderItsRow() throws {
        let daemon = try DaemonUnderTest(desktopEntries: [
            DesktopEntrySpec(id: "org.example.Places", modes: ["location"], exec: "/bin/false"),
        ])
        let app = try RawClient(daemon)
        try app.call("Manager", "CheckIn") { try $0.append("org.example.Places") }
        try app.call("Location", "StartMonitoringRegion") {
            try $0.append("\u{202E}gnp.exe\u{2066}")
            try $0.append(48.8566)
            try $0.append(2.3522)
            try $0.append(200.0)
        }
        let table = try daemon.bgtaskctl(["location", "regions"])
        #expect(table.succeeded && table.standardOutput.contains("\\u{202E}gnp.exe\\u{2066}"), "\(table)")
        #expect(!table.standardOutput.unicodeScalars.contains { [0x202E, 0x2066].contains($0.value) }, "\(table)")
        #expect(daemon.stop() == .status(0))
    }

    /// `location simulate` moves the device as GeoClue would, `location
    /// regions` shows the side of each region; numbers that cannot be a
    /// position are refused as usage errors before any call.
    @Test func locationSimulateAndRegions() throws {
        let daemon = try DaemonUnderTest(settings: ["Location.DwellSec=1"], desktopEntries: [
            DesktopEntrySpec(id: "org.example.Places", modes: ["location"], exec: "/bin/false"),
        ])
        let none = try daemon.bgtaskctl(["location", "regions"])
        #expect(none.succeeded && none.standardOutput == "No regions are monitored.", "\(none)")
        let app = try daemon.startTestApp([
            "--app-id", "org.example.Places", "--tasks", "0", "--location-handler", "complete",
            "--monitor-region", "opera,-33.8568,151.2153,250",
        ])
        #expect(app.waitForEvent("monitored") != nil, "\(app.lines) \(app.standardError)")

        let table = try daemon.bgtaskctl(["location", "regions"])
        let rows = table.standardOutput.split(separator: "\n")
        #expect(rows.count == 2 && rows[0].hasPrefix("APP") && rows[0].contains("STATE"), "\(table)")
        #expect(rows.last.map { ["org.example.Places", "opera", "-33.8568, 151.2153", "250 m", "unknown"].allSatisfy($0.contains) } == true,
                "\(table)")

        // Southern coordinates need no "--"; 1.1 km north of the Opera House is outside.
        let moved = try daemon.bgtaskctl(["location", "simulate", "-33.8468", "151.2153", "--accuracy", "15"])
        #expect(moved.succeeded && moved.standardOutput.contains("-33.8468, 151.2153 (±15 m)"), "\(moved)")
        let deadline = ContinuousClock.now + .seconds(10)
        var region: [String: Any]?
        repeat {
            let listed = try daemon.bgtaskctl(["location", "regions", "org.example.Places", "--json"])
            let decoded = try JSONSerialization.jsonObject(with: Data(listed.standardOutput.utf8)) as? [String: Any]
            region = (decoded?["regions"] as? [[String: Any]])?.first
            if region?["state"] as? String == "outside" { break }
            Thread.sleep(forTimeInterval: 0.05)
        } while ContinuousClock.now < deadline
        #expect(region?["state"] as? String == "outside", "\(String(describing: region))")
        #expect(region?["app_id"] as? String == "org.example.Places" && region?["region_id"] as? String == "opera")
        #expect(region?["radius_m"] as? Double == 250 && region?["latitude"] as? Double == -33.8568, "\(String(describing: region))")

        // At the Opera House: the app gets its crossing.
        let arrived = try daemon.bgtaskctl(["location", "simulate", "-33.8568", "151.2153", "--json"])
        let report = try JSONSerialization.jsonObject(with: Data(arrived.standardOutput.utf8)) as? [String: Any]
        #expect(report?["simulated"] as? Bool == true && report?["accuracy_m"] as? Double == 10, "\(arrived)")
        let event = app.waitForEvent("location_event")
        #expect(event?["region_id"] as? String == "opera" && event?["crossing"] as? String == "enter", "\(app.lines)")

        let other = try daemon.bgtaskctl(["location", "regions", "org.example.Other"])
        #expect(other.succeeded && other.standardOutput == "No regions are monitored for org.example.Other.", "\(other)")

        // Refused by bgtaskctl itself (64); the daemon's refusals would exit 1.
        for arguments in [["nan", "0"], ["91", "0"], ["0", "-181"], ["inf", "0"], ["-33.8568", "151.2153", "--accuracy", "-1"],
                          ["-33.8568", "151.2153", "--accuracy", "nan"], ["1"], ["x", "1"], ["1", "2", "3"],
                          // Hexadecimal was read as a number (0x10: 16°).
                          ["0x10", "5"], ["5", "0x1p4"], ["-33.8568", "151.2153", "--accuracy", "0x10"],
                          ["-33.8568", "151.2153", "--accuracy=inf"]] {
            let refused = try daemon.bgtaskctl(["location", "simulate"] + arguments)
            #expect(refused.exit == .status(64), "\(arguments): \(refused)")
            #expect(refused.standardError.contains("Error: "), "\(arguments): \(refused)")
        }
        app.stop()
        #expect(daemon.stop() == .status(0))
    }

    /// `--bus garbage` was tried as an address ("Connection refused"), and
    /// `bgtaskctl` alone, or `bgtaskctl help` with a mistyped topic, printed
    /// its help and succeeded.
    @Test func noAddressAndNoSubcommandAreUsageErrors() throws {
        let tool = BinaryLocator.path(of: "bgtaskctl")
        for bus in ["garbage", "unix", ":path=/tmp/bus", "unix:path"] {
            let refused = try CommandResult.run(tool, ["--bus", bus, "status"])
            #expect(refused.exit == .status(64) && refused.standardError.contains("is not a D-Bus address"), "\(bus): \(refused)")
        }
        let bare = try CommandResult.run(tool, [])
        #expect(bare.exit == .status(64) && bare.standardError.contains("SUBCOMMANDS"), "\(bare)")
        let help = try CommandResult.run(tool, ["--help"])
        #expect(help.succeeded && help.standardOutput.contains("SUBCOMMANDS"), "\(help)")
        // `help` with a topic that is no subcommand printed the overview and succeeded.
        for topic in [["fecth"], ["location", "simulat"]] {
            let unknown = try CommandResult.run(tool, ["help"] + topic)
            #expect(unknown.exit == .status(64) && unknown.standardError.contains("no subcommand '\(topic.last!)'"), "\(topic): \(unknown)")
        }
        let topic = try CommandResult.run(tool, ["help", "location", "simulate"])
        #expect(topic.succeeded && topic.standardOutput.contains("--accuracy"), "\(topic)")
        // A negative expiration was "Missing value for '--expiration'".
        let negative = try CommandResult.run(tool, ["--bus", "unix:path=/nonexistent", "push", "org.example.A", "-n", "--expiration", "-5"])
        #expect(negative.exit == .status(64) && negative.standardError.contains("'-5' is invalid"), "\(negative)")
        // A negative priority was "Missing value"; "++5" and "-0" were taken as expirations.
        for bad in [["--priority", "-5"], ["--expiration", "++5"], ["--expiration", "-0"]] {
            let refused = try CommandResult.run(tool, ["--bus", "unix:path=/nonexistent", "push", "org.example.A", "-n"] + bad)
            #expect(refused.exit == .status(64) && refused.standardError.contains("'\(bad[1])' is invalid"), "\(bad): \(refused)")
        }
        // "--" before a southern latitude was an unknown option: it gets as far as the bus now.
        let dashes = try CommandResult.run(tool, ["--bus", "unix:path=/nonexistent", "location", "simulate", "--", "-33.8", "151.2"])
        #expect(dashes.exit == .status(1) && dashes.standardError.contains("cannot connect to the bus at unix:path=/nonexistent"), "\(dashes)")
        // A TCP bus that cannot be reached was only "Transport endpoint is not connected".
        let tcp = try CommandResult.run(tool, ["--bus", "tcp:host=127.0.0.1,port=1", "status"])
        #expect(tcp.exit == .status(1) && tcp.standardError.contains("cannot connect to the bus at tcp:host=127.0.0.1,port=1"), "\(tcp)")
        // A number beyond a double's range went out as a string, unseen.
        for huge in ["1e400", "-1E+999", " 1e400 "] {
            let refused = try CommandResult.run(tool, ["--bus", "unix:path=/nonexistent", "push", "org.example.A", "-n", "-d", "x=\(huge)"])
            #expect(refused.exit == .status(64) && refused.standardError.contains("beyond what a double holds"), "\(huge): \(refused)")
        }
        // A group without its verb was help and success: a script that forgot the verb went on.
        for group in ["fetch", "location", "refresh"] {
            let bare = try CommandResult.run(tool, ["--bus", "unix:path=/nonexistent", group])
            #expect(bare.exit == .status(64) && bare.standardError.contains("SUBCOMMANDS"), "\(group): \(bare)")
        }
    }

    /// Whatever owns the daemon's name is read with care: times of -inf
    /// trapped `bgtaskctl tasks` (a conversion to Int), made `--json` fail
    /// whole, and an error's message reached the terminal with its control
    /// sequences.
    @Test func anImpostorsValuesAndErrorsAreShownSafely() throws {
        let bus = try PrivateBus()
        defer { bus.stop() }
        let script = BinaryLocator.packageRoot() + "/Tests/IntegrationTests/Fixtures/impostor-daemon.py"
        let impostor = try ChildProcess("/usr/bin/python3", [script, "--address", bus.address])
        defer { _ = impostor.stop() }
        #expect(impostor.waitForLine { $0 == "ready" } != nil, "\(impostor.standardError)")
        let tool = BinaryLocator.path(of: "bgtaskctl")
        let table = try CommandResult.run(tool, ["--bus", bus.address, "tasks"])
        #expect(table.succeeded, "\(table)")
        #expect(table.standardOutput.contains("minus infinity") && table.standardOutput.contains("0.0s"), "\(table)")
        let json = try CommandResult.run(tool, ["--bus", bus.address, "tasks", "--json"])
        #expect(json.succeeded && json.standardOutput.contains("\"seconds_remaining\":null"), "\(json)")
        let failed = try CommandResult.run(tool, ["--bus", bus.address, "refresh", "status"])
        #expect(failed.exit == .status(1), "\(failed)")
        #expect(!failed.standardError.contains("\u{1B}") && failed.standardError.contains("cleared\\u{1B}[2J\\nforged line"), "\(failed)")
    }

    /// `refresh disable "$APP"` with APP unset turned refresh off for every app.
    @Test func anEmptyAppIsNotTheGlobalSwitch() throws {
        let daemon = try DaemonUnderTest()
        for verb in ["disable", "enable"] {
            let refused = try daemon.bgtaskctl(["refresh", verb, ""])
            #expect(refused.exit == .status(64) && refused.standardError.contains("APP is empty"), "\(refused)")
        }
        // Listings refuse it too rather than list every app's, and an empty payload says what it wants.
        for (arguments, name) in [(["pushes", ""], "APP"), (["location", "regions", ""], "APP"), (["transfers", ""], "SESSION")] {
            let refused = try daemon.bgtaskctl(arguments)
            #expect(refused.exit == .status(64) && refused.standardError.contains("\(name) is empty; leave it out to list"), "\(refused)")
        }
        let payload = try daemon.bgtaskctl(["push", "org.example.News", "-P", ""])
        #expect(payload.exit == .status(64) && payload.standardError.contains("--payload is empty: give a JSON object"), "\(payload)")
        // A payload the daemon refuses says why, not all of itself: one nested
        // 2,000 deep was called "not valid JSON" and printed whole.
        let deep = #"{"aps":{"content-available":1},"d":"# + String(repeating: "[", count: 2000) + String(repeating: "]", count: 2000) + "}"
        let tooDeep = try daemon.bgtaskctl(["push", "org.example.News", "-P", deep])
        #expect(!tooDeep.succeeded && tooDeep.standardError.contains("deeper than 32 levels") && tooDeep.standardError.utf8.count < 1000, "\(tooDeep)")
        let broken = try daemon.bgtaskctl(["push", "org.example.News", "-P", "{"])
        #expect(!broken.succeeded && broken.standardError.contains("not valid JSON"), "\(broken)")
        let status = try daemon.bgtaskctl(["refresh", "status"])
        #expect(status.succeeded && !status.standardOutput.contains("denied"), "\(status)")
        let global = try daemon.bgtaskctl(["refresh", "disable"])
        #expect(global.succeeded && global.standardOutput.contains("all apps"), "\(global)")
        let denied = try daemon.bgtaskctl(["refresh", "status"])
        #expect(denied.standardOutput.contains("denied"), "\(denied)")
        #expect(daemon.stop() == .status(0))
    }

    /// A daemon that owns its name but does not answer was only "Connection timed out".
    @Test func aDaemonThatDoesNotAnswerIsNamed() throws {
        let daemon = try DaemonUnderTest()
        daemon.process.send(SIGSTOP)
        let result = try daemon.bgtaskctl(["status"])
        daemon.process.send(SIGCONT)
        #expect(result.exit == .status(1) && result.standardError.contains("did not answer"), "\(result)")
        #expect(daemon.stop() == .status(0))
    }

    /// A call the bus held while it activated a service that never took the
    /// name was blamed on "bgtaskd owns its name but did not answer".
    @Test func anActivationThatNeverTakesTheNameIsNamed() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("bgtaskd-activation-\(UUID())").path
        try FileManager.default.createDirectory(atPath: directory + "/services", withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try """
            [D-BUS Service]
            Name=org.bgtaskd.BackgroundTasks1
            Exec=/bin/sleep 15
            """.write(toFile: directory + "/services/org.bgtaskd.BackgroundTasks1.service", atomically: true, encoding: .utf8)
        // The session bus's own configuration, with a service directory of the test's.
        try """
            <!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
             "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
            <busconfig>
              <include>/usr/share/dbus-1/session.conf</include>
              <servicedir>\(directory)/services</servicedir>
            </busconfig>
            """.write(toFile: directory + "/bus.conf", atomically: true, encoding: .utf8)
        let bus = try ChildProcess("/usr/bin/dbus-daemon", [
            "--config-file=\(directory)/bus.conf", "--nofork", "--address=unix:path=\(directory)/bus", "--print-address=1",
        ])
        defer { bus.stop() }
        #expect(bus.waitForLine { $0.hasPrefix("unix:") } != nil)
        // sleep: a call that activates (status never does).
        let result = try CommandResult.run(BinaryLocator.path(of: "bgtaskctl"), ["--bus", "unix:path=\(directory)/bus", "sleep"], timeout: .seconds(60))
        #expect(result.exit == .status(1) && result.standardError.contains("no process owns org.bgtaskd.BackgroundTasks1"), "\(result)")
    }

    /// `pushes` and `location regions` with an id that cannot be one listed
    /// nothing and exited 0, as if the app had nothing waiting.
    @Test func listingTheWaitingOfAnInvalidIDIsRefused() throws {
        let daemon = try DaemonUnderTest()
        for arguments in [["pushes", "not an id!"], ["location", "regions", "not an id!"]] {
            let result = try daemon.bgtaskctl(arguments)
            #expect(result.exit == .status(1) && result.standardError.contains("not a valid desktop-file id"), "\(arguments): \(result)")
        }
        for arguments in [["pushes", "org.example.Nothing"], ["location", "regions", "org.example.Nothing"]] {
            #expect(try daemon.bgtaskctl(arguments).succeeded, "\(arguments)")
        }
        #expect(daemon.stop() == .status(0))
    }

    @Test func noDaemonIsAClearError() throws {
        let bus = try PrivateBus()
        let result = try CommandResult.run(BinaryLocator.path(of: "bgtaskctl"), ["--bus", bus.address, "status"])
        #expect(result.exit == .status(1))
        #expect(result.standardError.contains("bgtaskd is not running"), "\(result)")
        #expect(result.standardError.contains("start it: bgtaskd"), "says what to do: \(result)")
        let json = try CommandResult.run(BinaryLocator.path(of: "bgtaskctl"), ["--bus", bus.address, "status", "--json"])
        #expect(json.exit == .status(1), "\(json)")
        let document = try JSONSerialization.jsonObject(with: Data(json.standardOutput.utf8)) as? [String: [String: String]]
        #expect(document?["error"]?["message"]?.contains("bgtaskd is not running") == true && document?["error"]?["name"] == nil,
                "\(json)")
        bus.stop()
    }

    /// A time in another year read as a date in the next months: an
    /// expiration in 2100 showed as "Jan 1 00:00".
    @Test func aTimeInAnotherYearShowsItsYear() throws {
        let daemon = try PushTests().daemon(["RemoteNotifications.SilentPerHour=0"])
        let sender = try RawClient(daemon)
        try sender.call("RemoteNotifications", "DeliverPush", PushTests.push(#"{"aps":{"content-available":1}}"#,
                                                                            options: ["expiration": .uint64(4_102_488_000)]))
        let pushes = try daemon.bgtaskctl(["pushes", PushTests.app])
        #expect(pushes.succeeded && pushes.standardOutput.contains(" 2100 "), "\(pushes)")
        #expect(daemon.stop() == .status(0))
    }

    /// Output that could not be written (a full disk behind `> file`) left
    /// exit status 0, and bgtaskd-sim's `generate` trapped in Foundation.
    @Test func outputThatCannotBeWrittenFailsTheRun() throws {
        for (tool, arguments) in [("bgtaskctl", ["--help"]), ("bgtaskd", ["--bus-introspect", "-"]),
                                  ("bgtaskd-sim", ["--help"]), ("bgtaskd-sim", ["generate", "--apps", "2", "--days", "1"])] {
            let result = try CommandResult.run("/bin/sh", ["-c", "\"$0\" \"$@\" > /dev/full", BinaryLocator.path(of: tool)] + arguments)
            #expect(!result.succeeded && result.standardError.contains("cannot write standard output"), "\(tool) \(arguments): \(result)")
            #expect(!result.standardError.contains("Fatal error"), "\(tool) \(arguments): \(result)")
        }
    }

    /// `--version` was an unknown option (exit 64) in all three tools.
    @Test func everyToolNamesItsVersion() throws {
        for (tool, expected) in [("bgtaskd", ["bgtaskd 1.", "D-Bus API 1", "plugin ABI 1."]),
                                 ("bgtaskctl", ["bgtaskctl 1.", "D-Bus API 1"]), ("bgtaskd-sim", ["bgtaskd-sim 1."])] {
            let result = try CommandResult.run(BinaryLocator.path(of: tool), ["--version"])
            #expect(result.succeeded, "\(tool): \(result)")
            for text in expected { #expect(result.standardOutput.contains(text), "\(tool): \(result)") }
        }
    }

    /// Columns were padded by characters: a task named in CJK pushed the
    /// REMAINING column right by one per character, and a zero-width space
    /// pulled it left. They are padded by terminal columns now.
    @Test func wideAndZeroWidthCharactersKeepTheColumnsAligned() throws {
        let daemon = try DaemonUnderTest()
        let client = try RawClient(daemon)
        for name in ["漢字漢字漢字", "zero\u{200B}width", "plain"] {
            _ = try client.call("Manager", "BeginBackgroundTask") { try $0.append(name) }
        }
        let table = try daemon.bgtaskctl(["tasks"])
        #expect(table.succeeded, "\(table)")
        /// Terminal columns, as a terminal counts them for these characters.
        func columns(_ line: Substring) -> Int {
            line.unicodeScalars.reduce(0) { total, scalar in
                total + ((0x4E00...0x9FFF).contains(scalar.value) ? 2 : scalar.value == 0x200B ? 0 : 1)
            }
        }
        // REMAINING is right-aligned: every line ends in the same column.
        let lines = table.standardOutput.split(separator: "\n")
        #expect(lines.count == 4 && Set(lines.map(columns)).count == 1, "\(table.standardOutput)")
        #expect(daemon.stop() == .status(0))
    }
}
