import Glibc

/// What /proc says about a process: memory and how often its threads ran.
/// Reading /proc never wakes the process it describes.
struct ProcStatus {
    let pid: Int32

    /// Context switches of one thread.
    struct ThreadSwitches: Equatable {
        var tid: Int32
        var name: String
        var voluntary: Int
        var nonvoluntary: Int
        var total: Int { voluntary + nonvoluntary }
    }

    /// Whether the process exists.
    var exists: Bool { kill(pid, 0) == 0 || errno == EPERM }

    /// A `kB` field of /proc/PID/status (`VmRSS`, `VmHWM` …) in kibibytes.
    func kilobytes(_ field: String) -> Int? {
        guard let text = Self.read("/proc/\(pid)/status") else { return nil }
        return Self.field(field, in: text)
    }

    /// Resident memory (VmRSS) in MiB.
    var residentMiB: Double? { kilobytes("VmRSS").map { Double($0) / 1024 } }

    /// Peak resident memory (VmHWM) in MiB.
    var peakResidentMiB: Double? { kilobytes("VmHWM").map { Double($0) / 1024 } }

    /// CPU time used so far, user + system, in seconds (/proc/PID/stat; clock-tick resolution, 10 ms).
    var cpuSeconds: Double? {
        guard let text = Self.read("/proc/\(pid)/stat"), let close = text.lastIndex(of: ")") else { return nil }
        // Fields after the command name start with the state (field 3); utime and stime are fields 14 and 15.
        let fields = text[text.index(after: close)...].split(separator: " ")
        guard fields.count > 12, let user = Double(fields[11]), let system = Double(fields[12]) else { return nil }
        return (user + system) / Double(sysconf(Int32(_SC_CLK_TCK)))
    }

    /// Voluntary and non-voluntary context switches of every thread, from
    /// /proc/PID/task/*/status. A thread that is never scheduled adds nothing.
    func threadSwitches() -> [ThreadSwitches] {
        var result: [ThreadSwitches] = []
        guard let dir = opendir("/proc/\(pid)/task") else { return [] }
        defer { closedir(dir) }
        while let entry = readdir(dir) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(cString: raw.bindMemory(to: CChar.self).baseAddress!)
            }
            guard let tid = Int32(name),
                  let text = Self.read("/proc/\(pid)/task/\(tid)/status") else { continue }
            let comm = Self.read("/proc/\(pid)/task/\(tid)/comm")?.split(separator: "\n").first.map(String.init) ?? "?"
            result.append(ThreadSwitches(
                tid: tid, name: comm,
                voluntary: Self.field("voluntary_ctxt_switches", in: text) ?? 0,
                nonvoluntary: Self.field("nonvoluntary_ctxt_switches", in: text) ?? 0))
        }
        return result.sorted { $0.tid < $1.tid }
    }

    /// The first number after `name:` on its line.
    private static func field(_ name: String, in text: String) -> Int? {
        for line in text.split(separator: "\n") where line.hasPrefix(name + ":") {
            let digits = line.dropFirst(name.count + 1).drop { $0 == " " || $0 == "\t" }.prefix { $0.isNumber }
            return Int(digits)
        }
        return nil
    }

    /// A whole (small) file, or nil.
    static func read(_ path: String) -> String? {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        while true {
            let n = chunk.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { break }
            bytes.append(contentsOf: chunk[0..<n])
        }
        return String(decoding: bytes, as: UTF8.self)
    }
}
