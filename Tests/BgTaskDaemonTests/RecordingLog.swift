import Logging
import Synchronization

/// A log that keeps its lines in memory, for tests that check what was logged.
final class RecordingLog: Sendable {
    /// One line as logged.
    struct Line: Sendable, CustomStringConvertible {
        let level: Logger.Level
        let message: String
        var description: String { "\(level): \(message)" }
    }

    /// Writes into a ``RecordingLog``.
    private struct Handler: LogHandler {
        let sink: RecordingLog
        var logLevel: Logger.Level = .trace
        var metadata: Logger.Metadata = [:]

        subscript(metadataKey key: String) -> Logger.Metadata.Value? {
            get { metadata[key] }
            set { metadata[key] = newValue }
        }

        func log(event: LogEvent) {
            var fields = metadata
            if let extra = event.metadata { fields.merge(extra) { $1 } }
            var text = event.message.description
            if !fields.isEmpty {
                text += " " + fields.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: " ")
            }
            sink.lines.withLock { $0.append(Line(level: event.level, message: text)) }
        }
    }

    private let lines = Mutex<[Line]>([])

    /// A logger writing here.
    var logger: Logger { Logger(label: "test") { _ in Handler(sink: self) } }

    /// Every line so far.
    var all: [Line] { lines.withLock { $0 } }

    /// The lines at `level` or above.
    func lines(atLeast level: Logger.Level) -> [Line] { all.filter { $0.level >= level } }
}
