import Foundation

/// A symbolic link whose target does not exist. Creating a directory there
/// fails with "File exists", and a file there reads as missing: neither says
/// that a link points nowhere, which is what the user has to mend.
enum DanglingLink {
    /// Where `path` points, if it is a symbolic link to nothing; nil otherwise.
    static func target(of path: String) -> String? {
        guard let target = try? FileManager.default.destinationOfSymbolicLink(atPath: path) else { return nil }
        // fileExists follows the link (the chain, too).
        return FileManager.default.fileExists(atPath: path) ? nil : target
    }

    /// "a symbolic link to TARGET, which does not exist", for `path` if it is one.
    static func problem(with path: String) -> String? {
        target(of: path).map { "a symbolic link to \($0), which does not exist" }
    }
}
