import Foundation
import Glibc
import Logging

/// What the daemon has frozen, in a file beside the state database, so that a
/// daemon that died without thawing (SIGKILL, a crash) has its apps thawed by
/// the next start: a frozen app must never stay frozen because its daemon is gone.
///
/// One line per frozen thing: `cgroup <path>`, `unit <name>` or
/// `pid <pid> <start time>` (the start time, field 22 of /proc/PID/stat, tells
/// the process from a later one with the same pid). Changes are written
/// together once the current event is handled (``add(_:)`` and
/// ``remove(_:)`` only schedule it): the whole list with one pwrite and a
/// truncate on a file kept open. It needs no fsync, as it only has to outlive
/// the daemon, not the machine: after a reboot nothing is frozen.
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
    /// Runs a job once the current event is handled (the event loop's `later`).
    private let schedule: (@escaping () -> Void) -> Void
    private var entries: [Entry] = []
    private var fd: Int32 = -1
    private var saveScheduled = false

    init(path: String, logger: Logger, schedule: @escaping (@escaping () -> Void) -> Void) {
        self.path = path
        self.logger = logger
        self.schedule = schedule
    }

    deinit {
        if fd >= 0 { close(fd) }
    }

    /// What an earlier run left frozen (and the file is emptied: the caller thaws them now).
    func takeLeftovers() -> [Entry] {
        // Never through a link: what it names would be emptied, or its lines read as things to thaw.
        let descriptor = open(path, O_RDWR | O_NOFOLLOW | O_CLOEXEC)
        guard descriptor >= 0 else {
            if errno == ELOOP { logger.warning("\(path) is a symbolic link, not bgtaskd's: it is not read") }
            return []
        }
        defer { close(descriptor) }
        let text = FileHandle(fileDescriptor: descriptor, closeOnDealloc: false).readDataToEndOfFile()
        _ = ftruncate(descriptor, 0)
        return String(decoding: text, as: UTF8.self).split(separator: "\n").compactMap(Entry.init(line:))
    }

    /// Thaws one thing an earlier run left frozen: a cgroup or a process
    /// here, a unit through `thawUnit` (the user manager is on the bus).
    static func thaw(_ entry: Entry, logger: Logger, thawUnit: (String) -> Void) {
        switch entry {
        case .cgroup(let path):
            do throws(Cgroup.Failure) {
                try Cgroup(path: path).setFrozen(false)
            } catch {
                if error.errno != ENOENT { logger.warning("\(error)") }
            }
        case .unit(let name):
            thawUnit(name)
        case .process(let pid, let start):
            // Only the very process that was stopped: a pid can have been reused since.
            if startTime(of: pid) == start {
                kill(pid, SIGCONT)
                ProcessTable.signalGroup(ledBy: pid, SIGCONT) { startTime(of: pid) == start }
            }
        }
    }

    func add(_ entry: Entry) {
        guard !entries.contains(entry) else { return }
        entries.append(entry)
        scheduleSave()
    }

    func remove(_ entry: Entry) {
        guard let index = entries.firstIndex(of: entry) else { return }
        entries.remove(at: index)
        scheduleSave()
    }

    /// Writes the list now (at shutdown, or when a save is due).
    func save() {
        saveScheduled = false
        if fd < 0 {
            // An empty list needs no file.
            if entries.isEmpty { return }
            fd = open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0o600)
            guard fd >= 0 else {
                // Only a crash of the daemon would need it: worth a warning, not a failure.
                logger.warning("cannot record what is frozen in \(path): \(String(cString: strerror(errno)))")
                return
            }
        }
        let bytes = Array(entries.map { $0.line + "\n" }.joined().utf8)
        let written = bytes.withUnsafeBytes { pwrite(fd, $0.baseAddress, $0.count, 0) }
        if written != bytes.count || ftruncate(fd, off_t(bytes.count)) != 0 {
            logger.warning("cannot record what is frozen in \(path): \(String(cString: strerror(errno)))")
        }
    }

    /// Writes the list now if a change waits to be written: before anyone is
    /// told the freezes are done (a daemon killed right after must leave them listed).
    func flush() {
        if saveScheduled { save() }
    }

    private func scheduleSave() {
        guard !saveScheduled else { return }
        saveScheduled = true
        schedule { [weak self] in
            guard let self, self.saveScheduled else { return }
            self.save()
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
