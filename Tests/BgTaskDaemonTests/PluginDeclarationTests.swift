@testable import BgTaskDaemon
import BgTaskTestKit
import Foundation
import Logging
import Testing

/// What a plugin declares through the ABI (descriptor version 3): its
/// configuration keys and error names, read and checked by the loader.
@Suite struct PluginDeclarationTests {
    let loader = PluginLoader(logger: Logger(label: "test"))

    /// A plugin named `name` declaring `keys` (C initialisers of bgt_config_key) and `errors` (names).
    func plugin(_ name: String = "demo", keys: [String], errors: [String] = []) -> String {
        let errorList = errors.map { "{ .name = \"\($0)\", .help = \"\" }" }
        return PluginFixture.source(
            name: name,
            declarations: """
                static const bgt_config_key keys[] = { \(keys.isEmpty ? "{ 0 }" : keys.joined(separator: ", ")) };
                static const bgt_error_name errors[] = { \(errorList.isEmpty ? "{ 0 }" : errorList.joined(separator: ", ")) };
                """,
            descriptorFields: """
                .config_keys = keys, .n_config_keys = \(keys.count), .error_names = errors, .n_error_names = \(errors.count),
                """)
    }

    static func key(_ name: String, type: String = "BGT_CONFIG_INTEGER", minimum: String = "1", maximum: String = "10",
                    defaultValue: String = "1") -> String {
        """
        { .name = "\(name)", .type = \(type), .minimum = \(minimum), .maximum = \(maximum), .unit = "", \
        .default_value = "\(defaultValue)", .help = "a key" }
        """
    }

    private func refusal(_ source: String) throws -> PluginLoader.Refusal? {
        let directory = try PluginFixture.directory([("libbgtaskd-mode-demo.so", source)])
        defer { try? FileManager.default.removeItem(atPath: directory) }
        do {
            _ = try loader.open(directory + "/libbgtaskd-mode-demo.so")
            return nil
        } catch {
            return error
        }
    }

    @Test func declaredKeysAndErrorsAreRead() throws {
        let source = plugin(keys: [Self.key("Demo.Count"), Self.key("Demo.DelaySec", type: "BGT_CONFIG_NUMBER", minimum: "0",
                                                                    maximum: "60", defaultValue: "2.5")],
                            errors: ["org.example.Demo.Error.Busy"])
        let directory = try PluginFixture.directory([("libbgtaskd-mode-demo.so", source)])
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let candidate = try loader.open(directory + "/libbgtaskd-mode-demo.so")
        #expect(candidate.configKeys.map(\.name) == ["Demo.Count", "Demo.DelaySec"])
        #expect(candidate.configKeys.map(\.plugin) == ["demo", "demo"])
        #expect(candidate.errorNames == ["org.example.Demo.Error.Busy"])
        var configuration = Configuration(pluginKeys: candidate.configKeys)
        #expect(configuration.value(of: "Demo.DelaySec") == "2.5")
        try configuration.apply(iniText: "[Demo]\nCount=7\n", file: "demo.conf")
        #expect(configuration.value(of: "Demo.Count") == "7")
        let error = #expect(throws: Configuration.ParseError.self) { try configuration.apply(override: "Demo.DelaySec=61") }
        #expect(error?.description == "--set 'Demo.DelaySec=61': Demo.DelaySec: must be at most 60, got 61")
    }

    @Test(arguments: [
        (PluginDeclarationTests.key("Demo.Count", defaultValue: "11"), "the default of configuration key Demo.Count is refused: must be at most 10, got 11"),
        (PluginDeclarationTests.key("DemoCount"), "configuration key 'DemoCount' is not Section.Key (letters and digits)"),
        (PluginDeclarationTests.key("Demo.Count", minimum: "5", maximum: "1"), "configuration key Demo.Count has the limits 5...1"),
        (PluginDeclarationTests.key("Demo.Count", type: "9"), "configuration key Demo.Count has the unknown type 9"),
    ])
    func malformedKeysAreRefused(_ key: String, _ why: String) throws {
        #expect(try refusal(plugin(keys: [key])) == .badMetadata(why))
    }

    @Test func theDaemonsSectionsAreNotAPluginsToTake() throws {
        #expect(try refusal(plugin(keys: [Self.key("Tasks.BudgetSec")])) == .sectionTaken(section: "Tasks", owner: "the daemon"))
    }

    @Test func aSectionBelongsToOnePlugin() throws {
        let directory = try PluginFixture.directory([
            ("libbgtaskd-mode-first.so", plugin("first", keys: [Self.key("Shared.A")])),
            ("libbgtaskd-mode-second.so", plugin("second", keys: [Self.key("Shared.B")])),
        ])
        defer { try? FileManager.default.removeItem(atPath: directory) }
        #expect(loader.candidates(in: [directory]).map(\.name) == ["first"])
    }

    @Test func badErrorNamesAreRefused() throws {
        #expect(try refusal(plugin(keys: [], errors: ["NoDots"])) == .badMetadata("'NoDots' is not a D-Bus error name"))
        #expect(try refusal(plugin(keys: [], errors: ["org.9example.Error"])) == .badMetadata("'org.9example.Error' is not a D-Bus error name"))
    }

    /// Argument names are checked as sd-bus checks them when the daemon
    /// exports the interface: `--bus-introspect`, which exports nothing,
    /// listed names holding `"`, `<` or `&` that the live daemon refused.
    @Test func argumentNamesFollowTheDBusRules() throws {
        func arguments(_ signature: String, _ names: String) throws -> [String] {
            try signature.withCString { signature in
                try names.withCString { names in try LoadedPlugin.arguments(signature, names, of: "Try").map(\.name) }
            }
        }
        #expect(try arguments("su", "what, _count2") == ["what", "_count2"])
        for bad in ["a<b", "x\"y", "a&b", "2nd", "na me", String(repeating: "n", count: 256), "é"] {
            #expect(throws: PluginError.self, "\(bad)") { _ = try arguments("s", bad) }
        }
    }
}
