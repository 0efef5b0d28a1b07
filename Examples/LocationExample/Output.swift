import BackgroundTasks
import Glibc
import Synchronization

/// What the app tells its user: one line of text per happening on standard
/// output ("entered home", "left office"), problems on standard error.
///
/// Each line goes out whole with one write(2), not through stdio: standard
/// output is usually a pipe or the journal here, which stdio would buffer
/// until exit, and an app in the background may be stopped at any moment.
enum Output {
    private static let lock = Mutex(())

    /// Writes `line` and a newline to standard output.
    static func say(_ line: String) {
        write(line + "\n", to: STDOUT_FILENO)
    }

    /// Writes `bgtaskd-example-location: <what>` to standard error.
    static func complain(_ what: String) {
        write("bgtaskd-example-location: " + what + "\n", to: STDERR_FILENO)
    }

    /// An error from the SDK, with the D-Bus error name when the daemon gave one.
    static func complain(_ what: String, _ error: any Error) {
        if let error = error as? BackgroundTasksError {
            complain("\(what): \(error.message) (\(error.name))")
        } else {
            complain("\(what): \(error)")
        }
    }

    private static func write(_ text: String, to descriptor: Int32) {
        lock.withLock { _ in
            var bytes = Array(text.utf8)[...]
            while !bytes.isEmpty {
                let written = bytes.withUnsafeBytes { Glibc.write(descriptor, $0.baseAddress, $0.count) }
                if written < 0 {
                    if errno == EINTR { continue }
                    return  // nobody is listening any more
                }
                bytes = bytes.dropFirst(written)
            }
        }
    }
}
