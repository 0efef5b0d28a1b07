import Glibc

/// A bus service this benchmark starts itself (bgtaskd, or the baseline's
/// echo-service) so that it knows the instant of the exec: standard input
/// from /dev/null, standard output and error appended to a log file, the
/// environment of this process with some variables replaced. It is stopped
/// by its pid only.
final class ServiceProcess {
    let pid: pid_t
    /// CLOCK_MONOTONIC ns right before `posix_spawn`.
    let spawnedAt: Int64
    private var exitStatus: Int32?

    /// Starts `path` with `arguments`; `environment` entries replace or add variables.
    init(path: String, arguments: [String], environment overrides: [String: String], log: String) throws(SpawnError) {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, log, O_WRONLY | O_CREAT | O_APPEND, 0o644)
        posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO)
        let spawn = SpawnAttributes(defaulting: [SIGTERM, SIGINT, SIGPIPE])

        var variables: [String] = []
        var index = 0
        while let entry = environ[index] {
            let text = String(cString: entry)
            let name = String(text.prefix { $0 != "=" })
            if overrides[name] == nil { variables.append(text) }
            index += 1
        }
        variables += overrides.map { "\($0.key)=\($0.value)" }
        let argv: [UnsafeMutablePointer<CChar>?] = ([path] + arguments).map { strdup($0) } + [nil]
        let envp: [UnsafeMutablePointer<CChar>?] = variables.map { strdup($0) } + [nil]
        defer {
            for pointer in argv { free(pointer) }
            for pointer in envp { free(pointer) }
        }
        var child: pid_t = 0
        spawnedAt = MonotonicTime.nanoseconds()
        let r = posix_spawn(&child, path, &actions, &spawn.attributes, argv, envp)
        guard r == 0 else { throw SpawnError(what: "posix_spawn \(path)", code: r) }
        pid = child
    }

    /// Stops it if it still runs (SIGKILL; the benchmark failed).
    deinit {
        if exitStatus == nil {
            kill(pid, SIGKILL)
            var status: Int32 = 0
            while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        }
    }

    /// The exit status (or 128 + signal) if it has exited, without waiting.
    func poll() -> Int32? {
        if let exitStatus { return exitStatus }
        var status: Int32 = 0
        guard waitpid(pid, &status, WNOHANG) == pid else { return nil }
        let signal = status & 0x7f
        exitStatus = signal == 0 ? (status >> 8) & 0xff : 128 + signal
        return exitStatus
    }

    /// SIGTERM, then waits up to `timeout` seconds, then SIGKILL. Returns the
    /// exit status and how long the exit took after SIGTERM, in ms.
    func stop(timeout: Double = 10) -> (status: Int32, milliseconds: Double) {
        let start = MonotonicTime.nanoseconds()
        if poll() == nil { kill(pid, SIGTERM) }
        while poll() == nil {
            if MonotonicTime.microseconds(since: start) > timeout * 1e6 {
                kill(pid, SIGKILL)
                var status: Int32 = 0
                while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
                exitStatus = 128 + SIGKILL
                break
            }
            MonotonicTime.sleep(seconds: 0.002)
        }
        return (exitStatus!, MonotonicTime.microseconds(since: start) / 1000)
    }
}
