import Foundation
import Glibc
import Logging

/// Keeps a plugin that takes the daemon down while it starts from doing so
/// at every start.
///
/// A plugin runs in the daemon's process: one whose `init` or `start`
/// crashes, or calls `exit`, ends the daemon, and a supervisor that restarts
/// it (systemd's `Restart=on-failure`) would start it into the same crash for
/// good. So the daemon notes in its state directory which plugin file it is
/// starting (`plugin-starting`) and removes the note once the plugin's start
/// returned. A note found at the next start names the plugin that ended the
/// last one: that file is listed in `plugins-refused` and refused until it
/// changes (a new build, a `touch`) or the list is deleted.
///
/// A file is known by its device, inode, size and modification time, so a
/// rebuilt plugin is tried again. A daemon killed from outside (SIGKILL, a
/// power cut) exactly while a plugin started leaves the same note: the log
/// line says how to try the plugin again. Both files are written without
/// following links, in the directory ``StateStore`` has checked is the
/// user's alone.
final class PluginTrial {
    /// One plugin file as it was when it was started or refused.
    struct FileIdentity: Equatable {
        let device: UInt64
        let inode: UInt64
        let size: Int64
        let modifiedSeconds: Int64
        let modifiedNanoseconds: Int64
        let path: String

        /// The file at `path` now; nil if it cannot be examined.
        init?(path: String) {
            var info = stat()
            guard stat(path, &info) == 0 else { return nil }
            device = UInt64(info.st_dev)
            inode = UInt64(info.st_ino)
            size = Int64(info.st_size)
            modifiedSeconds = Int64(info.st_mtim.tv_sec)
            modifiedNanoseconds = Int64(info.st_mtim.tv_nsec)
            self.path = path
        }

        /// Reads a line ``line`` wrote; nil for anything else.
        init?(line: Substring) {
            let fields = line.split(separator: " ", maxSplits: 5, omittingEmptySubsequences: false)
            // The path as the loader named it: relative when --plugin-dir was.
            guard fields.count == 6, let device = UInt64(fields[0]), let inode = UInt64(fields[1]),
                  let size = Int64(fields[2]), let seconds = Int64(fields[3]), let nanoseconds = Int64(fields[4]),
                  !fields[5].isEmpty
            else { return nil }
            self.device = device
            self.inode = inode
            self.size = size
            modifiedSeconds = seconds
            modifiedNanoseconds = nanoseconds
            path = String(fields[5])
        }

        /// One line: the numbers, then the path (which may hold spaces, not newlines).
        var line: String { "\(device) \(inode) \(size) \(modifiedSeconds) \(modifiedNanoseconds) \(path)" }
    }

    private let notePath: String
    private let listPath: String
    private let logger: Logger
    /// The files refused (those still as they were when they ended a start).
    private(set) var refused: [FileIdentity] = []

    /// Reads what the last start left: its note, if it ended while a plugin
    /// started, joins the refused files, and files that changed since they
    /// were refused leave the list.
    init(stateDirectory: String, logger: Logger) {
        notePath = stateDirectory + "/plugin-starting"
        listPath = stateDirectory + "/plugins-refused"
        self.logger = logger
        let listed = Self.lines(of: listPath, logger: logger)
        refused = listed.compactMap(FileIdentity.init(line:)).filter { FileIdentity(path: $0.path) == $0 }
        var changed = refused.count != listed.count
        if let culprit = Self.lines(of: notePath, logger: logger).first.flatMap(FileIdentity.init(line:)) {
            let ended = "the last start of bgtaskd ended while the plugin \(culprit.path) started (it crashed, exited, or bgtaskd was killed just then)"
            if FileIdentity(path: culprit.path) == culprit {
                logger.error("\(ended): it is refused until the file changes; to try it as it is, delete \(listPath)")
                if !refused.contains(culprit) {
                    refused.append(culprit)
                    changed = true
                }
            } else {
                logger.warning("\(ended); the file has changed since: it is tried again")
            }
        }
        if changed { saveList() }
        if unlink(notePath) != 0, errno != ENOENT {
            logger.warning("cannot remove \(notePath): \(String(cString: strerror(errno)))")
        }
    }

    /// Why the plugin at `path` is not started, or nil if it may be.
    func refusal(of path: String) -> String? {
        guard let now = FileIdentity(path: path), refused.contains(now) else { return nil }
        return "a start of bgtaskd ended while it started, and the file has not changed since (delete \(listPath) to try it as it is)"
    }

    /// Runs `start` (the plugin's init and start) with the note naming the
    /// file written first and removed after. Without the note (a full disk)
    /// the plugin still starts: only a crash would have needed it.
    func starting<T>(_ path: String, _ start: () throws -> T) rethrows -> T {
        let noted = FileIdentity(path: path).map { write($0.line + "\n", to: notePath) } ?? false
        defer {
            // Also a note a failed write left half written.
            if unlink(notePath) != 0, errno != ENOENT, noted {
                logger.warning("cannot remove \(notePath): \(String(cString: strerror(errno)))")
            }
        }
        return try start()
    }

    private func saveList() {
        let temporary = listPath + ".new"
        if refused.isEmpty {
            if unlink(listPath) != 0, errno != ENOENT { logger.warning("cannot remove \(listPath): \(String(cString: strerror(errno)))") }
            return
        }
        guard write(refused.map { $0.line + "\n" }.joined(), to: temporary) else { return }
        if rename(temporary, listPath) != 0 {
            logger.warning("cannot write \(listPath): \(String(cString: strerror(errno)))")
            unlink(temporary)
        }
    }

    /// Replaces the file at `path` with `text`, never through a link; false (logged) if it could not.
    private func write(_ text: String, to path: String) -> Bool {
        let descriptor = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else {
            logger.warning("cannot write \(path): \(String(cString: strerror(errno)))")
            return false
        }
        defer { close(descriptor) }
        let bytes = Array(text.utf8)
        let written = bytes.withUnsafeBytes { Glibc.write(descriptor, $0.baseAddress, $0.count) }
        guard written == bytes.count else {
            logger.warning("cannot write \(path): \(written < 0 ? String(cString: strerror(errno)) : "short write")")
            return false
        }
        return true
    }

    /// The lines of the file at `path`, never read through a link; none if it is missing.
    private static func lines(of path: String, logger: Logger) -> [Substring] {
        let descriptor = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)
        guard descriptor >= 0 else {
            if errno != ENOENT { logger.warning("cannot read \(path): \(String(cString: strerror(errno)))") }
            return []
        }
        defer { close(descriptor) }
        let data = FileHandle(fileDescriptor: descriptor, closeOnDealloc: false).readDataToEndOfFile()
        return String(decoding: data, as: UTF8.self).split(separator: "\n")
    }
}
