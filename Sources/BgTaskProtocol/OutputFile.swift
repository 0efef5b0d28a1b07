#if canImport(Glibc)
import Glibc
#endif

/// Writes a program's output file (`bgtaskd --bus-introspect FILE`,
/// `bgtaskd-sim generate -o FILE`) the way a shell's redirection would,
/// without ever replacing what the name points at.
///
/// A regular file, or a name with nothing there yet, gets the text whole:
/// it is written beside and renamed over it, so a reader sees the old file
/// or the new one, never half (an existing file's permissions are kept).
/// Anything else is written through, never replaced: a symbolic link (its
/// target gets the text), a device such as `/dev/null`, a FIFO. Renaming
/// over those replaced `/dev/null` itself when run as root. `/dev/stdout`
/// and `/dev/stderr` are the process's own descriptors, written as they are.
public enum OutputFile {
    /// Why a write failed, as `strerror` says it.
    public struct Failure: Error, Sendable, CustomStringConvertible {
        public let description: String
        /// The errno behind it (0 when there is none).
        public var errorNumber: Int32 = 0

        /// Whether writing failed (no room or quota left, an I/O error, a
        /// file too large): EX_IOERR (74), rather than a file that cannot be
        /// made (EX_CANTCREAT, 73).
        public var isWriteFailure: Bool { [ENOSPC, EDQUOT, EIO, EFBIG].contains(errorNumber) }
    }

    /// Writes `text` to `path` (see ``OutputFile``).
    public static func write(_ text: String, to path: String) throws(Failure) {
        // Standard output and error as they are: opened by name they would be truncated
        // (a log appended to with >>), or fail (a socket, as under journald).
        if path == "/dev/stdout" || path == "/dev/stderr" {
            let descriptor = dup(path == "/dev/stdout" ? STDOUT_FILENO : STDERR_FILENO)
            guard descriptor >= 0 else { throw failure() }
            try writeAll(text, to: descriptor)
            return
        }
        var status = stat()
        let exists = lstat(path, &status) == 0
        let mode = status.st_mode & S_IFMT
        if exists, mode == S_IFDIR { throw Failure(description: "it is a directory") }
        if exists, mode != S_IFREG {
            let descriptor = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOCTTY, 0o666)
            guard descriptor >= 0 else { throw failure() }
            try writeAll(text, to: descriptor)
            return
        }
        // Beside it, so that the rename stays on one file system.
        var template = Array((path + ".XXXXXX").utf8CString)
        let descriptor = template.withUnsafeMutableBufferPointer { mkstemp($0.baseAddress!) }
        guard descriptor >= 0 else { throw failure() }
        _ = fcntl(descriptor, F_SETFD, FD_CLOEXEC)
        let temporary = String(cString: template)
        do throws(Failure) {
            // mkstemp makes it 0600: the old file's permissions (without set-id bits: the
            // writer, root perhaps, now owns it), or a new file's (0666 less the umask).
            let permissions = exists ? status.st_mode & 0o777 : 0o666 & ~currentUmask()
            guard fchmod(descriptor, permissions) == 0 else {
                let failed = failure()
                close(descriptor)
                throw failed
            }
            try writeAll(text, to: descriptor)
            guard rename(temporary, path) == 0 else { throw failure() }
        } catch {
            unlink(temporary)
            throw error
        }
    }

    /// Writes all of `text` to an open descriptor, such as standard output or
    /// error, and leaves it open. Foundation's `FileHandle.write(_:)` traps
    /// when the write fails: a daemon whose log went to a full disk died.
    public static func write(_ text: String, toDescriptor descriptor: Int32) throws(Failure) {
        var bytes = Array(text.utf8)
        var written = 0
        while written < bytes.count {
            let count = bytes.withUnsafeMutableBytes { Glibc.write(descriptor, $0.baseAddress! + written, $0.count - written) }
            if count < 0, errno == EINTR { continue }
            guard count > 0 else { throw failure() }
            written += count
        }
    }

    /// Writes all of `text` and closes `descriptor`, also when it fails.
    private static func writeAll(_ text: String, to descriptor: Int32) throws(Failure) {
        do {
            try write(text, toDescriptor: descriptor)
        } catch {
            close(descriptor)
            throw error
        }
        // A full disk may tell only at close (NFS, some FUSE file systems).
        guard close(descriptor) == 0 else { throw failure() }
    }

    private static func failure() -> Failure {
        let number = errno
        return Failure(description: String(cString: strerror(number)), errorNumber: number)
    }

    /// The process's umask (read by setting it and back: there is no getter).
    private static func currentUmask() -> mode_t {
        let mask = umask(0o022)
        umask(mask)
        return mask
    }
}
