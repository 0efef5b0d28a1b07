import Glibc

/// The memory of a process, from /proc/PID/status (reading it never wakes the process).
struct ProcessMemory {
    let pid: Int32

    /// Resident memory now (VmRSS), in KiB.
    var residentKiB: Int? { field("VmRSS") }
    /// The most resident memory so far (VmHWM), in KiB.
    var peakKiB: Int? { field("VmHWM") }

    /// The number after `name:` in the status file, in KiB.
    private func field(_ name: String) -> Int? {
        let fd = open("/proc/\(pid)/status", O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        while true {
            let n = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { break }
            bytes.append(contentsOf: chunk[0..<n])
        }
        for line in String(decoding: bytes, as: UTF8.self).split(separator: "\n") where line.hasPrefix(name + ":") {
            return Int(line.dropFirst(name.count + 1).filter(\.isNumber))
        }
        return nil
    }
}
