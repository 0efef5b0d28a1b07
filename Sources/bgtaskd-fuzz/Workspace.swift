import Foundation

/// The fuzzer's temporary directory: a home with the apps' desktop entries,
/// one state directory per daemon run that starts from scratch, and the logs.
/// Everything in it is removed at the end unless the user asked to keep it.
final class Workspace {
    let root: String
    /// HOME of the daemon; `data/applications` holds the desktop entries.
    var home: String { root + "/home" }
    var dataHome: String { home + "/data" }
    private var stateCount = 0
    private var logCount = 0

    /// A file in the first app's data directory that uploads may send.
    var uploadSource: String { appDirectory + "/fuzz-source.bin" }
    /// The first app's own data directory, where its downloads may land.
    var appDirectory: String { dataHome + "/" + Self.fullApps[0] }

    /// The apps the daemon knows: three that declare every mode, one whose
    /// command cannot run, one that declares no mode.
    static let fullApps = ["org.example.A", "org.example.B", "org.example.C"]
    static let brokenApp = "org.example.Broken"
    static let plainApp = "org.example.Plain"
    /// Valid ids without a desktop entry (CheckIn believes unsandboxed callers).
    static let unknownApp = "org.example.Unknown"
    static var knownApps: [String] { fullApps + [brokenApp, plainApp] }

    init() throws(HarnessError) {
        var template = Array("/tmp/bgtaskd-fuzz-XXXXXX".utf8CString)
        guard let made = template.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }) else {
            throw HarnessError("cannot create a temporary directory: \(String(cString: strerror(errno)))")
        }
        root = String(cString: made)
        do {
            try FileManager.default.createDirectory(atPath: dataHome + "/applications", withIntermediateDirectories: true)
            try FileManager.default.createDirectory(atPath: root + "/logs", withIntermediateDirectories: true)
            // Launched apps only sleep: harmless whatever the fuzzer makes the daemon do.
            for app in Self.fullApps {
                try writeEntry(app, exec: "/bin/sleep 2", modes: Self.allModes)
            }
            try writeEntry(Self.brokenApp, exec: "/nonexistent/bgtaskd-fuzz-no-such-program %U", modes: Self.allModes)
            try writeEntry(Self.plainApp, exec: "/bin/sleep 2", modes: nil)
            try FileManager.default.createDirectory(atPath: appDirectory, withIntermediateDirectories: true)
            try Data(repeating: 0x66, count: 4096).write(to: URL(fileURLWithPath: uploadSource))
        } catch {
            throw HarnessError("cannot prepare \(root): \(error)")
        }
    }

    static let allModes = "fetch;remote-notification;location;transfer;"

    private func writeEntry(_ id: String, exec: String, modes: String?) throws {
        var text = "[Desktop Entry]\nType=Application\nName=\(id.split(separator: ".").last ?? "")\nExec=\(exec)\n"
        if let modes { text += "X-BgTaskd-Modes=\(modes)\n" }
        try text.write(toFile: dataHome + "/applications/\(id).desktop", atomically: true, encoding: .utf8)
    }

    /// A new, empty state directory (the daemon creates it).
    func newStateDirectory() -> String {
        stateCount += 1
        return root + "/state-\(stateCount)"
    }

    /// A new log file name, `<name>-<n>.log`.
    func newLog(_ name: String) -> String {
        logCount += 1
        return root + "/logs/\(name)-\(logCount).log"
    }

    /// Removes everything.
    func remove() {
        try? FileManager.default.removeItem(atPath: root)
    }
}
