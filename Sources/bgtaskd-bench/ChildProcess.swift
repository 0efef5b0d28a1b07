import Glibc
import ServiceSpawn

/// A child process started with posix_spawn whose standard output comes back
/// through a pipe (standard error is inherited). Single-threaded: the parent
/// polls ``outputFD`` and calls ``readAvailable()``.
final class ChildProcess {
    let pid: pid_t
    /// The read end of the child's standard output (non-blocking).
    private(set) var outputFD: Int32
    /// Everything the child wrote so far.
    private(set) var output: [UInt8] = []

    /// Starts `path` with `arguments` (argv[1...]) and this process's environment.
    init(path: String, arguments: [String]) throws(SpawnError) {
        var pipeFDs: [Int32] = [-1, -1]
        guard pipe(&pipeFDs) == 0 else { throw SpawnError(what: "pipe", code: errno) }
        // Close-on-exec, so that victims spawned later do not hold each other's pipes open.
        for fd in pipeFDs { _ = fcntl(fd, F_SETFD, FD_CLOEXEC) }
        // The pipe's write end becomes the child's stdout (dup2 clears close-on-exec there); stderr stays ours.
        let started = Result { () throws(ServiceSpawn.Failure) in
            try ServiceSpawn.start(
                path: path, arguments: arguments,
                output: .descriptors(standardOutput: pipeFDs[1], standardError: STDERR_FILENO))
        }
        close(pipeFDs[1])
        let child: pid_t
        switch started {
        case .success(let spawned): child = spawned.pid
        case .failure(let failure):
            close(pipeFDs[0])
            throw SpawnError(what: "posix_spawn \(path)", code: failure.code)
        }
        pid = child
        outputFD = pipeFDs[0]
        _ = fcntl(outputFD, F_SETFL, fcntl(outputFD, F_GETFL) | O_NONBLOCK)
    }

    deinit {
        if outputFD >= 0 { close(outputFD) }
    }

    /// Reads what is there; returns false once the child closed its output.
    func readAvailable() -> Bool {
        guard outputFD >= 0 else { return false }
        var chunk = [UInt8](repeating: 0, count: 4096)
        while true {
            let n = chunk.withUnsafeMutableBytes { read(outputFD, $0.baseAddress, $0.count) }
            if n > 0 {
                output.append(contentsOf: chunk[0..<n])
                continue
            }
            if n < 0 && errno == EINTR { continue }
            if n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) { return true }
            close(outputFD)
            outputFD = -1
            return false
        }
    }

    /// The output as text.
    var outputText: String { String(decoding: output, as: UTF8.self) }

    /// Reaps the child; returns its exit status, or 128 + signal.
    @discardableResult
    func wait() -> Int32 {
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        let signal = status & 0x7f
        return signal == 0 ? (status >> 8) & 0xff : 128 + signal
    }

    /// Runs to the end, collecting all output; returns (exit status, output).
    static func run(_ path: String, _ arguments: [String]) throws(SpawnError) -> (status: Int32, output: String) {
        let child = try ChildProcess(path: path, arguments: arguments)
        var poller = pollfd(fd: child.outputFD, events: Int16(POLLIN), revents: 0)
        while child.readAvailable() {
            poller.fd = child.outputFD
            _ = poll(&poller, 1, -1)
        }
        return (child.wait(), child.outputText)
    }

    /// This executable, for re-running itself.
    static var ownExecutable: String {
        var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        let n = readlink("/proc/self/exe", &buffer, buffer.count - 1)
        return n > 0 ? cString(buffer) : CommandLine.arguments[0]
    }
}

/// A process could not be started.
struct SpawnError: Error, CustomStringConvertible {
    var what: String
    var code: Int32
    var description: String { "\(what): \(String(cString: strerror(code)))" }
}
