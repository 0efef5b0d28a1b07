import Foundation

/// A symbolic link that leads nowhere, on the way to a path or at its end.
/// Creating a directory through one fails with "File exists", and a file
/// behind one reads as missing: neither says that a link points nowhere,
/// which is what the user has to mend (a dotfiles link to a moved folder).
enum DanglingLink {
    /// The first path from the root down to `path` (itself included) that
    /// is a symbolic link leading nowhere (to nothing, or round in a loop),
    /// and where it points; nil if there is none.
    static func find(on path: String) -> (link: String, target: String)? {
        var prefix = path.hasPrefix("/") ? "" : "."
        for component in path.split(separator: "/", omittingEmptySubsequences: true) {
            prefix += "/" + component
            var link = stat()
            guard lstat(prefix, &link) == 0 else { return nil }  // nothing here: no link to blame
            guard link.st_mode & S_IFMT == S_IFLNK else { continue }
            var followed = stat()
            if stat(prefix, &followed) == 0 { continue }
            // Only a link to nothing or a loop: a link one may not follow is another matter.
            guard errno == ENOENT || errno == ELOOP || errno == ENOTDIR else { return nil }
            let target = (try? FileManager.default.destinationOfSymbolicLink(atPath: prefix)) ?? "?"
            return (prefix, target)
        }
        return nil
    }

    /// "LINK is a symbolic link to TARGET, which leads nowhere", if a link
    /// on the way to `path` (or `path` itself) does.
    static func problem(with path: String) -> String? {
        find(on: path).map { "\($0.link) is a symbolic link to \($0.target), which leads nowhere" }
    }
}
