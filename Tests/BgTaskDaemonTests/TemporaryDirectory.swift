import Foundation

/// A directory under the system's temporary directory, removed when the value goes away.
final class TemporaryDirectory {
    let root: String

    init() throws {
        root = NSTemporaryDirectory() + "/bgtaskd-tests-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
    }

    deinit { try? FileManager.default.removeItem(atPath: root) }

    func path(_ relative: String) -> String { root + "/" + relative }

    /// Writes `text` to `relative`, creating the directories on the way.
    func write(_ relative: String, _ text: String) throws {
        let url = URL(fileURLWithPath: path(relative))
        try FileManager.default.createDirectory(at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
        try text.write(to: url, atomically: true, encoding: .utf8)
    }
}
