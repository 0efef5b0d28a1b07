public import Glibc
import CBgTaskShim

/// Starts a helper process the way the project's tools start services (the
/// bus, bgtaskd, a mock, a test app): standard input from /dev/null, standard
/// output and error appended to a log file or to descriptors given (pipes),
/// no signal blocked and every signal at its
/// default action (so a child never inherits an ignored SIGTERM and hides a
/// shutdown bug), and this process's environment with some variables
/// replaced or left out, and no other descriptor of this process. The
/// caller signals and reaps it by its pid.
///
/// One implementation for the benchmarks, the fuzzer and the tests: an
/// executable target cannot import another one, so it lives here.
public enum ServiceSpawn {
    /// Why a start failed.
    public struct Failure: Error, CustomStringConvertible {
        public let path: String
        /// posix_spawn's error number.
        public let code: Int32

        public var description: String { "cannot start \(path): \(String(cString: strerror(code)))" }
    }

    /// Where the child's standard output and error go.
    public enum Output: Sendable {
        /// Both appended to this file (created if missing).
        case log(String)
        /// Onto these descriptors of the parent (e.g. pipes' write ends, which the caller closes afterwards).
        case descriptors(standardOutput: Int32, standardError: Int32)
    }

    /// Starts `path` with `arguments`. Returns its pid and the CLOCK_MONOTONIC
    /// instant (ns) right before `posix_spawn`.
    public static func start(
        path: String, arguments: [String], environment overrides: [String: String] = [:],
        removing: Set<String> = [], output: Output
    ) throws(Failure) -> (pid: Glibc.pid_t, spawnedAt: Int64) {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0)
        switch output {
        case .log(let path):
            posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, path, O_WRONLY | O_CREAT | O_APPEND, 0o600)
            posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO)
        case .descriptors(let standardOutput, let standardError):
            posix_spawn_file_actions_adddup2(&actions, standardOutput, STDOUT_FILENO)
            posix_spawn_file_actions_adddup2(&actions, standardError, STDERR_FILENO)
        }
        // Nothing else of this process goes along: a descriptor opened without
        // O_CLOEXEC (Foundation's file writes, a test's filler file) kept by a
        // long-lived child holds a script busy or a disk full for another test.
        let closing = bgt_spawn_actions_close_from(&actions, 3)
        guard closing == 0 else { throw Failure(path: path, code: closing) }

        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var none = sigset_t()
        sigemptyset(&none)
        posix_spawnattr_setsigmask(&attributes, &none)
        var all = sigset_t()
        sigfillset(&all)
        posix_spawnattr_setsigdefault(&attributes, &all)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))

        var variables: [String] = []
        var index = 0
        while let entry = environ[index] {
            let text = String(cString: entry)
            let name = String(text.prefix { $0 != "=" })
            if overrides[name] == nil && !removing.contains(name) { variables.append(text) }
            index += 1
        }
        variables += overrides.map { "\($0.key)=\($0.value)" }
        let argv: [UnsafeMutablePointer<CChar>?] = ([path] + arguments).map { strdup($0) } + [nil]
        let envp: [UnsafeMutablePointer<CChar>?] = variables.map { strdup($0) } + [nil]
        defer { for pointer in argv + envp { free(pointer) } }
        var child: pid_t = 0
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        let spawnedAt = Int64(now.tv_sec) * 1_000_000_000 + Int64(now.tv_nsec)
        let r = posix_spawn(&child, path, &actions, &attributes, argv, envp)
        guard r == 0 else { throw Failure(path: path, code: r) }
        return (child, spawnedAt)
    }
}
