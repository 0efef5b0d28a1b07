import BgTaskTestKit
import Foundation
import Testing

/// The Manager interface through busctl and gdbus, as a person would use it.
@Suite struct ManagerCallTests {
    @Test func beginAndEndWithGdbus() throws {
        let daemon = try DaemonUnderTest()
        let begun = try daemon.gdbusCall("BeginBackgroundTask", ["upload"])
        #expect(begun.succeeded, "\(begun)")
        #expect(begun.standardOutput.hasPrefix("(uint32 "))
        #expect(begun.standardOutput.contains("1.7976931348623157e+308"), "an active app has DBL_MAX, as iOS")
        // Each gdbus call is a new connection: the task was closed when the first one left,
        // and ids are never reused, so ending it now is NoSuchTask either way.
        let id = try #require(begun.standardOutput.split(separator: " ").dropFirst().first?.dropLast())
        let ended = try daemon.gdbusCall("EndBackgroundTask", [String(id)])
        #expect(!ended.succeeded)
        #expect(ended.standardError.contains("org.bgtaskd.BackgroundTasks1.Error.NoSuchTask"), "\(ended)")
        #expect(daemon.stop() == .status(0))
    }

    @Test func busctlSeesTheDocumentedProperties() throws {
        let daemon = try DaemonUnderTest()
        #expect(try daemon.property("Version") == "u 1")
        #expect(try daemon.property("Sleeping") == "b false")
        #expect(try daemon.property("Tasks") == "a(ussd) 0")
        #expect(try daemon.property("Plugins") == #"a(ssu) 4 "fetch" "1.0.0" 1 "location" "1.0.0" 1 "remote-notification" "1.0.0" 1 "transfer" "1.0.0" 1"#)
        let remaining = try daemon.callManager("GetBackgroundTimeRemaining")
        #expect(remaining.standardOutput == "d 1.79769e+308")
        #expect(daemon.stop() == .status(0))
    }

    @Test func checkInAnswersLaunchInfo() throws {
        let daemon = try DaemonUnderTest()
        let reply = try daemon.callManager("CheckIn", "s", ["org.example.Weather"])
        #expect(reply.standardOutput == #"a{sv} 2 "reason" s "user" "pending" u 0"#, "\(reply)")
        #expect(daemon.stop() == .status(0))
    }

    @Test func simulatedSleepFlipsSleeping() throws {
        let daemon = try DaemonUnderTest()
        #expect(try daemon.callManager("SimulateSleep").succeeded)
        #expect(try daemon.property("Sleeping") == "b true")
        #expect(try daemon.callManager("SimulateWake").succeeded)
        #expect(try daemon.property("Sleeping") == "b false")
        #expect(daemon.stop() == .status(0))
    }

    @Test(arguments: [
        ("BeginBackgroundTask", [String(repeating: "x", count: 257)], "257 bytes"),
        ("SetApplicationState", ["asleep"], "unknown application state 'asleep'"),
        ("CheckIn", ["not an id"], "not a valid desktop-file id"),
        ("CheckIn", ["org.example."], "empty element"),
        ("CheckIn", [""], "it is empty"),
    ])
    func badArgumentsAnswerInvalidArgs(_ member: String, _ arguments: [String], _ reason: String) throws {
        let daemon = try DaemonUnderTest()
        let reply = try daemon.gdbusCall(member, arguments)
        #expect(!reply.succeeded)
        #expect(reply.standardError.contains("org.freedesktop.DBus.Error.InvalidArgs"), "\(reply)")
        #expect(reply.standardError.contains(reason), "\(reply)")
        #expect(daemon.stop() == .status(0))
    }

    @Test func wrongSignatureIsInvalidArgs() throws {
        let daemon = try DaemonUnderTest()
        let reply = try daemon.callManager("BeginBackgroundTask", "u", ["7"])
        #expect(!reply.succeeded)
        #expect(reply.standardError.localizedCaseInsensitiveContains("invalid"), "\(reply)")
        // And the daemon is still there.
        #expect(try daemon.property("Version") == "u 1")
        #expect(daemon.stop() == .status(0))
    }

    @Test func unknownTaskIsNoSuchTask() throws {
        let daemon = try DaemonUnderTest()
        let reply = try daemon.gdbusCall("EndBackgroundTask", ["4242"])
        #expect(reply.standardError.contains("org.bgtaskd.BackgroundTasks1.Error.NoSuchTask: no task 4242 is open on this connection"), "\(reply)")
        #expect(daemon.stop() == .status(0))
    }
}
