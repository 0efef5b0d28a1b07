import BackgroundTasks
import Glibc
import Synchronization

/// A value in an event line.
enum EventValue: Sendable {
    case string(String)
    case int(Int)
    case double(Double)

    var encoded: String {
        switch self {
        case .int(let value):
            return String(value)
        case .double(let value):
            // JSON has no inf or nan; DBL_MAX prints as 1.7976931348623157e+308.
            return value.isFinite ? "\(value)" : "null"
        case .string(let text):
            // The SDK's JSON text (quoted and escaped).
            return JSONValue.string(text).description
        }
    }
}

/// Prints one JSON object per line on stdout, written at once with write(2)
/// (no stdio buffer to flush, and nothing lost when the process is killed
/// right after), one line at a time.
enum EventLog {
    private static let lock = Mutex(())

    /// Prints `{"event":"<event>", <fields>…}`.
    static func emit(_ event: String, _ fields: KeyValuePairs<String, EventValue> = [:]) {
        var line = "{\"event\":" + EventValue.string(event).encoded
        for (key, value) in fields {
            line += "," + EventValue.string(key).encoded + ":" + value.encoded
        }
        line += "}\n"
        lock.withLock { _ in
            var bytes = Array(line.utf8)[...]
            while !bytes.isEmpty {
                let written = bytes.withUnsafeBytes { write(STDOUT_FILENO, $0.baseAddress, $0.count) }
                if written < 0 {
                    if errno == EINTR { continue }
                    return
                }
                bytes = bytes.dropFirst(written)
            }
        }
    }

    /// Prints an `error` event and exits with status 1.
    static func fail(_ error: any Error) -> Never {
        if let error = error as? BackgroundTasksError {
            emit("error", ["name": .string(error.name), "message": .string(error.message)])
        } else {
            emit("error", ["name": .string("bgtaskd-testapp.Error"), "message": .string("\(error)")])
        }
        exit(1)
    }
}
