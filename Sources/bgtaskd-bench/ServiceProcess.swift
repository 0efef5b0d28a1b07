import Glibc
import ServiceSpawn

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
        do {
            (pid, spawnedAt) = try ServiceSpawn.start(path: path, arguments: arguments, environment: overrides, output: .log(log))
        } catch {
            throw SpawnError(what: "posix_spawn \(path)", code: error.code)
        }
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
