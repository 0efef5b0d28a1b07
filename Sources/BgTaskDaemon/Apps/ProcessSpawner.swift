import CBgTaskShim
import Glibc

/// Swift over `bgt_spawn`: starts a program with a clean process state
/// (empty signal mask, default dispositions, RLIMIT_NOFILE soft limit 1024,
/// stdin on /dev/null, a session of its own) and says synchronously whether
/// `execve` worked.
enum ProcessSpawner {
    /// A child that is running the new program; the caller owns the pidfd
    /// and must reap the child (``reap(pidfd:)``).
    struct Child: Equatable {
        var pid: Int32
        var pidfd: Int32
    }

    /// Why a spawn failed.
    struct Failure: Error, Equatable, CustomStringConvertible {
        /// The step that failed.
        enum Stage: Equatable, Sendable {
            /// The program is not in the search path, or not executable.
            case lookup
            /// pipe, fork or pidfd_open.
            case fork
            /// The child could not move into its cgroup.
            case cgroup
            /// The child could not set up its process state.
            case setup
            /// `execve` failed.
            case exec
        }

        var stage: Stage
        var errno: Int32
        /// The program as named in the command line.
        var program: String
        /// The search path used for a name without '/'.
        var searchPath: String?

        var description: String {
            let error = ProcessSpawner.describe(errno: errno)
            switch stage {
            case .lookup:
                if program.contains("/") { return "\(program): \(error)" }
                return "\(program) not found in PATH \(searchPath ?? "/bin:/usr/bin"): \(error)"
            case .fork: return "cannot start a process: \(error)"
            case .cgroup: return "cannot move the new process into its cgroup: \(error)"
            case .setup: return "cannot set up the new process: \(error)"
            case .exec: return "cannot execute \(program): \(error)"
            }
        }
    }

    /// How a reaped child ended.
    enum ReapResult: Equatable {
        case running
        case exited(ExitStatus)
        /// waitid failed (`ECHILD`: somebody else reaped it).
        case failed(errno: Int32)
    }

    /// Starts `commandLine` (non-empty; `commandLine[0]` is looked up in
    /// `searchPath` like execvp does) with `environment` ("KEY=value" entries)
    /// in `directory`, optionally moving it into the cgroup whose open
    /// `cgroup.procs` is `cgroupProcsFD`.
    static func spawn(
        commandLine: [String], environment: [String], searchPath: String?, directory: String?,
        cgroupProcsFD: Int32?
    ) -> Result<Child, Failure> {
        precondition(!commandLine.isEmpty, "spawn needs a program")
        // All copies are made here, in the parent: the child must not allocate.
        let argv = CStringArray(commandLine)
        let envp = CStringArray(environment)
        defer {
            argv.free()
            envp.free()
        }
        var result = bgt_spawn_result()
        let r: Int32 = withOptionalCString(searchPath) { searchPath in
            withOptionalCString(directory) { directory in
                var request = bgt_spawn_request(
                    argv: argv.pointer, envp: envp.pointer, search_path: searchPath,
                    directory: directory, cgroup_procs_fd: cgroupProcsFD ?? -1)
                return bgt_spawn(&request, &result)
            }
        }
        guard r < 0 else { return .success(Child(pid: result.pid, pidfd: result.pidfd)) }
        let stage: Failure.Stage
        switch result.stage {
        case Int32(BGT_SPAWN_STAGE_LOOKUP.rawValue): stage = .lookup
        case Int32(BGT_SPAWN_STAGE_CGROUP.rawValue): stage = .cgroup
        case Int32(BGT_SPAWN_STAGE_SETUP.rawValue): stage = .setup
        case Int32(BGT_SPAWN_STAGE_EXEC.rawValue): stage = .exec
        default: stage = .fork
        }
        return .failure(Failure(stage: stage, errno: result.error, program: commandLine[0], searchPath: searchPath))
    }

    /// Reaps the child behind `pidfd` if it has exited (never blocks).
    static func reap(pidfd: Int32) -> ReapResult {
        var exit = bgt_spawn_exit()
        let r = bgt_spawn_reap(pidfd, &exit)
        if r < 0 { return .failed(errno: -r) }
        if r == 0 { return .running }
        switch exit.code {
        case Int32(CLD_EXITED): return .exited(.exited(code: exit.status))
        case Int32(CLD_DUMPED): return .exited(.killed(signal: exit.status, coreDumped: true))
        default: return .exited(.killed(signal: exit.status, coreDumped: false))
        }
    }

    /// "No such file or directory (ENOENT)".
    static func describe(errno: Int32) -> String {
        let text = String(cString: strerror(errno))
        guard let name = bgt_errno_name(errno) else { return text }
        return "\(text) (\(String(cString: name)))"
    }

    /// The `$PATH` and `$HOME` an environment list holds.
    static func value(of key: String, in environment: [String]) -> String? {
        let prefix = key + "="
        return environment.last { $0.hasPrefix(prefix) }.map { String($0.dropFirst(prefix.count)) }
    }

    private static func withOptionalCString<R>(_ text: String?, _ body: (UnsafePointer<CChar>?) -> R) -> R {
        guard let text else { return body(nil) }
        return text.withCString { body($0) }
    }
}

/// A NULL-terminated `char *[]` of malloc'ed copies, freed explicitly.
private struct CStringArray {
    let pointer: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>

    init(_ strings: [String]) {
        pointer = .allocate(capacity: strings.count + 1)
        for (index, string) in strings.enumerated() { pointer[index] = strdup(string) }
        pointer[strings.count] = nil
    }

    func free() {
        var index = 0
        while let element = pointer[index] {
            Glibc.free(element)
            index += 1
        }
        pointer.deallocate()
    }
}
