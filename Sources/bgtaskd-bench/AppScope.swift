import Foundation
import Glibc

/// A cgroup v2 directory named like a desktop launcher's systemd app scope
/// (`app-gnome-<app id>-<n>.scope`) at the top of the unified hierarchy: the
/// daemon tells the app id of a process in it from the name, and can freeze
/// it there. The sleep benchmarks run their apps in such scopes.
struct AppScope {
    let appID: String
    /// The scope's directory.
    let path: String

    /// The cgroup2 mount point (the first in /proc/self/mountinfo), nil when there is none.
    static let hierarchy: String? = {
        guard let text = try? String(contentsOfFile: "/proc/self/mountinfo", encoding: .utf8) else { return nil }
        for line in text.split(separator: "\n") {
            let fields = line.split(separator: " ")
            guard let dash = fields.firstIndex(of: "-"), dash + 1 < fields.count, fields[dash + 1] == "cgroup2",
                  fields.count > 4 else { continue }
            return String(fields[4])
        }
        return nil
    }()

    /// Why scopes cannot be made here, or nil when they can (root, a writable cgroup v2 hierarchy).
    static var unavailable: String? {
        guard let hierarchy else { return "no cgroup v2 hierarchy is mounted" }
        guard geteuid() == 0, access(hierarchy, W_OK) == 0 else { return "making app scopes in \(hierarchy) needs root" }
        return nil
    }

    /// Makes the scope for `appID`.
    init(appID: String) throws {
        guard let hierarchy = Self.hierarchy else { throw BenchError("no cgroup v2 hierarchy is mounted") }
        self.appID = appID
        path = "\(hierarchy)/app-gnome-\(appID)-\(getpid()).scope"
        guard mkdir(path, 0o755) == 0 || errno == EEXIST else {
            throw BenchError("cannot create \(path): \(String(cString: strerror(errno)))")
        }
    }

    /// The keys of `cgroup.events` (`populated`, `frozen`).
    var events: [String: String] {
        Self.parse((try? String(contentsOfFile: path + "/cgroup.events", encoding: .utf8)) ?? "")
    }

    var isFrozen: Bool { events["frozen"] == "1" }

    /// CPU time its processes used, µs (`usage_usec` of `cpu.stat`).
    var cpuMicroseconds: Int? {
        Self.parse((try? String(contentsOfFile: path + "/cpu.stat", encoding: .utf8)) ?? "")["usage_usec"].flatMap { Int($0) }
    }

    /// Kills whatever runs in it (frozen or not) and removes it.
    func remove() {
        let fd = open(path + "/cgroup.kill", O_WRONLY)
        if fd >= 0 {
            _ = write(fd, "1", 1)
            close(fd)
        }
        // An empty cgroup goes with rmdir; its processes take a moment to be gone.
        for _ in 0..<200 {
            if rmdir(path) == 0 || errno == ENOENT { return }
            MonotonicTime.sleep(seconds: 0.01)
        }
    }

    static func parse(_ text: String) -> [String: String] {
        var result: [String: String] = [:]
        for line in text.split(separator: "\n") {
            let parts = line.split(separator: " ", maxSplits: 1)
            if parts.count == 2 { result[String(parts[0])] = String(parts[1]) }
        }
        return result
    }
}
