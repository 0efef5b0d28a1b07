import BgTaskTestKit
import Foundation
import Testing

/// A third-party plugin built from the ABI header and PluginKit alone
/// (`Examples/HelloMode`): installed under its mode's file name, it loads,
/// exports its method, owns its configuration key, and declares its errors.
@Suite struct HelloModeTests {
    /// A directory only we can write, holding the built example as `libbgtaskd-mode-hello.so`.
    static func install() throws -> String {
        let built = URL(fileURLWithPath: BinaryLocator.path(of: "bgtaskd")).deletingLastPathComponent().path + "/libHelloMode.so"
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("bgtaskd-hello-\(UUID())").path
        try FileManager.default.createDirectory(
            atPath: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o755])
        try FileManager.default.copyItem(atPath: built, toPath: directory + "/libbgtaskd-mode-hello.so")
        return directory
    }

    @Test func loadsExportsItsMethodAndReadsItsKey() throws {
        let directory = try Self.install()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let daemon = try DaemonUnderTest(settings: ["Hello.Repeat=2"], arguments: ["--plugin-dir", directory])
        #expect(try daemon.property("Plugins") == #"a(ssu) 1 "hello" "1.0.0" 1"#)
        let greeting = try daemon.busctl([
            "call", "org.bgtaskd.BackgroundTasks1", "/org/bgtaskd/BackgroundTasks1", "org.example.Hello1", "Greet", "s", "world",
        ])
        #expect(greeting.standardOutput.trimmingCharacters(in: .whitespacesAndNewlines) == #"s "hello hello, world""#, "\(greeting)")
        let refused = try daemon.busctl([
            "call", "org.bgtaskd.BackgroundTasks1", "/org/bgtaskd/BackgroundTasks1", "org.example.Hello1", "Greet", "s", "",
        ])
        #expect(refused.standardError.contains("say who is to be greeted"), "\(refused)")
        let xml = try daemon.gdbus(["introspect", "--session", "--xml", "--dest", "org.bgtaskd.BackgroundTasks1",
                                    "--object-path", "/org/bgtaskd/BackgroundTasks1"])
        #expect(xml.standardOutput.contains(#"<interface name="org.example.Hello1">"#))
        // The error it answered with is declared: no warning about it.
        #expect(!daemon.log.contains("which it does not declare"), "\(daemon.log)")
        #expect(daemon.stop() == .status(0))
    }

    /// The plugin's key is checked by the daemon's parser, with the same errors as the daemon's own keys.
    @Test func itsKeyIsCheckedBeforeStart() throws {
        let directory = try Self.install()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let result = try CommandResult.run(
            BinaryLocator.path(of: "bgtaskd"), ["--plugin-dir", directory, "--set", "Hello.Repeat=11"], timeout: .seconds(20))
        #expect(result.exit == .status(78), "\(result)")
        #expect(result.standardError.contains("--set 'Hello.Repeat=11': Hello.Repeat: must be at most 10, got 11"), "\(result)")
        // Without the plugin, a section no mode of the daemon's owns is simply unknown;
        // one of a known mode names the plugin that is missing.
        let without = try CommandResult.run(
            BinaryLocator.path(of: "bgtaskd"), ["--plugin-dir", directory + "/none", "--set", "Hello.Repeat=2"], timeout: .seconds(20))
        #expect(without.exit == .status(78), "\(without)")
        #expect(without.standardError.contains("Hello.Repeat: unknown section [Hello]"), "\(without)")
        let fetch = try CommandResult.run(
            BinaryLocator.path(of: "bgtaskd"), ["--plugin-dir", directory, "--set", "Fetch.WakeBudgetSec=2"], timeout: .seconds(20))
        #expect(fetch.exit == .status(78), "\(fetch)")
        #expect(fetch.standardError.contains(
            "Fetch.WakeBudgetSec: [Fetch] belongs to the fetch mode, whose plugin (libbgtaskd-mode-fetch.so) is not loaded"), "\(fetch)")
    }

    /// `bgtaskd --help` lists the bundled plugins' keys with their defaults and owners.
    @Test func helpListsThePluginsKeys() throws {
        let help = try CommandResult.run(BinaryLocator.path(of: "bgtaskd"), ["--help"], timeout: .seconds(20))
        #expect(help.standardOutput.contains("Fetch.WakeBudgetSec=30"), "\(help)")
        #expect(help.standardOutput.contains("RemoteNotifications.MaxPayloadBytes=4096"), "\(help)")
        #expect(help.standardOutput.contains("(remote-notification plugin)"), "\(help)")
        #expect(help.standardOutput.contains("Tasks.BudgetSec=600"), "\(help)")
        #expect(!help.standardOutput.contains("Hello.Repeat"), "the example is not installed as a mode")
    }

    /// `bgtaskd --plugin-dir DIR --help` listed the default directory's
    /// keys, not those of the plugins that start would load.
    @Test func helpListsTheKeysOfThePluginDirectoryGiven() throws {
        let directory = try Self.install()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        for arguments in [["--plugin-dir", directory, "--help"], ["--help", "--plugin-dir=\(directory)"]] {
            let help = try CommandResult.run(BinaryLocator.path(of: "bgtaskd"), arguments, timeout: .seconds(20))
            #expect(help.standardOutput.contains("Hello.Repeat="), "\(arguments): \(help)")
            #expect(!help.standardOutput.contains("Fetch.WakeBudgetSec"), "\(arguments): \(help)")
            #expect(help.standardOutput.contains("Tasks.BudgetSec=600"), "\(arguments): \(help)")
        }
    }
}
