import Foundation
import Synchronization

/// A process a test started and owns: its output is collected line by line,
/// and it is stopped by PID when the test is done with it (or at the latest
/// when this object goes away).
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

    /// Output collected by the reader threads.
    private final class Output: Sendable {
        let lines = Mutex<[String]>([])
        let errorText = Mutex<String>("")
    }

    private let process = Process()
    private let output = Output()
    private var readers: [Thread] = []
    public let executable: String
    public let arguments: [String]

    /// Starts `executable` with `arguments`; `environment` entries are added to the test's own.
    public init(_ executable: String, _ arguments: [String], environment: [String: String] = [:]) throws {
        self.executable = executable
        self.arguments = arguments
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        var env = ProcessInfo.processInfo.environment
        env.merge(environment) { $1 }
        process.environment = env
        let out = Pipe()
        let err = Pipe()
        process.standardOutput = out
        process.standardError = err
        process.standardInput = FileHandle.nullDevice
        try process.run()
        readers = [
            Self.startReader(out.fileHandleForReading) { [output] chunk in
                output.lines.withLock { lines in
                    for line in chunk.split(separator: "\n", omittingEmptySubsequences: false) { lines.append(String(line)) }
                }
            },
            Self.startReader(err.fileHandleForReading) { [output] chunk in
                output.errorText.withLock { $0 += chunk + "\n" }
            },
        ]
    }

    /// Reads whole lines from `handle` on a thread of its own until EOF.
    private static func startReader(_ handle: FileHandle, _ deliver: @escaping @Sendable (String) -> Void) -> Thread {
        let thread = Thread {
            var pending = Data()
            while true {
                let data = handle.availableData
                if data.isEmpty { break }
                pending.append(data)
                if let last = pending.lastIndex(of: UInt8(ascii: "\n")) {
                    deliver(String(decoding: pending[..<last], as: UTF8.self))
                    pending.removeSubrange(...last)
                }
            }
            if !pending.isEmpty { deliver(String(decoding: pending, as: UTF8.self)) }
        }
        thread.start()
        return thread
    }

    public var pid: Int32 { process.processIdentifier }
    public var isRunning: Bool { process.isRunning }

    /// Every complete stdout line so far.
    public var lines: [String] { output.lines.withLock { $0 } }
    /// Everything written to stderr so far.
    public var standardError: String { output.errorText.withLock { $0 } }

    /// Waits until some stdout line satisfies `predicate`; returns it, or nil on timeout.
    public func waitForLine(timeout: Duration = .seconds(10), where predicate: (String) -> Bool) -> String? {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            if let line = lines.first(where: predicate) { return line }
            if !process.isRunning, let line = lines.first(where: predicate) { return line }
            Thread.sleep(forTimeInterval: 0.01)
        }
        return lines.first(where: predicate)
    }

    /// Waits until stderr contains `text`.
    public func waitForStandardError(containing text: String, timeout: Duration = .seconds(10)) -> Bool {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            if standardError.contains(text) { return true }
            Thread.sleep(forTimeInterval: 0.01)
        }
        return standardError.contains(text)
    }

    /// Sends a signal to the process (by its PID, which this object owns).
    public func send(_ signal: Int32) {
        if process.isRunning { kill(process.processIdentifier, signal) }
    }

    /// Waits for the process to end; nil if it still runs after `timeout`.
    @discardableResult
    public func waitForExit(timeout: Duration = .seconds(10)) -> Exit? {
        let deadline = ContinuousClock.now + timeout
        while process.isRunning {
            if ContinuousClock.now >= deadline { return nil }
            Thread.sleep(forTimeInterval: 0.005)
        }
        // Let the readers take the last output (bounded: a grandchild may hold the pipe open).
        let drained = ContinuousClock.now + .seconds(2)
        while readers.contains(where: { !$0.isFinished }) && ContinuousClock.now < drained {
            Thread.sleep(forTimeInterval: 0.002)
        }
        return process.terminationReason == .uncaughtSignal
            ? .signal(process.terminationStatus) : .status(process.terminationStatus)
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
        if process.isRunning {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
        }
    }
}
