import BgTaskTestKit
import Foundation
import Testing

/// The checked-in `dbus/org.bgtaskd.BackgroundTasks1.xml` is the contract: it
/// must describe exactly what the running daemon serves.
@Suite struct IntrospectionDriftTests {
    let checkedIn: IntrospectionSummary

    init() throws {
        let path = BinaryLocator.packageRoot() + "/dbus/org.bgtaskd.BackgroundTasks1.xml"
        checkedIn = try IntrospectionSummary(xml: String(contentsOfFile: path, encoding: .utf8))
    }

    @Test func runningDaemonMatchesTheCheckedInXML() throws {
        let daemon = try DaemonUnderTest()
        let live = try daemon.gdbus(["introspect", "--session", "--xml", "--dest", "org.bgtaskd.BackgroundTasks1",
                                     "--object-path", "/org/bgtaskd/BackgroundTasks1"])
        #expect(live.succeeded, "\(live)")
        let running = try IntrospectionSummary(xml: live.standardOutput)
        #expect(running.lines.contains("interface org.bgtaskd.BackgroundTasks1.Manager"))
        #expect(running == checkedIn, "drift (- only in the XML, + only in the daemon):\n\(running.difference(from: checkedIn))")
        #expect(daemon.stop() == .status(0))
    }

    /// The system-bus policy let no call of Transfers through (the interface
    /// came after the policy was written): every interface the daemon
    /// serves must be allowed there.
    @Test func theSystemBusPolicyAllowsEveryInterface() throws {
        let policy = try String(contentsOfFile: BinaryLocator.packageRoot() + "/dbus/org.bgtaskd.BackgroundTasks1.conf", encoding: .utf8)
        let interfaces = checkedIn.lines.compactMap { $0.hasPrefix("interface ") ? String($0.dropFirst(10)) : nil }
        #expect(interfaces.count >= 5, "\(interfaces)")
        for interface in interfaces {
            #expect(policy.contains("send_interface=\"\(interface)\""), "\(interface) is not allowed by the system-bus policy")
        }
    }

    @Test func busIntrospectOptionMatchesTheCheckedInXML() throws {
        let result = try CommandResult.run(BinaryLocator.path(of: "bgtaskd"), ["--bus-introspect", "-"])
        #expect(result.succeeded, "\(result)")
        let generated = try IntrospectionSummary(xml: result.standardOutput)
        #expect(generated == checkedIn, "drift:\n\(generated.difference(from: checkedIn))")
        // The file is what --bus-introspect writes, in its order too (sd-bus orders a live introspection its own way).
        let sameOrder = generated.order == checkedIn.order
        #expect(sameOrder, "\(generated.difference(from: checkedIn))")
        // Plugins that subscribe, post work or call out while starting are not refused for it.
        #expect(result.standardError.isEmpty, "\(result.standardError)")
    }

    /// It skipped the configuration (a misspelt key passed) and ended an
    /// unwritable file with a raw Foundation error and exit status 1.
    @Test func busIntrospectChecksTheConfigurationAndSaysWhyItCannotWrite() throws {
        let bgtaskd = BinaryLocator.path(of: "bgtaskd")
        let misspelt = try CommandResult.run(bgtaskd, ["--bus-introspect", "-", "--set", "Tasks.BudgetSecs=30"])
        #expect(misspelt.exit == .status(78) && misspelt.standardError.contains("Tasks.BudgetSecs"), "\(misspelt)")
        let unwritable = try CommandResult.run(bgtaskd, ["--bus-introspect", "/nonexistent-bgtaskd-dir/x.xml"])
        #expect(unwritable.exit == .status(73), "\(unwritable)")
        #expect(unwritable.standardError.contains("cannot write the introspection XML to /nonexistent-bgtaskd-dir/x.xml"), "\(unwritable)")
        #expect(!unwritable.standardError.contains("Error Domain"), "\(unwritable)")
        let directory = try CommandResult.run(bgtaskd, ["--bus-introspect", NSTemporaryDirectory()])
        #expect(directory.exit == .status(73) && directory.standardError.contains("it is a directory"), "\(directory)")
        // A full disk was 73 too, where everything else says 74 for it.
        let full = try CommandResult.run(bgtaskd, ["--bus-introspect", "/dev/full"])
        #expect(full.exit == .status(74) && full.standardError.contains("No space left on device"), "\(full)")
    }

    /// The XML was written beside and renamed over the name given: a
    /// symbolic link became a file of its own (its target untouched), and as
    /// root `--bus-introspect /dev/null` replaced /dev/null. Now whatever is
    /// not a regular file is written through; a regular file keeps its mode.
    @Test func busIntrospectWritesThroughALinkAndKeepsAFilesMode() throws {
        let directory = NSTemporaryDirectory() + "bgtaskd-introspect-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: false)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let target = directory + "/target.xml", link = directory + "/link.xml"
        try "old".write(toFile: target, atomically: false, encoding: .utf8)
        #expect(symlink(target, link) == 0)
        let bgtaskd = BinaryLocator.path(of: "bgtaskd")
        let viaLink = try CommandResult.run(bgtaskd, ["--bus-introspect", link])
        #expect(viaLink.exit == .status(0), "\(viaLink)")
        #expect(try FileManager.default.destinationOfSymbolicLink(atPath: link) == target, "the link stays a link")
        #expect(try String(contentsOfFile: target, encoding: .utf8).contains("<node"), "its target gets the XML")
        #expect(chmod(target, 0o640) == 0)
        let plain = try CommandResult.run(bgtaskd, ["--bus-introspect", target])
        #expect(plain.exit == .status(0), "\(plain)")
        #expect((try FileManager.default.attributesOfItem(atPath: target)[.posixPermissions] as? Int) == 0o640)
        // Set-id bits are not kept: the writer owns the file now.
        #expect(chmod(target, 0o4755) == 0)
        _ = try CommandResult.run(bgtaskd, ["--bus-introspect", target])
        #expect((try FileManager.default.attributesOfItem(atPath: target)[.posixPermissions] as? Int) == 0o755)
        // Standard output appended to (>>) is appended to, not truncated through /dev/stdout.
        let log = directory + "/log"
        let appended = try CommandResult.run("/bin/sh", ["-c", "echo first > \"$1\"; \"$2\" --bus-introspect /dev/stdout >> \"$1\"", "sh", log, bgtaskd])
        #expect(appended.succeeded, "\(appended)")
        let logged = try String(contentsOfFile: log, encoding: .utf8)
        #expect(logged.hasPrefix("first\n") && logged.contains("<node"), "\(logged.prefix(200))")
        let sim = try CommandResult.run(BinaryLocator.path(of: "bgtaskd-sim"), ["generate", "--apps", "1", "--days", "1", "-o", link])
        #expect(sim.exit == .status(0), "\(sim)")
        #expect(try FileManager.default.destinationOfSymbolicLink(atPath: link) == target)
        #expect(try String(contentsOfFile: target, encoding: .utf8).hasPrefix("{"), "the trace went through the link")
    }

    @Test func everyArgumentIsNamed() {
        for line in checkedIn.lines where line.contains("(") {
            #expect(!line.contains(" ?"), "unnamed argument in \(line)")
        }
    }
}
