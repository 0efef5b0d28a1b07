import Glibc

/// Desktop entries for the apps a benchmark plays (docs/DESIGN.md §3): the daemon
/// knows an app, and the modes it may use, from
/// `$XDG_DATA_HOME/applications/<id>.desktop`.
enum DesktopEntries {
    /// `$XDG_DATA_HOME`, else `~/.local/share`.
    static var defaultDataHome: String {
        if let value = getenv("XDG_DATA_HOME"), value.pointee != 0 { return String(cString: value) }
        return (getenv("HOME").map { String(cString: $0) } ?? "/root") + "/.local/share"
    }

    /// Writes `<dataHome>/applications/<id>.desktop` declaring `modes`, unless
    /// it is there with that content already; returns whether it wrote.
    /// `Exec=true`: should the daemon ever launch the app, it exits at once.
    @discardableResult
    static func write(id: String, modes: [String], dataHome: String) throws -> Bool {
        let directory = dataHome + "/applications"
        try makeDirectories(directory)
        let path = directory + "/" + id + ".desktop"
        let text = """
            [Desktop Entry]
            Type=Application
            Name=\(id)
            Exec=true
            X-BgTaskd-Modes=\(modes.map { $0 + ";" }.joined())

            """
        if ProcStatus.read(path) == text { return false }
        // Written beside and renamed, so the daemon's inotify never reads half a file.
        let temporary = directory + "/." + id + ".tmp"
        let fd = open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        guard fd >= 0 else { throw SpawnError(what: "creating \(temporary)", code: errno) }
        let bytes = Array(text.utf8)
        let written = bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
        close(fd)
        guard written == bytes.count else { throw SpawnError(what: "writing \(temporary)", code: errno) }
        guard rename(temporary, path) == 0 else { throw SpawnError(what: "renaming \(temporary)", code: errno) }
        return true
    }

    /// `mkdir -p`.
    static func makeDirectories(_ path: String) throws {
        var prefix = path.hasPrefix("/") ? "" : "."
        for component in path.split(separator: "/", omittingEmptySubsequences: true) {
            prefix += "/" + component
            if mkdir(prefix, 0o755) != 0 && errno != EEXIST {
                throw SpawnError(what: "creating \(prefix)", code: errno)
            }
        }
    }
}
