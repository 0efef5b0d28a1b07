import Glibc
import ServiceSpawn

/// A process the fuzzer starts itself (the bus, the daemon): standard input
/// from /dev/null, standard output and error appended to a log file, this
/// process's environment with some variables replaced. It is signalled and
/// reaped by its pid only, and killed if it is still running when this
/// object goes away.
///
/// Started with ``ServiceSpawn``, as bgtaskd-bench starts its services.
final class ServiceProcess {
    let pid: pid_t
    let path: String
    let log: String
    private var exit: Exit?

    /// How a process ended.
    enum Exit: Equatable, CustomStringConvertible {
        case status(Int32)
        case signal(Int32)

        var description: String {
            switch self {
            case .status(let code): "exit status \(code)"
            case .signal(let signal): "killed by signal \(signal) (\(Self.signalName(signal)))"
            }
        }

        /// Clean only when it exited with status 0.
        var isClean: Bool { self == .status(0) }

        private static func signalName(_ signal: Int32) -> String {
            switch signal {
            case SIGABRT: "SIGABRT"
            case SIGBUS: "SIGBUS"
            case SIGFPE: "SIGFPE"
            case SIGILL: "SIGILL"
            case SIGKILL: "SIGKILL"
            case SIGSEGV: "SIGSEGV"
            case SIGTERM: "SIGTERM"
            case SIGTRAP: "SIGTRAP (a Swift runtime trap)"
            default: "signal \(signal)"
            }
        }
    }

    /// Starts `path` with `arguments`; `environment` entries replace or add
    /// variables, those named in `removing` are left out.
    init(
        path: String, arguments: [String], environment overrides: [String: String] = [:], removing: Set<String> = [],
        log: String
    ) throws(HarnessError) {
        self.path = path
        self.log = log
        do {
            pid = try ServiceSpawn.start(path: path, arguments: arguments, environment: overrides, removing: removing, output: .log(log)).pid
        } catch {
            throw HarnessError(error.description)
        }
    }

    deinit {
        if poll() == nil {
            Glibc.kill(pid, SIGKILL)
            _ = waitForExit(timeout: 10)
        }
    }

    /// How it ended, if it has (reaps it; never blocks).
    @discardableResult
    func poll() -> Exit? {
        if let exit { return exit }
        var status: Int32 = 0
        guard waitpid(pid, &status, WNOHANG) == pid else { return nil }
        let signal = status & 0x7f
        exit = signal == 0 ? .status((status >> 8) & 0xff) : .signal(signal)
        InterruptCleanup.forget(pid)
        return exit
    }

    var isRunning: Bool { poll() == nil }

    /// Waits up to `timeout` seconds for it to end.
    func waitForExit(timeout: Double) -> Exit? {
        let deadline = Monotonic.seconds() + timeout
        while poll() == nil {
            if Monotonic.seconds() >= deadline { return nil }
            Monotonic.sleep(0.002)
        }
        return exit
    }

    /// Sends `signal` if it still runs (by pid; it is not reaped before we see its exit).
    func send(_ signal: Int32) {
        if poll() == nil { Glibc.kill(pid, signal) }
    }

    /// SIGTERM, then SIGKILL after `grace` seconds; returns how it ended and
    /// whether SIGKILL was needed.
    @discardableResult
    func stop(grace: Double = 10) -> (exit: Exit, killed: Bool) {
        send(SIGTERM)
        if let exit = waitForExit(timeout: grace) { return (exit, false) }
        send(SIGKILL)
        return (waitForExit(timeout: 10) ?? .signal(SIGKILL), true)
    }

    /// SIGKILL at once (it hung, or a run is being abandoned).
    @discardableResult
    func killNow() -> Exit {
        send(SIGKILL)
        return waitForExit(timeout: 10) ?? .signal(SIGKILL)
    }
}
