import Foundation
import Glibc
import Logging

/// What the daemon has frozen, in a file beside the state database, so that a
/// daemon that died without thawing (SIGKILL, a crash) has its apps thawed by
/// the next start: a frozen app must never stay frozen because its daemon is gone.
///
/// One line per frozen thing: `cgroup <path>`, `unit <name>` or
/// `pid <pid> <start time>` (the start time, field 22 of /proc/PID/stat, tells
/// the process from a later one with the same pid). The file is rewritten
/// whole (a new file renamed over the old) after each change; it needs no
/// fsync, as it only has to outlive the daemon, not the machine: after a
/// reboot nothing is frozen.
final class FreezeJournal {
    /// One frozen thing.
    enum Entry: Hashable, Sendable {
        case cgroup(String)
        case unit(String)
        case process(pid: Int32, startTime: UInt64)

        var line: String {
            switch self {
            case .cgroup(let path): "cgroup \(path)"
            case .unit(let name): "unit \(name)"
            case .process(let pid, let start): "pid \(pid) \(start)"
            }
        }

        init?(line: Substring) {
            let parts = line.split(separator: " ", maxSplits: 1)
            guard parts.count == 2 else { return nil }
            switch parts[0] {
            case "cgroup": self = .cgroup(String(parts[1]))
            case "unit": self = .unit(String(parts[1]))
            case "pid":
                let numbers = parts[1].split(separator: " ")
                guard numbers.count == 2, let pid = Int32(numbers[0]), let start = UInt64(numbers[1]) else { return nil }
                self = .process(pid: pid, startTime: start)
            default: return nil
            }
        }
    }

    let path: String
    private let logger: Logger
    private var entries: [Entry] = []

    init(path: String, logger: Logger) {
        self.path = path
        self.logger = logger
    }

    /// What an earlier run left frozen (and the file is gone: the caller thaws them now).
    func takeLeftovers() -> [Entry] {
        guard let text = try? String(contentsOfFile: path, encoding: .utf8) else { return [] }
        unlink(path)
        return text.split(separator: "\n").compactMap(Entry.init(line:))
    }

    func add(_ entry: Entry) {
        guard !entries.contains(entry) else { return }
        entries.append(entry)
        save()
    }

    func remove(_ entry: Entry) {
        guard let index = entries.firstIndex(of: entry) else { return }
        entries.remove(at: index)
        save()
    }

    private func save() {
        if entries.isEmpty {
            if unlink(path) != 0, errno != ENOENT { logger.warning("cannot remove \(path): \(String(cString: strerror(errno)))") }
            return
        }
        let text = entries.map(\.line).joined(separator: "\n") + "\n"
        let temporary = path + ".new"
        do {
            try text.write(toFile: temporary, atomically: false, encoding: .utf8)
            guard rename(temporary, path) == 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
        } catch {
            // Only a crash of the daemon would need it: worth a warning, not a failure.
            logger.warning("cannot record what is frozen in \(path): \(error)")
        }
    }

    /// The start time of a process (clock ticks after boot, field 22 of /proc/PID/stat), nil when it is gone.
    static func startTime(of pid: Int32) -> UInt64? {
        guard let text = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
              let close = text.lastIndex(of: ")") else { return nil }
        // After "pid (comm)" come fields 3…; the start time is field 22.
        let fields = text[text.index(after: close)...].split(separator: " ")
        return fields.count > 19 ? UInt64(fields[19]) : nil
    }
}
