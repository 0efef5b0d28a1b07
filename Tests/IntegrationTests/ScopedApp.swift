import BgTaskTestKit
import Foundation

/// The test app run inside a cgroup named like a desktop launcher's systemd
/// app scope (`app-gnome-<id>-<n>.scope`): the daemon tells its app id from
/// the unit, so it can tie the process to the app and freeze it.
final class ScopedApp {
    /// Where the scopes are made: the cgroup v2 root of this machine.
    static let cgroupRoot = "/sys/fs/cgroup/unified"

    /// Whether this machine lets the tests make such scopes (root, a writable cgroup v2 hierarchy).
    static var canMakeScopes: Bool {
        geteuid() == 0 && FileManager.default.isWritableFile(atPath: cgroupRoot)
            && FileManager.default.fileExists(atPath: cgroupRoot + "/cgroup.procs")
    }

    let process: ChildProcess
    /// The scope's cgroup directory.
    let scope: String

    /// Starts `bgtaskd-testapp --bus <daemon's bus> ARGUMENTS` in a new scope for `appID`.
    init(_ daemon: DaemonUnderTest, appID: String, _ arguments: [String]) throws {
        scope = "\(Self.cgroupRoot)/app-gnome-\(appID)-\(getpid())\(Int.random(in: 0..<1_000_000)).scope"
        try FileManager.default.createDirectory(atPath: scope, withIntermediateDirectories: false)
        let testapp = BinaryLocator.path(of: "bgtaskd-testapp")
        let quoted = ([testapp, "--bus", daemon.bus.address] + arguments).map { "'\($0)'" }.joined(separator: " ")
        do {
            process = try ChildProcess("/bin/sh", ["-c", "echo $$ > '\(scope)/cgroup.procs' && exec \(quoted)"])
        } catch {
            rmdir(scope)
            throw error
        }
    }

    /// The scope's `cgroup.events` keys.
    var events: [String: String] {
        guard let text = try? String(contentsOfFile: scope + "/cgroup.events", encoding: .utf8) else { return [:] }
        var result: [String: String] = [:]
        for line in text.split(separator: "\n") {
            let parts = line.split(separator: " ", maxSplits: 1)
            if parts.count == 2 { result[String(parts[0])] = String(parts[1]) }
        }
        return result
    }

    /// Whether the scope's cgroup is frozen (`frozen 1` in `cgroup.events`).
    var isFrozen: Bool { events["frozen"] == "1" }

    /// CPU time the scope's processes used, µs (`usage_usec` in `cpu.stat`).
    var cpuUsec: UInt64? {
        guard let text = try? String(contentsOfFile: scope + "/cpu.stat", encoding: .utf8) else { return nil }
        for line in text.split(separator: "\n") where line.hasPrefix("usage_usec ") {
            return UInt64(line.dropFirst("usage_usec ".count))
        }
        return nil
    }

    /// Polls until the scope is frozen (or thawed); returns whether it got there within `timeout`.
    func waitUntilFrozen(_ frozen: Bool = true, timeout: Duration = .seconds(10)) -> Bool {
        let deadline = ContinuousClock.now + timeout
        while isFrozen != frozen {
            if ContinuousClock.now >= deadline { return false }
            Thread.sleep(forTimeInterval: 0.01)
        }
        return true
    }

    /// Ends the app (thawing it first: a frozen process takes SIGTERM only once thawed) and removes the scope.
    func stop() {
        try? "0".write(toFile: scope + "/cgroup.freeze", atomically: false, encoding: .utf8)
        process.stop()
        process.waitForExit()
        // An empty cgroup is removed with rmdir, never by deleting its files.
        rmdir(scope)
    }
}
