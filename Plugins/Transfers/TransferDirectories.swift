import BgTaskTransferCore
import Glibc

/// Where on disk an app's transfers may land or come from, checked against
/// the real paths: its own data and cache directories, the download
/// directory and its sandbox home. The parent directory is opened and what
/// was opened is checked, so a symbolic link on the way cannot lead
/// elsewhere, then or later; the file itself may not be a link or anything
/// but a regular file.
enum TransferDirectories {
    /// The roots of `app`, from the daemon's environment.
    static func roots(of app: String) -> [String] {
        let home = environment("HOME") ?? "/"
        var roots = TransferPath.roots(
            app: app, home: home, dataHome: environment("XDG_DATA_HOME"), cacheHome: environment("XDG_CACHE_HOME"),
            configHome: environment("XDG_CONFIG_HOME"), downloads: downloadDirectory(home: home))
        // The same check on the real paths: a download directory that is a
        // link to the home counts as the home. The download root, when kept, is
        // the third; the first two are the app's data and cache directories.
        if roots.count == 4, let download = realPath(roots[2]) {
            let parents = roots[..<2].map { String($0[..<$0.lastIndex(of: "/")!]) }
            let protected = ([home, environment("XDG_CONFIG_HOME") ?? home + "/.config"] + parents).map { realPath($0) ?? $0 }
            if !TransferPath.isAcceptableDownloadRoot(download, protecting: protected) { roots.remove(at: 2) }
        }
        return roots
    }

    /// The directory a transfer's file lies in, opened and checked: its
    /// descriptor, the file's name in it, and the file's real path.
    struct Parent {
        var fd: Int32
        var name: String
        var path: String
    }

    /// Opens the directory `path` lies in and checks, on the directory
    /// actually opened (`/proc/self/fd`), that the file is inside one of
    /// `app`'s roots; the caller opens, renames and unlinks relative to the
    /// descriptor and closes it. Whatever replaces a directory on the way
    /// with a link after this cannot move the file elsewhere: the descriptor
    /// stays on the directory that was checked. Fails with why, for people.
    static func openParent(of path: String, app: String) -> Result<Parent, TransferPathProblem> {
        if let problem = TransferPath.problem(with: path) { return .failure(TransferPathProblem(problem)) }
        let slash = path.lastIndex(of: "/")!
        let parent = slash == path.startIndex ? "/" : String(path[..<slash])
        let name = String(path[path.index(after: slash)...])
        let fd = open(parent, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else { return .failure(TransferPathProblem("the directory \(parent.prefix(200)) does not exist")) }
        guard let opened = readLink("/proc/self/fd/\(fd)"), opened.hasPrefix("/") else {
            close(fd)
            return .failure(TransferPathProblem("cannot tell where \(parent.prefix(200)) is"))
        }
        let real = (opened == "/" ? "" : opened) + "/" + name
        guard roots(of: app).lazy.compactMap(realPath).contains(where: { TransferPath.isInside(real, root: $0) }) else {
            close(fd)
            if roots(of: app).lazy.compactMap(realPath).contains(real) {
                return .failure(TransferPathProblem("\(path.prefix(200)) is one of \(app)'s own directories, not a file in it"))
            }
            return .failure(TransferPathProblem("\(path.prefix(200)) is outside \(app)'s own directories (its data, cache and download directories)"))
        }
        return .success(Parent(fd: fd, name: name, path: real))
    }

    /// Why `path` may not be the file of a transfer of `app`, or nil: the
    /// directory check of ``openParent(of:app:)``, and the file itself, if
    /// there, a regular file (not a link). Returns the file's real path through `resolved`.
    static func problem(with path: String, app: String, mustExist: Bool, resolved: inout String) -> String? {
        let parent: Parent
        switch openParent(of: path, app: app) {
        case .success(let opened): parent = opened
        case .failure(let problem): return problem.description
        }
        defer { close(parent.fd) }
        var info = stat()
        if fstatat(parent.fd, parent.name, &info, AT_SYMLINK_NOFOLLOW) == 0 {
            let type = info.st_mode & S_IFMT
            if type == S_IFLNK { return "\(path.prefix(200)) is a symbolic link" }
            if type != S_IFREG { return "\(path.prefix(200)) is not a regular file" }
        } else if mustExist {
            return "\(path.prefix(200)) does not exist"
        }
        resolved = parent.path
        return nil
    }

    /// Removes a partial file, relative to its checked directory; nothing
    /// when the directory is not the app's any more.
    static func removePartial(of path: String, id: String, app: String) {
        guard case .success(let parent) = openParent(of: path, app: app) else { return }
        defer { close(parent.fd) }
        unlinkat(parent.fd, TransferPath.partialName(for: parent.name, id: id), 0)
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

/// Why a path cannot be used, for people.
struct TransferPathProblem: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
