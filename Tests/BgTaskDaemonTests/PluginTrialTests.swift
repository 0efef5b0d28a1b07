@testable import BgTaskDaemon
import Foundation
import Glibc
import Testing

/// The note of the plugin being started and the list of refused files
/// (``PluginTrial``), on plain files: the daemon's part is in
/// `PluginIsolationTests`.
@Suite struct PluginTrialTests {
    /// A plugin file whose name holds spaces, in a fresh state directory.
    private func setUp() throws -> (TemporaryDirectory, state: String, plugin: String) {
        let directory = try TemporaryDirectory()
        try directory.write("plugins/libbgtaskd-mode-a b.so", "not really a library")
        try FileManager.default.createDirectory(atPath: directory.path("state"), withIntermediateDirectories: true)
        return (directory, directory.path("state"), directory.path("plugins/libbgtaskd-mode-a b.so"))
    }

    @Test func aStartThatEndsWithinThePluginsStartRefusesItsFile() throws {
        let (directory, state, plugin) = try setUp()
        // A start that dies inside `starting` leaves its note.
        try PluginTrial.FileIdentity(path: plugin).map { try ($0.line + "\n").write(toFile: state + "/plugin-starting", atomically: false, encoding: .utf8) }
        let log = RecordingLog()
        let trial = PluginTrial(stateDirectory: state, logger: log.logger)
        #expect(trial.refusal(of: plugin) != nil)
        #expect(log.lines(atLeast: .error).contains { $0.message.contains("ended while the plugin \(plugin) started") }, "\(log.all)")
        #expect(!FileManager.default.fileExists(atPath: state + "/plugin-starting"))
        // Kept by the next start, which has no note of its own.
        #expect(PluginTrial(stateDirectory: state, logger: RecordingLog().logger).refusal(of: plugin) != nil)
        _ = directory
    }

    @Test func aStartThatReturnsLeavesNoNoteAndRefusesNothing() throws {
        let (directory, state, plugin) = try setUp()
        let trial = PluginTrial(stateDirectory: state, logger: RecordingLog().logger)
        let noted = trial.starting(plugin) { FileManager.default.fileExists(atPath: state + "/plugin-starting") }
        #expect(noted)
        #expect(!FileManager.default.fileExists(atPath: state + "/plugin-starting"))
        #expect(PluginTrial(stateDirectory: state, logger: RecordingLog().logger).refusal(of: plugin) == nil)
        _ = directory
    }

    @Test func aChangedFileLeavesTheList() throws {
        let (directory, state, plugin) = try setUp()
        try PluginTrial.FileIdentity(path: plugin).map { try ($0.line + "\n").write(toFile: state + "/plugin-starting", atomically: false, encoding: .utf8) }
        _ = PluginTrial(stateDirectory: state, logger: RecordingLog().logger)
        #expect(FileManager.default.fileExists(atPath: state + "/plugins-refused"))
        try "rebuilt".write(toFile: plugin, atomically: true, encoding: .utf8)
        #expect(PluginTrial(stateDirectory: state, logger: RecordingLog().logger).refusal(of: plugin) == nil)
        // An empty list is no file.
        #expect(!FileManager.default.fileExists(atPath: state + "/plugins-refused"))
        _ = directory
    }

    /// A note naming a relative path (`--plugin-dir build`) was ignored.
    @Test func aRelativePluginPathIsNoted() {
        #expect(PluginTrial.FileIdentity(line: "1 2 3 4 5 build/libbgtaskd-mode-a.so")?.path == "build/libbgtaskd-mode-a.so")
        #expect(PluginTrial.FileIdentity(line: "1 2 3 4 5 ") == nil)
    }

    /// Neither file is read or written through a link planted in its place.
    @Test func aLinkInTheListsPlaceIsNeitherReadNorWrittenThrough() throws {
        let (directory, state, plugin) = try setUp()
        let target = directory.path("elsewhere")
        try PluginTrial.FileIdentity(path: plugin).map { try ($0.line + "\n").write(toFile: target, atomically: false, encoding: .utf8) }
        #expect(symlink(target, state + "/plugins-refused") == 0)
        #expect(symlink(target, state + "/plugin-starting") == 0)
        let log = RecordingLog()
        let trial = PluginTrial(stateDirectory: state, logger: log.logger)
        #expect(trial.refusal(of: plugin) == nil)
        _ = trial.starting(plugin) { 0 }
        #expect(try String(contentsOfFile: target, encoding: .utf8).hasSuffix(plugin + "\n"))
        #expect(log.all.contains { $0.message.contains("cannot read") }, "\(log.all)")
    }
}
