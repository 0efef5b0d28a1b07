import BgTaskProtocol
import Foundation
public import Logging

/// Writes log lines to stderr. Under systemd (`JOURNAL_STREAM` set) each line
/// starts with its syslog priority (`<5>`), which journald turns into the
/// entry's priority; elsewhere it starts with the program name and level.
public struct StandardErrorLogHandler: LogHandler {
    public var logLevel: Logger.Level
    public var metadata: Logger.Metadata = [:]
    public var metadataProvider: Logger.MetadataProvider?
    private let label: String
    private let journal: Bool

    public init(label: String, level: Logger.Level, environment: [String: String]? = nil) {
        self.label = label
        self.logLevel = level
        self.journal = (environment ?? ProcessInfo.processInfo.environment)["JOURNAL_STREAM"] != nil
    }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    public func log(event: LogEvent) {
        // A line that cannot be written (a full disk, a reader gone) is lost; the daemon goes on.
        try? OutputFile.write(line(for: event), toDescriptor: STDERR_FILENO)
    }

    /// The line written for `event`, newline included. What the message and
    /// metadata hold is escaped (``LogText``): apps choose much of it, and a
    /// line break in it must not start a line of their making.
    func line(for event: LogEvent) -> String {
        var fields = metadata
        if let extra = event.metadata { fields.merge(extra) { $1 } }
        var line = journal ? "<\(Self.priority(event.level))>" : "\(LogText.escaped(label)): \(event.level): "
        line += LogText.escaped(event.message.description)
        if !fields.isEmpty {
            line += " " + fields.sorted { $0.key < $1.key }
                .map { "\(LogText.escaped($0.key))=\(LogText.escaped($0.value.description))" }.joined(separator: " ")
        }
        return line + "\n"
    }

    private static func priority(_ level: Logger.Level) -> Int {
        switch level {
        case .trace, .debug: 7
        case .info: 6
        case .notice: 5
        case .warning: 4
        case .error: 3
        case .critical: 2
        }
    }
}
