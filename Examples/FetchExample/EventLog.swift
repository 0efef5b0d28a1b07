import BackgroundTasks
import Foundation
import Glibc

/// One JSON object per line on standard output, so that a person can read
/// what the app does and a test can follow it line by line:
///
///     {"event":"ready","reason":"fetch","pending":1}
///     {"event":"fetched","result":"newData","bytes":123}
///     {"event":"push","json":"{\"aps\":{\"alert\":\"Hi\"}}","alert":"Hi","title":null,"content_available":false}
///
/// Lines are written with write(2) at once, not through stdio: standard
/// output is usually a pipe or a journal here, which stdio would buffer until
/// exit, and an app in the background may be terminated at any moment.
enum EventLog {
    /// A value in an event line.
    enum Value {
        case string(String)
        case int(Int)
        case double(Double)
        case bool(Bool)
        case null
    }

    /// Prints `{"event":"<event>", <fields>…}` as one line.
    static func emit(_ event: String, _ fields: KeyValuePairs<String, Value> = [:]) {
        var line = "{\"event\":" + quoted(event)
        for (key, value) in fields {
            line += "," + quoted(key) + ":" + encoded(value)
        }
        line += "}\n"
        var bytes = Array(line.utf8)[...]
        while !bytes.isEmpty {
            let written = bytes.withUnsafeBytes { write(STDOUT_FILENO, $0.baseAddress, $0.count) }
            if written < 0 {
                if errno == EINTR { continue }
                return  // stdout is gone; nothing to tell anybody
            }
            bytes = bytes.dropFirst(written)
        }
    }

    /// Prints `{"event":"error","stage":…,"message":…}` (with the D-Bus
    /// error name when the daemon answered with one).
    static func error(_ stage: String, _ error: any Error) {
        if let error = error as? BackgroundTasksError {
            emit("error", ["stage": .string(stage), "name": .string(error.name), "message": .string(error.message)])
        } else {
            emit("error", ["stage": .string(stage), "message": .string(describe(error))])
        }
    }

    /// A short text for any error (Foundation's errors print badly by default).
    static func describe(_ error: any Error) -> String {
        if let error = error as? FetchError { return error.description }
        let nsError = error as NSError
        if nsError.domain == NSURLErrorDomain || nsError.domain == NSCocoaErrorDomain {
            let reason = nsError.userInfo[NSLocalizedDescriptionKey] as? String ?? "error \(nsError.code)"
            return "\(reason) (\(nsError.domain) \(nsError.code))"
        }
        return "\(error)"
    }

    private static func encoded(_ value: Value) -> String {
        switch value {
        case .string(let text): quoted(text)
        case .int(let number): String(number)
        case .double(let number): number.isFinite ? "\(number)" : "null"  // JSON has no inf
        case .bool(let flag): flag ? "true" : "false"
        case .null: "null"
        }
    }

    /// `text` as a JSON string, quoted and escaped as the SDK's JSON values are.
    private static func quoted(_ text: String) -> String {
        JSONValue.string(text).description
    }
}
