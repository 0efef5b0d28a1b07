#if canImport(Glibc)
import Glibc
#endif

/// Makes a command-line program fail when its standard output could not be
/// written: a full disk behind `bgtaskctl apps --json > apps.json` left a
/// short file and exit status 0, and a script went on with it.
///
/// At exit, standard output is flushed and closed; if that fails the
/// program says why on standard error and exits 74 (EX_IOERR) instead.
public enum StandardOutputCheck {
    /// The name the failure is reported under.
    nonisolated(unsafe) private static var program = ""

    /// Checks standard output when the process exits (call once, first thing in `main`).
    public static func atExit(program name: String) {
        program = name
        atexit {
            // C's stdout, through its symbol: Swift 6 refuses to read the global (shared
            // mutable state), and only its error flag tells of a write that failed
            // before the last buffer (fflush alone sees only that last one).
            let stream = dlsym(nil, "stdout")?.load(as: UnsafeMutablePointer<FILE>?.self)
            var reason: String?
            if fflush(stream) != 0 {
                reason = String(cString: strerror(errno))
            } else if let stream, ferror(stream) != 0 {
                reason = "a write to it failed"
            } else if close(STDOUT_FILENO) != 0, errno != EBADF {
                // EBADF: closed from the start (>&-) with nothing written to it.
                reason = String(cString: strerror(errno))
            }
            guard let reason else { return }
            let text = "\(StandardOutputCheck.program): cannot write standard output: \(reason)\n"
            _ = text.withCString { write(STDERR_FILENO, $0, strlen($0)) }
            _exit(74)
        }
    }
}
