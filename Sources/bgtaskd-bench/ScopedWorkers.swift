import Glibc

/// Background apps (``WorkerCommand``), each in an app scope of its own, for
/// the sleep benchmarks. ``stop()`` kills them (a frozen process still dies
/// of SIGKILL) and removes the scopes.
final class ScopedWorkers {
    let scopes: [AppScope]
    private(set) var children: [ChildProcess] = []

    /// Starts `count` workers, apps `org.bgtaskd.Bench.<name><n>`, with `arguments` after `worker`.
    init(count: Int, name: String, bus: String, arguments: [String]) throws {
        scopes = try (1...count).map { try AppScope(appID: "org.bgtaskd.Bench.\(name)\($0)") }
        do {
            for scope in scopes {
                children.append(try ChildProcess(
                    path: ChildProcess.ownExecutable,
                    arguments: ["worker", "--bus", bus, "--scope", scope.path] + arguments))
            }
        } catch {
            stop()
            throw error
        }
    }

    deinit { stop() }

    /// Waits until every worker printed a line starting with `prefix`, and
    /// returns those lines in worker order; `meanwhile` runs between polls.
    func waitForLines(_ prefix: String, timeout: Double, meanwhile: () throws -> Void = {}) throws -> [String] {
        let deadline = MonotonicTime.nanoseconds() + Int64(timeout * 1e9)
        while true {
            var lines: [String] = []
            for child in children {
                _ = child.readAvailable()
                let text = child.outputText
                if let failure = text.split(separator: "\n").first(where: { $0.hasPrefix("error") }) {
                    throw BenchError("worker pid \(child.pid): \(failure)")
                }
                if let line = text.split(separator: "\n").first(where: { $0.hasPrefix(prefix) }) { lines.append(String(line)) }
            }
            if lines.count == children.count { return lines }
            if MonotonicTime.nanoseconds() > deadline {
                throw BenchError("\(children.count - lines.count) of \(children.count) workers printed no '\(prefix)' in \(format(timeout, 0)) s")
            }
            var pollers = children.filter { $0.outputFD >= 0 }.map { pollfd(fd: $0.outputFD, events: Int16(POLLIN), revents: 0) }
            _ = poll(&pollers, nfds_t(pollers.count), 10)
            try meanwhile()
        }
    }

    /// Kills every worker and removes the scopes.
    func stop() {
        for child in children { kill(child.pid, SIGKILL) }
        for child in children { child.wait() }
        children.removeAll()
        for scope in scopes { scope.remove() }
    }
}
