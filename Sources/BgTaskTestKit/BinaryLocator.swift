import Foundation

/// Finds the package's built executables for integration tests: in
/// `$BGTASKD_BIN_DIR`, else next to the test bundle (`.build/debug`), else in
/// the package's `.build/debug`.
public enum BinaryLocator {
    public static func path(of name: String, file: StaticString = #filePath) -> String {
        var candidates: [String] = []
        if let dir = ProcessInfo.processInfo.environment["BGTASKD_BIN_DIR"] { candidates.append(dir) }
        let runner = URL(fileURLWithPath: CommandLine.arguments.first ?? "").deletingLastPathComponent()
        candidates.append(runner.path)
        candidates.append(runner.deletingLastPathComponent().path)
        let root = URL(fileURLWithPath: "\(file)").deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        candidates.append(root.appendingPathComponent(".build/debug").path)
        for dir in candidates where FileManager.default.isExecutableFile(atPath: dir + "/" + name) {
            return dir + "/" + name
        }
        fatalError("cannot find the built '\(name)' (looked in \(candidates)); run `swift build` first or set BGTASKD_BIN_DIR")
    }

    /// The package's root directory (for checked-in fixtures such as `dbus/`).
    public static func packageRoot(file: StaticString = #filePath) -> String {
        URL(fileURLWithPath: "\(file)").deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().path
    }
}
