import Glibc

/// How a launched process ended, as `waitid` reports it.
enum ExitStatus: Sendable, Hashable, CustomStringConvertible {
    /// It called `exit(code)` (or returned from main).
    case exited(code: Int32)
    /// A signal ended it.
    case killed(signal: Int32, coreDumped: Bool)
    /// It is not the daemon's child (launched by an earlier run, and taken
    /// over), or something else reaped it before the launcher could
    /// (`ECHILD`): the status is lost.
    case unknown

    /// Whether it exited with code 0.
    var isSuccess: Bool { self == .exited(code: 0) }

    /// The names of the signals that usually end a process (Swift's Glibc lacks `sigabbrev_np`).
    private static let signalNames: [Int32: String] = [
        SIGHUP: "SIGHUP", SIGINT: "SIGINT", SIGQUIT: "SIGQUIT", SIGILL: "SIGILL", SIGTRAP: "SIGTRAP",
        SIGABRT: "SIGABRT", SIGBUS: "SIGBUS", SIGFPE: "SIGFPE", SIGKILL: "SIGKILL", SIGUSR1: "SIGUSR1",
        SIGSEGV: "SIGSEGV", SIGUSR2: "SIGUSR2", SIGPIPE: "SIGPIPE", SIGALRM: "SIGALRM", SIGTERM: "SIGTERM",
        SIGXCPU: "SIGXCPU", SIGXFSZ: "SIGXFSZ", SIGSYS: "SIGSYS",
    ]

    /// As a clause after a subject: "exited with code 1", "was killed by SIGTERM".
    var clause: String {
        if case .killed = self { return "was \(description)" }
        return description
    }

    var description: String {
        switch self {
        case .exited(let code): return "exited with code \(code)"
        case .killed(let signal, let core):
            let name = ExitStatus.signalNames[signal] ?? "signal \(signal)"
            return "killed by \(name)" + (core ? " (core dumped)" : "")
        case .unknown: return "exited (its status is unknown: it was taken over from an earlier run, or reaped elsewhere)"
        }
    }
}
