@testable import BgTaskDaemon
import BgTaskCore
import BgTaskPluginABI
import BgTaskTestKit
import Foundation
import Logging
import SDBus
import Testing

/// The loader's rules (docs/DESIGN.md §7) against real shared libraries, compiled from
/// C at test time against the checked-in ABI header: a good plugin, a wrong
/// major, a newer minor, no entry symbol, empty metadata, a failing init,
/// insecure files and directories, and a file that is no library at all.
@Suite struct PluginLoaderTests {
    static func source(name: String, major: String = "BGTASKD_PLUGIN_ABI_MAJOR", minor: String = "BGTASKD_PLUGIN_ABI_MINOR",
                       version: String = "\"1.0.0\"", entry: String = "bgtaskd_plugin_entry", initFails: Bool = false) -> String {
        PluginFixture.source(name: name, major: major, minor: minor, version: version, entry: entry, initFails: initFails)
    }

    static func directory(_ plugins: [(file: String, source: String)]) throws -> String {
        try PluginFixture.directory(plugins)
    }

    let loader = PluginLoader(logger: Logger(label: "test"))

    private func refusal(_ path: String) -> PluginLoader.Refusal? {
        do {
            _ = try loader.open(path)
            return nil
        } catch {
            return error
        }
    }

    @Test func goodPluginIsAccepted() throws {
        let dir = try Self.directory([("libbgtaskd-mode-demo.so", Self.source(name: "demo"))])
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let candidates = loader.candidates(in: [dir])
        #expect(candidates.map(\.name) == ["demo"])
        #expect(candidates.first?.version == "1.0.0")
    }

    @Test func wrongMajorIsRefused() throws {
        let dir = try Self.directory([("libbgtaskd-mode-demo.so", Self.source(name: "demo", major: "2"))])
        defer { try? FileManager.default.removeItem(atPath: dir) }
        #expect(refusal(dir + "/libbgtaskd-mode-demo.so") == .incompatibleABI(major: 2, minor: UInt16(BGTASKD_PLUGIN_ABI_MINOR)))
        #expect(loader.candidates(in: [dir]).isEmpty)
    }

    @Test func newerMinorIsRefused() throws {
        let dir = try Self.directory([("libbgtaskd-mode-demo.so", Self.source(name: "demo", minor: "BGTASKD_PLUGIN_ABI_MINOR + 1"))])
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let refused = refusal(dir + "/libbgtaskd-mode-demo.so")
        #expect(refused == .incompatibleABI(major: 1, minor: UInt16(BGTASKD_PLUGIN_ABI_MINOR + 1)))
        #expect(refused?.description.contains("this bgtaskd speaks 1.\(BGTASKD_PLUGIN_ABI_MINOR))") == true)
    }

    @Test func missingEntrySymbolIsNotAPlugin() throws {
        let dir = try Self.directory([("libbgtaskd-mode-demo.so", Self.source(name: "demo", entry: "some_other_symbol"))])
        defer { try? FileManager.default.removeItem(atPath: dir) }
        guard case .notAPlugin(let why) = refusal(dir + "/libbgtaskd-mode-demo.so") else {
            Issue.record("expected notAPlugin")
            return
        }
        #expect(why.contains("bgtaskd_plugin_entry"))
    }

    @Test func emptyNameAndVersionAreBadMetadata() throws {
        let dir = try Self.directory([
            ("libbgtaskd-mode-demo.so", Self.source(name: "")),
            ("libbgtaskd-mode-other.so", Self.source(name: "other", version: "\"\"")),
            ("libbgtaskd-mode-third.so", Self.source(name: "mismatched")),
        ])
        defer { try? FileManager.default.removeItem(atPath: dir) }
        #expect(refusal(dir + "/libbgtaskd-mode-demo.so") == .badMetadata("empty name"))
        #expect(refusal(dir + "/libbgtaskd-mode-other.so") == .badMetadata("empty version"))
        #expect(refusal(dir + "/libbgtaskd-mode-third.so") == .badMetadata("its name 'mismatched' does not match its file name"))
    }

    @Test func garbageFileIsNotAPlugin() throws {
        let dir = try Self.directory([])
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try "not an ELF file".write(toFile: dir + "/libbgtaskd-mode-junk.so", atomically: true, encoding: .utf8)
        guard case .notAPlugin = refusal(dir + "/libbgtaskd-mode-junk.so") else {
            Issue.record("expected notAPlugin")
            return
        }
    }

    @Test func filesWritableByOthersAreRefused() throws {
        let dir = try Self.directory([("libbgtaskd-mode-demo.so", Self.source(name: "demo"))])
        defer { try? FileManager.default.removeItem(atPath: dir) }
        chmod(dir + "/libbgtaskd-mode-demo.so", 0o666)
        guard case .insecure(let why) = refusal(dir + "/libbgtaskd-mode-demo.so") else {
            Issue.record("expected insecure")
            return
        }
        #expect(why.contains("writable"))
        // What to do, for a build tree a umask of 002 left group-writable.
        #expect(why.contains("chmod go-w \(dir)/libbgtaskd-mode-demo.so"), "\(why)")
    }

    /// The fix printed for a path with a space quotes it, so that pasted it
    /// changes that file and not two others.
    @Test func theFixForAPathWithASpaceIsQuoted() throws {
        let dir = try Self.directory([])
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let path = dir + "/my build.so"
        try "x".write(toFile: path, atomically: false, encoding: .utf8)
        chmod(path, 0o664)
        let why = try #require(PluginLoader.writableByOthers(path))
        #expect(why.hasSuffix("chmod go-w '\(path)'"), "\(why)")
    }

    /// Only the file and the plugin directory were checked: a link to a
    /// library in a directory anyone could write, or a plugin directory
    /// under such a directory, loaded (found by an outside review).
    @Test func aDirectoryOnTheWayThatOthersCanWriteIsRefused() throws {
        let open = try Self.directory([("libbgtaskd-mode-demo.so", Self.source(name: "demo"))])
        defer { try? FileManager.default.removeItem(atPath: open) }
        let safe = try Self.directory([])
        defer { try? FileManager.default.removeItem(atPath: safe) }
        #expect(symlink(open + "/libbgtaskd-mode-demo.so", safe + "/libbgtaskd-mode-demo.so") == 0)
        #expect(PluginLoader.writableByOthers(safe + "/libbgtaskd-mode-demo.so") == nil, "a link to a safe place is fine")
        chmod(open, 0o777)
        let why = try #require(PluginLoader.writableByOthers(safe + "/libbgtaskd-mode-demo.so"))
        #expect(why.contains("the directory \(open) on its way is writable by its group or by everyone (mode 777)"), "\(why)")
        #expect(loader.candidates(in: [safe]).isEmpty)
        // A plugin directory under one that others can write.
        try FileManager.default.createDirectory(atPath: open + "/sub", withIntermediateDirectories: false, attributes: [.posixPermissions: 0o700])
        #expect(PluginLoader.writableByOthers(open + "/sub") != nil)
        // Sticky, as /tmp: others cannot rename what is not theirs.
        chmod(open, 0o1777)
        #expect(PluginLoader.writableByOthers(safe + "/libbgtaskd-mode-demo.so") == nil)
    }

    @Test func directoryWritableByOthersIsIgnored() throws {
        let dir = try Self.directory([("libbgtaskd-mode-demo.so", Self.source(name: "demo"))])
        defer { try? FileManager.default.removeItem(atPath: dir) }
        chmod(dir, 0o777)
        #expect(PluginLoader.writableByOthers(dir) != nil)
        #expect(loader.candidates(in: [dir]).isEmpty)
    }

    /// A plugin directory that was a file loaded nothing without a word;
    /// one named twice had each plugin refused as a duplicate of itself
    /// (found by an outside test).
    @Test func aPluginDirectoryThatIsAFileIsLoggedAndOneNamedTwiceReadOnce() throws {
        let dir = try Self.directory([("libbgtaskd-mode-demo.so", Self.source(name: "demo"))])
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let log = RecordingLog()
        let loader = PluginLoader(logger: log.logger)
        let file = dir + "/libbgtaskd-mode-demo.so"
        #expect(loader.candidates(in: [file]).isEmpty)
        #expect(log.all.contains { $0.description == "error: ignoring plugin directory \(file): Not a directory" }, "\(log.all)")
        #expect(loader.candidates(in: [dir, dir + "/"]).map(\.name) == ["demo"])
        #expect(!log.all.contains { $0.description.contains("refusing plugin") }, "\(log.all)")
    }

    @Test func onlyModeLibrariesAreConsidered() throws {
        let dir = try Self.directory([
            ("libbgtaskd-mode-demo.so", Self.source(name: "demo")),
            ("libsomething-else.so", Self.source(name: "demo")),
        ])
        defer { try? FileManager.default.removeItem(atPath: dir) }
        #expect(loader.candidates(in: [dir]).map(\.path) == [dir + "/libbgtaskd-mode-demo.so"])
    }

    @Test func earlierDirectoryWinsForTheSameMode() throws {
        let first = try Self.directory([("libbgtaskd-mode-demo.so", Self.source(name: "demo", version: "\"1.0.0\""))])
        let second = try Self.directory([("libbgtaskd-mode-demo.so", Self.source(name: "demo", version: "\"2.0.0\""))])
        defer {
            try? FileManager.default.removeItem(atPath: first)
            try? FileManager.default.removeItem(atPath: second)
        }
        let candidates = loader.candidates(in: [first, second])
        #expect(candidates.map(\.version) == ["1.0.0"])
    }

    @Test func failingInitIsRefusedWithItsReason() throws {
        let dir = try Self.directory([("libbgtaskd-mode-demo.so", Self.source(name: "demo", initFails: true))])
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let candidate = try #require(loader.candidates(in: [dir]).first)
        let engine = OfflinePluginEngine()
        let host = LoadedPlugin(
            candidate: candidate, services: .offline(logger: Logger(label: "test"), configuration: Configuration()), engine: engine)
        let error = #expect(throws: PluginError.self) { try host.start() }
        #expect(error?.description == "init failed: the fixture refuses to start")
    }
}

/// ABI 1.6's `export_interface_at` takes only D-Bus object paths.
@Suite struct PluginObjectPathTests {
    @Test(arguments: ["/", "/org/unifiedpush/Connector", "/a_b/C9"])
    func objectPathsAreTaken(_ path: String) {
        #expect(PluginHostAPI.isObjectPath(path))
    }

    @Test(arguments: ["", "org/x", "/org/", "//x", "/org//x", "/org/x-y", "/org/ü", "/org/x.y", "/org/x y"])
    func otherTextIsRefused(_ path: String) {
        #expect(!PluginHostAPI.isObjectPath(path))
    }
}
