import Glibc

/// SIGTERM handling: the daemon's first step against an app that overstays.
enum Termination {
    /// Ignores SIGTERM (only SIGKILL then stops the process), or catches it to
    /// print `{"event":"sigterm"}` and exit with status 143 (128 + SIGTERM).
    /// Call before any thread starts, so that every thread handles it alike.
    static func install(ignoring: Bool) {
        var action = sigaction()
        sigemptyset(&action.sa_mask)
        if ignoring {
            action.__sigaction_handler.sa_handler = SIG_IGN
        } else {
            action.__sigaction_handler.sa_handler = onSIGTERM
        }
        sigaction(SIGTERM, &action, nil)
    }
}

/// Runs in signal context, on whichever thread got the signal: only
/// async-signal-safe calls (write, _exit), no allocation.
private func onSIGTERM(_: Int32) {
    let line: StaticString = "{\"event\":\"sigterm\"}\n"
    _ = write(STDOUT_FILENO, line.utf8Start, line.utf8CodeUnitCount)
    _exit(143)
}
