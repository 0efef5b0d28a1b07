import Glibc

/// One cgroup v2 directory, by path: made, entered, frozen, killed, removed.
/// Every operation is one or two system calls on the cgroup's files.
struct Cgroup: Sendable, Hashable, CustomStringConvertible {
    /// What failed, on which cgroup, with which errno.
    struct Failure: Error, Equatable, CustomStringConvertible {
        var operation: String
        var path: String
        var errno: Int32

        var description: String { "\(operation) \(path): \(ProcessSpawner.describe(errno: errno))" }
    }

    /// The directory, such as `/sys/fs/cgroup/app-bgtaskd-org.example.App-1a2b3c4d.scope`.
    let path: String

    var description: String { path }

    /// Makes the directory (it must not exist yet).
    static func create(at path: String) throws(Failure) -> Cgroup {
        guard mkdir(path, 0o755) == 0 else { throw Failure(operation: "cannot create cgroup", path: path, errno: errno) }
        return Cgroup(path: path)
    }

    /// `cgroup.procs` opened for writing (close-on-exec), for a child to move itself in.
    func openProcs() throws(Failure) -> Int32 {
        let fd = open(path + "/cgroup.procs", O_WRONLY | O_CLOEXEC)
        guard fd >= 0 else { throw Failure(operation: "cannot open cgroup.procs of", path: path, errno: errno) }
        return fd
    }

    /// Moves a process (all its threads) in.
    func move(pid: Int32) throws(Failure) {
        try write("cgroup.procs", "\(pid)", operation: "cannot move pid \(pid) into")
    }

    /// Freezes or thaws every process in it (`cgroup.freeze`). The state is
    /// reached asynchronously; ``isFrozen`` says when.
    func setFrozen(_ frozen: Bool) throws(Failure) {
        try write("cgroup.freeze", frozen ? "1" : "0", operation: frozen ? "cannot freeze" : "cannot thaw")
    }

    /// SIGKILLs every process in it (`cgroup.kill`, Linux 5.14+), frozen ones included.
    func killAll() throws(Failure) {
        try write("cgroup.kill", "1", operation: "cannot kill the processes of")
    }

    /// Removes the directory; fails with `EBUSY` while processes are left.
    func remove() throws(Failure) {
        guard rmdir(path) == 0 else { throw Failure(operation: "cannot remove cgroup", path: path, errno: errno) }
    }

    /// The keys of `cgroup.events` (`populated`, `frozen`), nil when unreadable.
    var events: [String: String]? {
        let fd = open(path + "/cgroup.events", O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        return Cgroup.readEvents(fd: fd)
    }

    /// Whether any process is in it or below it; nil when unreadable.
    var isPopulated: Bool? { events?["populated"].map { $0 == "1" } }

    /// Whether it is frozen (the freeze has completed); nil when unreadable.
    var isFrozen: Bool? { events?["frozen"].map { $0 == "1" } }

    /// Whether a freeze was asked for (`cgroup.freeze` is 1), completed or not.
    var isFreezeRequested: Bool {
        let fd = open(path + "/cgroup.freeze", O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var byte: UInt8 = 0
        return read(fd, &byte, 1) == 1 && byte == UInt8(ascii: "1")
    }

    /// `cgroup.events` opened for reading, to watch: the kernel signals
    /// EPOLLPRI on it whenever a value changes.
    func openEvents() -> Int32? {
        let fd = open(path + "/cgroup.events", O_RDONLY | O_CLOEXEC)
        return fd >= 0 ? fd : nil
    }

    /// Reads an open `cgroup.events` from the start. Reading also re-arms the
    /// kernel's change notification for this descriptor.
    static func readEvents(fd: Int32) -> [String: String]? {
        var buffer = [UInt8](repeating: 0, count: 512)
        let n = buffer.withUnsafeMutableBytes { pread(fd, $0.baseAddress, $0.count, 0) }
        guard n >= 0 else { return nil }
        return parseEvents(String(decoding: buffer[..<n], as: UTF8.self))
    }

    /// "populated 1\nfrozen 0\n" as a dictionary.
    static func parseEvents(_ text: String) -> [String: String] {
        var result: [String: String] = [:]
        for line in text.split(separator: "\n") {
            let parts = line.split(separator: " ", maxSplits: 1)
            if parts.count == 2 { result[String(parts[0])] = String(parts[1]) }
        }
        return result
    }

    private func write(_ file: String, _ value: String, operation: String) throws(Failure) {
        let fd = open(path + "/" + file, O_WRONLY | O_CLOEXEC)
        guard fd >= 0 else { throw Failure(operation: operation, path: path, errno: errno) }
        defer { close(fd) }
        let bytes = Array(value.utf8)
        let n = bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
        guard n == bytes.count else { throw Failure(operation: operation, path: path, errno: n < 0 ? errno : EIO) }
    }
}
