import CBgTaskShim
import Foundation
import ServiceSpawn
import Synchronization

/// A process a test started and owns: its output is collected line by line,
/// and it is stopped by PID when the test is done with it (or at the latest
/// when this object goes away).
///
/// Started with posix_spawn and a clean signal state (nothing blocked, every
/// signal at its default): Foundation's `Process` hands children a blocked
/// signal mask, which makes them ignore SIGTERM and hides real bugs.
public final class ChildProcess: @unchecked Sendable {
    /// How the process ended.
    public enum Exit: Equatable, Sendable, CustomStringConvertible {
        case status(Int32)
        case signal(Int32)

        public var description: String {
            switch self {
            case .status(let code): "exit status \(code)"
            case .signal(let signal): "killed by signal \(signal)"
            }
        }
    }

    /// Output collected by the reader threads, and the exit once reaped.
    private final class State: Sendable {
        let lines = Mutex<[String]>([])
        let errorText = Mutex<String>("")
        let exit = Mutex<Exit?>(nil)
    }

    private let state = State()
    private var readers: [Thread] = []
    public let pid: Int32
    public let executable: String
    public let arguments: [String]

    /// Starts `executable` with `arguments`; `environment` entries are added to the test's own.
    public init(_ executable: String, _ arguments: [String], environment: [String: String] = [:]) throws {
        self.executable = executable
        self.arguments = arguments
        var outPipe: [Int32] = [-1, -1]
        var errPipe: [Int32] = [-1, -1]
        guard bgt_pipe_cloexec(&outPipe) == 0, bgt_pipe_cloexec(&errPipe) == 0 else {
            throw TestKitError("pipe: \(String(cString: strerror(errno)))")
        }
        let started = Result { () throws(ServiceSpawn.Failure) in
            try ServiceSpawn.start(
                path: executable, arguments: arguments, environment: environment,
                output: .descriptors(standardOutput: outPipe[1], standardError: errPipe[1]))
        }
        close(outPipe[1])
        close(errPipe[1])
        switch started {
        case .success(let child):
            pid = child.pid
        case .failure(let failure):
            close(outPipe[0])
            close(errPipe[0])
            throw TestKitError(failure.description)
        }
        readers = [
            Self.startReader(outPipe[0]) { [state] chunk in
                state.lines.withLock { lines in
                    for line in chunk.split(separator: "\n", omittingEmptySubsequences: false) { lines.append(String(line)) }
                }
            },
            Self.startReader(errPipe[0]) { [state] chunk in
                state.errorText.withLock { $0 += chunk + "\n" }
            },
        ]
    }

    /// Reads whole lines from `fd` on a thread of its own until EOF, then closes it.
    private static func startReader(_ fd: Int32, _ deliver: @escaping @Sendable (String) -> Void) -> Thread {
        let thread = Thread {
            var pending: [UInt8] = []
            var buffer = [UInt8](repeating: 0, count: 65536)
            while true {
                let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
                if n < 0 && errno == EINTR { continue }
                if n <= 0 { break }
                pending.append(contentsOf: buffer[0..<n])
                if let last = pending.lastIndex(of: UInt8(ascii: "\n")) {
                    deliver(String(decoding: pending[..<last], as: UTF8.self))
                    pending.removeSubrange(...last)
                }
            }
            if !pending.isEmpty { deliver(String(decoding: pending, as: UTF8.self)) }
            close(fd)
        }
        thread.start()
        return thread
    }

    /// Reaps the child if it ended (never blocks).
    private func reap() -> Exit? {
        state.exit.withLock { exit in
            if let exit { return exit }
            var status: Int32 = 0
            guard waitpid(pid, &status, WNOHANG) == pid else { return nil }
            let signal = status & 0x7f
            exit = signal == 0 ? .status((status >> 8) & 0xff) : .signal(signal)
            return exit
        }
    }

    public var isRunning: Bool { reap() == nil }

    /// Every complete stdout line so far.
    public var lines: [String] { state.lines.withLock { $0 } }
    /// Everything written to stderr so far.
    public var standardError: String { state.errorText.withLock { $0 } }

    /// Waits until some stdout line satisfies `predicate`; returns it, or nil on timeout.
    /// 30 s by default: a python fixture starting under a full parallel run can take over 10.
    public func waitForLine(timeout: Duration = .seconds(30), where predicate: (String) -> Bool) -> String? {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            if let line = lines.first(where: predicate) { return line }
            Thread.sleep(forTimeInterval: 0.01)
        }
        return lines.first(where: predicate)
    }

    /// Waits until stderr contains `text`.
    public func waitForStandardError(containing text: String, timeout: Duration = .seconds(10)) -> Bool {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            if standardError.contains(text) { return true }
            if !isRunning {
                // What it wrote before it ended may still be in the pipe.
                _ = waitForExit(timeout: .seconds(2))
                break
            }
            Thread.sleep(forTimeInterval: 0.01)
        }
        return standardError.contains(text)
    }

    /// Sends a signal to the process (by its PID, which this object owns and has not reaped).
    public func send(_ signal: Int32) {
        if isRunning { kill(pid, signal) }
    }

    /// Waits for the process to end; nil if it still runs after `timeout`.
    @discardableResult
    public func waitForExit(timeout: Duration = .seconds(10)) -> Exit? {
        let deadline = ContinuousClock.now + timeout
        var exit = reap()
        while exit == nil {
            if ContinuousClock.now >= deadline { return nil }
            Thread.sleep(forTimeInterval: 0.005)
            exit = reap()
        }
        // Let the readers take the last output (bounded: a grandchild may hold the pipe open).
        let drained = ContinuousClock.now + .seconds(2)
        while readers.contains(where: { !$0.isFinished }) && ContinuousClock.now < drained {
            Thread.sleep(forTimeInterval: 0.002)
        }
        return exit
    }

    /// SIGTERM, then SIGKILL if it is still running after `grace`; returns how it ended.
    @discardableResult
    public func stop(grace: Duration = .seconds(5)) -> Exit {
        send(SIGTERM)
        if let exit = waitForExit(timeout: grace) { return exit }
        send(SIGKILL)
        return waitForExit(timeout: .seconds(10)) ?? .signal(SIGKILL)
    }

    deinit {
        if reap() == nil {
            kill(pid, SIGKILL)
            var status: Int32 = 0
            while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        }
    }
}
