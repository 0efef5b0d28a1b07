import Glibc

/// The text of a file that someone else may have put in place, read on the
/// loop without letting it stall: only a regular file is read (a FIFO is not
/// waited on: it is opened with O_NONBLOCK), and never more than a limit.
enum RegularFileText {
    /// What to do with a file longer than the limit.
    enum Beyond {
        /// Refuse it (nil).
        case refuse
        /// Read its first `limit` bytes.
        case cut
    }

    /// What reading a file's bytes came to.
    enum Bytes {
        case read([UInt8])
        /// Not a regular file (a directory, a FIFO, a device).
        case notRegular
        /// Longer than the limit (with `.refuse`): its size.
        case tooLarge(Int64)
        /// Opening or reading failed: the errno.
        case failed(Int32)
    }

    /// The text (invalid UTF-8 repaired) of the regular file at `path`; nil
    /// for anything else, for a file longer than `limit` with `.refuse`, and
    /// when reading fails. When opening fails, `errno` still says why.
    static func read(_ path: String, limit: Int, beyond: Beyond) -> String? {
        guard case .read(let bytes) = bytes(path, limit: limit, beyond: beyond) else { return nil }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// The bytes of the regular file at `path`, at most `limit` of them.
    static func bytes(_ path: String, limit: Int, beyond: Beyond) -> Bytes {
        let fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK)
        guard fd >= 0 else { return .failed(errno) }
        defer {
            let saved = errno
            close(fd)
            errno = saved
        }
        var status = stat()
        guard fstat(fd, &status) == 0 else { return .failed(errno) }
        guard status.st_mode & S_IFMT == S_IFREG else { return .notRegular }
        if status.st_size > limit, beyond == .refuse { return .tooLarge(Int64(status.st_size)) }
        let capacity = min(Int(status.st_size), limit)
        if capacity == 0 { return .read([]) }
        var bytes = [UInt8](repeating: 0, count: capacity)
        var count = 0
        while count < capacity {
            let n = bytes.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress! + count, capacity - count) }
            if n > 0 {
                count += n
            } else if n == 0 {
                break
            } else if errno != EINTR {
                return .failed(errno)
            }
        }
        return .read(Array(bytes[..<count]))
    }
}
