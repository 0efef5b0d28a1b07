/// The lexical rules for where a transfer's file may be: an absolute, clean
/// path inside one of its app's own directories. Whether the directories on
/// the way are symbolic links is the plugin's to check on disk; this is what
/// can be said from the text alone.
public enum TransferPath {
    /// The longest path taken (PATH_MAX).
    public static let maximumBytes = 4096
    /// The longest file name taken: NAME_MAX less what the partial file's name
    /// adds (a dot, the transfer id, `.bgtaskd-part`).
    public static let maximumNameBytes = 200

    /// Why `path` cannot name a transfer's file, or nil.
    public static func problem(with path: String) -> String? {
        if path.isEmpty { return "the path is empty" }
        if path.utf8.count > maximumBytes { return "the path is longer than \(maximumBytes) bytes" }
        if !path.hasPrefix("/") { return "'\(path.prefix(200))' is not an absolute path" }
        if path.utf8.contains(0) { return "the path holds a NUL byte" }
        if path.hasSuffix("/") { return "'\(path.prefix(200))' names a directory, not a file" }
        let parts = path.split(separator: "/", omittingEmptySubsequences: false).dropFirst()
        if parts.contains(where: { $0 == ".." }) { return "'\(path.prefix(200))' climbs with '..'" }
        if parts.contains(where: { $0 == "." || $0.isEmpty }) { return "'\(path.prefix(200))' is not in canonical form ('.' or '//')" }
        return nil
    }

    /// Whether `path` lies strictly inside directory `root` (both canonical).
    public static func isInside(_ path: String, root: String) -> Bool {
        let root = root.hasSuffix("/") ? String(root.dropLast()) : root
        guard !root.isEmpty else { return false }
        return path.hasPrefix(root + "/") && path.utf8.count > root.utf8.count + 1
    }

    /// The directories `app` may have transfers land in, given the user's
    /// base directories: its data and cache directories, the download
    /// directory (unless it is no place for every app's files: see
    /// ``isAcceptableDownloadRoot(_:protecting:)``), and its sandbox's home
    /// (`~/.var/app/APP`).
    public static func roots(
        app: String, home: String, dataHome: String?, cacheHome: String?, configHome: String? = nil, downloads: String?
    ) -> [String] {
        let data = nonEmptyAbsolute(dataHome) ?? home + "/.local/share"
        let cache = nonEmptyAbsolute(cacheHome) ?? home + "/.cache"
        let config = nonEmptyAbsolute(configHome) ?? home + "/.config"
        let download = nonEmptyAbsolute(downloads) ?? home + "/Downloads"
        let shared = isAcceptableDownloadRoot(download, protecting: [home, data, cache, config]) ? [download] : []
        return [data + "/" + app, cache + "/" + app] + shared + [home + "/.var/app/" + app]
    }

    /// Whether `downloads` may be a directory every app's transfers reach:
    /// not one of `others` (the home, data, cache and config directories)
    /// nor a directory holding one of them. xdg-user-dirs sets a disabled
    /// directory to `$HOME`; taken as a root, that opened every file of the
    /// user (`~/.bashrc`, other apps' data, `~/.ssh`) to every app.
    public static func isAcceptableDownloadRoot(_ downloads: String, protecting others: [String]) -> Bool {
        let root = lexicallyNormal(downloads)
        guard root != "/" else { return false }
        return !others.map(lexicallyNormal).contains { $0 == root || isInside($0, root: root) }
    }

    /// `path` without empty and `.` components, `..` taken back lexically, no trailing slash.
    static func lexicallyNormal(_ path: String) -> String {
        var parts: [Substring] = []
        for part in path.split(separator: "/", omittingEmptySubsequences: true) {
            switch part {
            case ".": continue
            case "..": _ = parts.popLast()
            default: parts.append(part)
            }
        }
        return "/" + parts.joined(separator: "/")
    }

    private static func nonEmptyAbsolute(_ path: String?) -> String? {
        guard let path, path.hasPrefix("/") else { return nil }
        return path.count > 1 && path.hasSuffix("/") ? String(path.dropLast()) : path
    }

    /// The partial file of transfer `id` beside `destination`: hidden, and named for its transfer.
    public static func partialFile(for destination: String, id: String) -> String {
        let slash = destination.lastIndex(of: "/")!
        return "\(destination[...slash])\(partialName(for: String(destination[destination.index(after: slash)...]), id: id))"
    }

    /// The partial file's name for a destination named `name`.
    public static func partialName(for name: String, id: String) -> String {
        ".\(name).\(id).bgtaskd-part"
    }
}
