import BgTaskTransferCore
import Glibc

/// Where on disk an app's transfers may land or come from, checked against
/// the real paths: its own data and cache directories, the download
/// directory and its sandbox home. The parent directory is resolved with
/// realpath, so a symbolic link on the way cannot lead elsewhere; the file
/// itself may not be a link or anything but a regular file.
enum TransferDirectories {
    /// The roots of `app`, from the daemon's environment.
    static func roots(of app: String) -> [String] {
        let home = environment("HOME") ?? "/"
        return TransferPath.roots(
            app: app, home: home, dataHome: environment("XDG_DATA_HOME"), cacheHome: environment("XDG_CACHE_HOME"),
            downloads: downloadDirectory(home: home))
    }

    /// Why `path` may not be the file of a transfer of `app`, or nil. Returns
    /// the path as it will be used (its parent resolved) through `resolved`.
    static func problem(with path: String, app: String, mustExist: Bool, resolved: inout String) -> String? {
        if let problem = TransferPath.problem(with: path) { return problem }
        let slash = path.lastIndex(of: "/")!
        let parent = slash == path.startIndex ? "/" : String(path[..<slash])
        let name = String(path[path.index(after: slash)...])
        guard let realParent = realPath(parent) else {
            return "the directory \(parent.prefix(200)) does not exist"
        }
        let candidate = (realParent == "/" ? "" : realParent) + "/" + name
        let roots = roots(of: app).compactMap(realPath)
        guard roots.contains(where: { TransferPath.isInside(candidate, root: $0) }) else {
            return "\(path.prefix(200)) is outside \(app)'s own directories (its data, cache and download directories)"
        }
        var info = stat()
        if lstat(candidate, &info) == 0 {
            let type = info.st_mode & S_IFMT
            if type == S_IFLNK { return "\(path.prefix(200)) is a symbolic link" }
            if type != S_IFREG { return "\(path.prefix(200)) is not a regular file" }
        } else if mustExist {
            return "\(path.prefix(200)) does not exist"
        }
        resolved = candidate
        return nil
    }

    /// Opens the directory `path` lies in and checks, on the directory
    /// actually opened, that the file is inside one of `app`'s roots; returns
    /// the directory's descriptor and the file's name, to open and rename
    /// relative to it. Whatever replaces a directory on the way with a link
    /// after this cannot move the file elsewhere: the descriptor stays on
    /// the directory that was checked.
    static func openParent(of path: String, app: String) -> (fd: Int32, name: String)? {
        guard TransferPath.problem(with: path) == nil, let slash = path.lastIndex(of: "/") else { return nil }
        let parent = slash == path.startIndex ? "/" : String(path[..<slash])
        let name = String(path[path.index(after: slash)...])
        let fd = open(parent, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        // What the descriptor really is, whatever the path said on the way.
        guard let opened = readLink("/proc/self/fd/\(fd)"), opened.hasPrefix("/") else {
            close(fd)
            return nil
        }
        let candidate = (opened == "/" ? "" : opened) + "/" + name
        guard roots(of: app).compactMap(realPath).contains(where: { TransferPath.isInside(candidate, root: $0) }) else {
            close(fd)
            return nil
        }
        return (fd, name)
    }

    private static func readLink(_ path: String) -> String? {
        var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        let count = readlink(path, &buffer, buffer.count - 1)
        guard count > 0 else { return nil }
        return buffer.withUnsafeBufferPointer { String(decoding: UnsafeRawBufferPointer($0).prefix(count), as: UTF8.self) }
    }

    private static func realPath(_ path: String) -> String? {
        guard let resolved = realpath(path, nil) else { return nil }
        defer { free(resolved) }
        return String(cString: resolved)
    }

    private static func environment(_ name: String) -> String? {
        guard let value = getenv(name) else { return nil }
        let text = String(cString: value)
        return text.isEmpty ? nil : text
    }

    /// XDG_DOWNLOAD_DIR from the environment or `user-dirs.dirs`; nil for the default.
    private static func downloadDirectory(home: String) -> String? {
        if let value = environment("XDG_DOWNLOAD_DIR") { return value }
        let config = environment("XDG_CONFIG_HOME") ?? home + "/.config"
        guard let file = fopen(config + "/user-dirs.dirs", "r") else { return nil }
        defer { fclose(file) }
        var line: UnsafeMutablePointer<CChar>?
        var capacity = 0
        defer { free(line) }
        while getline(&line, &capacity, file) > 0, let line {
            let text = String(cString: line).trimmingCharacters(whereIn: " \n\t")
            guard text.hasPrefix("XDG_DOWNLOAD_DIR=") else { continue }
            var value = String(text.dropFirst("XDG_DOWNLOAD_DIR=".count))
            if value.hasPrefix("\""), value.hasSuffix("\""), value.count >= 2 { value = String(value.dropFirst().dropLast()) }
            if value.hasPrefix("$HOME") { value = home + value.dropFirst(5) }
            return value.hasPrefix("/") ? value : nil
        }
        return nil
    }
}

extension String {
    fileprivate func trimmingCharacters(whereIn set: String) -> String {
        var text = Substring(self)
        while let first = text.first, set.contains(first) { text = text.dropFirst() }
        while let last = text.last, set.contains(last) { text = text.dropLast() }
        return String(text)
    }
}
