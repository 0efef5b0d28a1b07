import BgTaskTestKit
import Foundation
import Glibc

/// The test's own HTTP server (`Fixtures/transfer-server.py`): blobs with
/// ranges, ETags, dropped connections, 503s, throttling, uploads and a
/// byte count. Started per test, stopped by PID.
final class TransferServer {
    let process: ChildProcess
    let port: Int
    private let directory: String

    init() throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("bgtaskd-http-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let script = BinaryLocator.packageRoot() + "/Tests/IntegrationTests/Fixtures/transfer-server.py"
        process = try ChildProcess("/usr/bin/python3", [script, "--port-file", directory + "/port"])
        let deadline = ContinuousClock.now + .seconds(20)
        var port: Int?
        while port == nil, ContinuousClock.now < deadline {
            port = (try? String(contentsOfFile: directory + "/port", encoding: .utf8)).flatMap { Int($0.trimmingCharacters(in: .whitespacesAndNewlines)) }
            if port == nil { Thread.sleep(forTimeInterval: 0.02) }
        }
        guard let port else {
            _ = process.stop()
            throw TestKitError("the transfer server did not start: \(process.standardError)")
        }
        self.port = port
    }

    deinit { stop() }

    func stop() {
        _ = process.stop()
        try? FileManager.default.removeItem(atPath: directory)
    }

    func url(_ path: String) -> String { "http://127.0.0.1:\(port)\(path)" }

    /// GET `path` on the server as JSON.
    func json(_ path: String) throws -> [String: Any] {
        let result = try CommandResult.run("/usr/bin/curl", ["-sS", url(path)])
        guard let object = try JSONSerialization.jsonObject(with: Data(result.standardOutput.utf8)) as? [String: Any] else {
            throw TestKitError("not JSON from \(path): \(result)")
        }
        return object
    }

    /// Blob body bytes the server wrote so far, over all requests.
    func bytesSent() throws -> Int { (try json("/stats")["bytes_sent"] as? Int) ?? -1 }

    /// The Range headers requests for `pathAndQuery` carried (nil for none).
    func ranges(of pathAndQuery: String) throws -> [String?] {
        let perPath = try json("/stats")["per_path"] as? [String: Any]
        let entry = perPath?[pathAndQuery] as? [String: Any]
        return (entry?["ranges"] as? [Any])?.map { $0 as? String } ?? []
    }

    /// The byte at `offset` of every blob.
    static func byte(at offset: Int) -> UInt8 {
        let j = offset % 65536
        return UInt8((j * 131 + 7) & 0xFF)
    }

    /// Whether `path` holds exactly a blob of `size` bytes: checked at about
    /// 50,000 places (every 4093rd byte of a small file) and the last, read
    /// with pread, so a huge file is not read whole.
    static func isBlob(_ path: String, size: Int) -> Bool {
        let fd = open(path, O_RDONLY)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0, Int(info.st_size) == size else { return false }
        let step = max(4093, size / 50_000 | 1)
        var byte: UInt8 = 0
        for offset in Array(stride(from: 0, to: size, by: step)) + (size > 0 ? [size - 1] : []) {
            guard pread(fd, &byte, 1, off_t(offset)) == 1, byte == Self.byte(at: offset) else { return false }
        }
        return true
    }
}
