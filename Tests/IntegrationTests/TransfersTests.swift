import BgTaskTestKit
import Foundation
import SDBus
import Testing

/// The transfer mode against a local HTTP server of the test's own
/// (`Fixtures/transfer-server.py`): downloads that land atomically and wake
/// their app, uploads, retries after a 503 and a dropped connection, resume
/// with Range (and the restart from zero a server without it forces),
/// answers whose range is not the one asked for or not whole, resume after
/// the daemon is killed, where files may go, cancelling, and
/// discretionary transfers waiting for AC power and an unmetered network.
@Suite struct TransfersTests {
    static let app = "org.example.Dl"
    static let interface = "Transfers"
    /// A second app with transfers of its own.
    static let otherApp = "org.example.Dl2"
    static let thirdApp = "org.example.Dl3"

    func daemon(
        settings: [String] = [], environment: [String: String] = [:], exec: String = "/bin/false", stateDirectory: String? = nil
    ) throws -> DaemonUnderTest {
        let daemon = try DaemonUnderTest(settings: settings, stateDirectory: stateDirectory, desktopEntries: [
            DesktopEntrySpec(id: Self.app, name: "Dl", modes: ["transfer"], exec: exec),
            DesktopEntrySpec(id: "org.example.Plain", modes: ["fetch"], exec: "/bin/false"),
            DesktopEntrySpec(id: Self.otherApp, name: "Dl2", modes: ["transfer"], exec: "/bin/false"),
            DesktopEntrySpec(id: Self.thirdApp, name: "Dl3", modes: ["transfer"], exec: "/bin/false"),
        ], environment: environment)
        for app in [Self.app, Self.otherApp, Self.thirdApp] {
            try FileManager.default.createDirectory(atPath: cache(daemon, of: app), withIntermediateDirectories: true)
        }
        return daemon
    }

    /// The app's cache directory: a place its downloads may land.
    func cache(_ daemon: DaemonUnderTest, of app: String = TransfersTests.app) -> String { daemon.home + "/.cache/" + app }

    /// Waits, up to 20 s, until each of `ids` of `client` has moved bytes (its attempt runs).
    func waitUntilMoving(_ client: RawClient, _ ids: [String]) throws {
        let deadline = ContinuousClock.now + .seconds(20)
        func moving(_ id: String) throws -> Bool {
            try list(client).first(where: { $0["transfer_id"] == .string(id) })?["bytes_done"] ?? .uint64(0) != .uint64(0)
        }
        while ContinuousClock.now < deadline, try ids.contains(where: { try !moving($0) }) { Thread.sleep(forTimeInterval: 0.05) }
    }

    /// A checked-in connection of the app, listening for the mode's signals.
    func app(_ daemon: DaemonUnderTest, id: String = TransfersTests.app) throws -> RawClient {
        let client = try RawClient(daemon)
        try client.listen(for: "TransferFinished")
        try client.call("Manager", "CheckIn") { try $0.append(id) }
        return client
    }

    func options(_ entries: [String: BusValue]) -> BusValue {
        .dictionary(key: "s", value: "v", entries.sorted { $0.key < $1.key }.map { .init(key: .string($0.key), value: .variant($0.value)) })
    }

    @discardableResult
    func start(
        _ client: RawClient, _ member: String = "StartDownload", session: String = "s", url: String, path: String,
        options: [String: BusValue] = [:]
    ) throws -> String {
        try client.call(Self.interface, member) {
            try $0.append(session)
            try $0.append(url)
            try $0.append(path)
            try $0.append(value: self.options(options))
        }.readString()
    }

    func startError(_ client: RawClient, _ method: String = "StartDownload", url: String, path: String, options: [String: BusValue] = [:]) -> String? {
        client.errorName(Self.interface, method) {
            try $0.append("s")
            try $0.append(url)
            try $0.append(path)
            try $0.append(value: self.options(options))
        }
    }

    /// ListTransfers' dictionaries, unwrapped.
    func list(_ client: RawClient, session: String = "") throws -> [[String: BusValue]] {
        let reply = try client.call(Self.interface, "ListTransfers") { try $0.append(session) }
        guard case .array(_, let entries) = try reply.readValue() else { return [] }
        return entries.map { entry in
            guard case .dictionary(_, _, let fields) = entry else { return [:] }
            var values: [String: BusValue] = [:]
            for field in fields { if case .string(let key) = field.key { values[key] = field.value.unwrapped } }
            return values
        }
    }

    /// One TransferFinished: token, transfer id, result, info.
    struct Finished {
        var token: String
        var id: String
        var result: String
        var info: [String: BusValue]
    }

    func finished(_ client: RawClient) throws -> [Finished] {
        try client.received.filter { $0.member == "TransferFinished" }.map { message in
            try message.rewind()
            let token = try message.readString()
            let id = try message.readString()
            let result = try message.readString()
            var info: [String: BusValue] = [:]
            if case .dictionary(_, _, let fields) = try message.readValue() {
                for field in fields { if case .string(let key) = field.key { info[key] = field.value.unwrapped } }
            }
            return Finished(token: token, id: id, result: result, info: info)
        }
    }

    /// Waits until `waitingFor` reads `reason`: right after the start the
    /// daemon may not have read NetworkManager or UPower yet.
    func waitUntil(_ waitingFor: () throws -> BusValue?, is reason: String, _ daemon: DaemonUnderTest) throws {
        let deadline = ContinuousClock.now + .seconds(20)
        while try waitingFor() != .string(reason), ContinuousClock.now < deadline { Thread.sleep(forTimeInterval: 0.05) }
        #expect(try waitingFor() == .string(reason), "\(daemon.log.suffix(2000))")
    }

    /// Waits for the TransferFinished of `id`.
    func waitForFinished(_ client: RawClient, _ id: String, timeout: Duration = .seconds(60)) throws -> Finished? {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            if let found = try finished(client).first(where: { $0.id == id }) { return found }
            _ = client.waitForSignals(client.received.count + 1, timeout: .milliseconds(200))
        }
        return nil
    }

    func complete(_ client: RawClient, _ token: String) throws {
        try client.call(Self.interface, "CompleteEvents") { try $0.append(token) }
    }

    func partialFiles(in directory: String) -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []).filter { $0.hasSuffix(".bgtaskd-part") }
    }

    // MARK: Tests

    /// Two instances run; the results go to one, which goes without
    /// completing them. The other, still running, gets them at once; before,
    /// they waited for a CheckIn a running instance never makes again.
    @Test func resultsWhoseInstanceWentGoToTheOneStillRunning() throws {
        let server = try TransferServer()
        let daemon = try daemon()
        let stays = try app(daemon)
        var goes: RawClient? = try app(daemon)
        let id = try start(stays, url: server.url("/blob/4000"), path: cache(daemon) + "/small.bin")
        // The wake goes to the newest connection.
        #expect(try goes.map { try waitForFinished($0, id) } != nil, "\(daemon.log)")
        if try !finished(stays).isEmpty {
            Issue.record("the results went to the older instance: this test needs them at the newer one")
            return
        }
        goes = nil
        let done = try #require(try waitForFinished(stays, id, timeout: .seconds(10)), "the running instance did not get them: \(daemon.log)")
        #expect(done.result == "success")
        try complete(stays, done.token)
        #expect(try list(stays).isEmpty)
    }

    @Test func aDownloadLandsAtItsDestinationAndWakesItsApp() throws {
        let server = try TransferServer()
        let daemon = try daemon()
        let client = try app(daemon)
        let destination = cache(daemon) + "/file.bin"
        let id = try start(client, url: server.url("/blob/5M"), path: destination)
        #expect(id.hasPrefix("t"))
        let done = try #require(try waitForFinished(client, id), "\(daemon.log)")
        #expect(done.result == "success")
        #expect(done.info["bytes_done"] == .uint64(5 << 20) && done.info["status"] == .uint64(200))
        // The types the XML documents (it said u for these three, which were always sent as t).
        #expect(done.info["attempts"] == .uint64(0) && done.info["token_transfers"] == .uint64(1), "\(done.info)")
        #expect(done.info["path"] == .string(destination) && done.info["state"] == .string("finished"))
        #expect(TransferServer.isBlob(destination, size: 5 << 20))
        #expect(partialFiles(in: cache(daemon)).isEmpty)
        // Created as any download tool creates a file: 0666 less the umask the daemon inherited from us.
        let mask = umask(0o022)
        umask(mask)
        let mode = (try FileManager.default.attributesOfItem(atPath: destination)[.posixPermissions] as? Int) ?? -1
        #expect(mode == 0o666 & ~Int(mask), "mode \(String(mode, radix: 8))")
        // Listed until the app completes the wake; then forgotten.
        #expect(try list(client).map { $0["transfer_id"] } == [.string(id)])
        try complete(client, done.token)
        #expect(try list(client).isEmpty)
        #expect(client.errorName(Self.interface, "CompleteEvents") { try $0.append(done.token) } == "org.bgtaskd.BackgroundTasks1.Error.NoSuchToken")
        // GetApplications no longer counts it.
        #expect(try RawClient(daemon).applications().first { $0["app_id"] == .string(Self.app) }?["transfers_finished"] == nil)
    }

    @Test func anUploadSendsTheFileWithItsMethod() throws {
        let server = try TransferServer()
        let daemon = try daemon()
        let client = try app(daemon)
        let source = cache(daemon) + "/photo.jpg"
        let bytes = (0..<(3 << 20) + 17).map { UInt8(truncatingIfNeeded: $0 &* 31) }
        try Data(bytes).write(to: URL(fileURLWithPath: source))
        let id = try start(client, "StartUpload", url: server.url("/upload/photo"), path: source, options: ["method": .string("POST")])
        let done = try #require(try waitForFinished(client, id), "\(daemon.log)")
        #expect(done.result == "success" && done.info["status"] == .uint64(201), "\(done.info)")
        let upload = try server.json("/uploads/photo")
        #expect(upload["bytes"] as? Int == bytes.count)
        let expected = try CommandResult.run("/usr/bin/sha256sum", [source]).standardOutput.prefix(64)
        #expect(upload["sha256"] as? String == String(expected))
    }

    /// A server that answered 2xx before reading the body left the HTTP
    /// client sending it from a task of its own, from a descriptor the upload
    /// had closed on its answer: the next file the daemon opened took that
    /// number, and its bytes went to that server (another upload's source,
    /// of any app). Now the body stops with the answer, and owns its descriptor.
    @Test func aServerThatAnswersEarlyGetsNothingElse() throws {
        let server = try TransferServer()
        let daemon = try daemon()
        let client = try app(daemon)
        let source = cache(daemon) + "/a.bin"
        try Data(repeating: 0x41, count: 16 << 20).write(to: URL(fileURLWithPath: source))
        let early = try start(client, "StartUpload", url: server.url("/upload/early?early=3"), path: source, options: ["method": .string("POST")])
        let done = try #require(try waitForFinished(client, early), "\(daemon.log)")
        #expect(done.result == "success", "\(done.info)")
        // Opened while that server waits, and read slowly, so that they stay open.
        var others: [String] = []
        for name in ["b", "c", "d"] {
            let other = cache(daemon) + "/\(name).bin"
            try Data(repeating: 0x42, count: 16 << 20).write(to: URL(fileURLWithPath: other))
            others.append(try start(client, "StartUpload", url: server.url("/upload/\(name)?rate=2000000"), path: other, options: ["method": .string("POST")]))
        }
        Thread.sleep(forTimeInterval: 6)
        let late = try server.json("/uploads/early")
        #expect((late["values"] as? [Int] ?? []).allSatisfy { $0 == 0x41 }, "only the upload's own bytes: \(late)")
        for other in others { _ = try waitForFinished(client, other) }
    }

    /// A server that stops reading an upload's body held the transfer
    /// running, and its slot, until the resource timeout (a week by default):
    /// the client's read timeout runs only once the whole request is sent.
    /// A minute in which the server takes nothing is now a network failure,
    /// retried.
    @Test func anUploadTheServerStopsReadingIsRetried() throws {
        let server = try TransferServer()
        let daemon = try daemon()
        let client = try app(daemon)
        let source = cache(daemon) + "/big.bin"
        try Data(repeating: 0x43, count: 64 << 20).write(to: URL(fileURLWithPath: source))
        let id = try start(client, "StartUpload", url: server.url("/upload/stall?noread=600"), path: source)
        #expect(daemon.waitForLog(containing: "transfer \(id) failed (the server took none of the upload for 60 s)", timeout: .seconds(120)),
                "\(daemon.log.suffix(2000))")
        try client.call(Self.interface, "Cancel") { try $0.append(id) }
    }

    /// A server that sends a part of the file per request: each attempt
    /// moves bytes, so the next one comes after a second, not after a wait
    /// that doubles with every part (1, 2, 4 … 64 s for eight parts).
    @Test func attemptsThatMoveBytesDoNotBackOff() throws {
        let server = try TransferServer()
        let daemon = try daemon()
        let client = try app(daemon)
        let id = try start(client, url: server.url("/blob/8000?cut=1000"), path: cache(daemon) + "/parts.bin")
        let started = ContinuousClock.now
        let done = try #require(try waitForFinished(client, id), "\(daemon.log)")
        #expect(done.result == "success" && done.info["attempts"] == .uint64(7), "\(done.info)")
        #expect(ContinuousClock.now - started < .seconds(30), "eight parts, a second apart")
        #expect(TransferServer.isBlob(cache(daemon) + "/parts.bin", size: 8000))
        // An attempt that moves nothing still waits longer each time.
        let down = try start(client, url: server.url("/blob/8000?status=503"), path: cache(daemon) + "/down.bin")
        #expect(daemon.waitForLog(containing: "transfer \(down) failed (the server answered 503); attempt 3 in 2.0 s"), "\(daemon.log.suffix(2000))")
    }

    /// Bytes an attempt moved that the next cannot keep are no progress: an
    /// upload a server fails with 500 after reading it, and a download cut
    /// short on a server that cannot resume, were sent again every second
    /// for the whole resource timeout.
    @Test func attemptsWhoseBytesAreNotKeptBackOff() throws {
        let server = try TransferServer()
        let daemon = try daemon()
        let client = try app(daemon)
        let source = cache(daemon) + "/up.bin"
        try Data(repeating: 0x55, count: 300_000).write(to: URL(fileURLWithPath: source))
        let upload = try start(client, "StartUpload", url: server.url("/upload/x?status=500"), path: source)
        let restarting = try start(client, url: server.url("/blob/8000?cut=1000&norange=1"), path: cache(daemon) + "/again.bin")
        for id in [upload, restarting] {
            #expect(waitForLine(daemon, "transfer \(id) failed", "; attempt 3 in 2.0 s"), "\(daemon.log.suffix(3000))")
        }
    }

    /// A download that got bytes and then lost its server was retried every
    /// second: the failed attempts, which never reached the server, counted
    /// the first one's bytes as theirs.
    @Test func aDownloadWhoseServerGoesAwayBacksOff() throws {
        let server = try TransferServer()
        let daemon = try daemon()
        let client = try app(daemon)
        let id = try start(client, url: server.url("/blob/400000?rate=40000"), path: cache(daemon) + "/gone.bin")
        let deadline = ContinuousClock.now + .seconds(30)
        while try server.bytesSent() < 20_000, ContinuousClock.now < deadline { Thread.sleep(forTimeInterval: 0.1) }
        server.stop()
        #expect(waitForLine(daemon, "transfer \(id) failed", "; attempt 3 in 2.0 s"), "\(daemon.log.suffix(3000))")
        #expect(waitForLine(daemon, "transfer \(id) failed", "; attempt 4 in 4.0 s"), "\(daemon.log.suffix(3000))")
    }

    /// Whether a line of the daemon's log holds each of `parts`, within 30 s.
    private func waitForLine(_ daemon: DaemonUnderTest, _ parts: String...) -> Bool {
        let deadline = ContinuousClock.now + .seconds(30)
        repeat {
            if daemon.log.split(separator: "\n").contains(where: { line in parts.allSatisfy { line.contains($0) } }) { return true }
            Thread.sleep(forTimeInterval: 0.1)
        } while ContinuousClock.now < deadline
        return false
    }

    /// A 206 that names no validator continues the bytes of the one named
    /// before: the next attempt after it resumes rather than start over.
    @Test func aResumeWhoseAnswerNamesNoValidatorKeepsTheOldOne() throws {
        let server = try TransferServer()
        let daemon = try daemon()
        let client = try app(daemon)
        let path = "/blob/8000?cut=1000&bare206=1"
        let id = try start(client, url: server.url(path), path: cache(daemon) + "/bare.bin")
        let done = try #require(try waitForFinished(client, id), "\(daemon.log)")
        #expect(done.result == "success", "\(done.info)")
        #expect(TransferServer.isBlob(cache(daemon) + "/bare.bin", size: 8000))
        #expect(try server.ranges(of: path) == [nil] + (1...7).map { "bytes=\($0 * 1000)-" })
    }

    @Test func badRequestsAreRefusedAndSayWhy() throws {
        let server = try TransferServer()
        let daemon = try daemon()
        let client = try app(daemon)
        let url = server.url("/blob/1K")
        let invalid = "org.freedesktop.DBus.Error.InvalidArgs"
        // Outside the app's own directories, not absolute, climbing, through a link.
        #expect(startError(client, url: url, path: "/tmp/elsewhere.bin") == invalid)
        #expect(startError(client, url: url, path: "relative.bin") == invalid)
        #expect(startError(client, url: url, path: cache(daemon) + "/../other/x.bin") == invalid)
        #expect(startError(client, url: url, path: daemon.home + "/.cache/org.example.Plain/x.bin") == invalid)
        try FileManager.default.createSymbolicLink(atPath: cache(daemon) + "/out", withDestinationPath: "/tmp")
        #expect(startError(client, url: url, path: cache(daemon) + "/out/x.bin") == invalid)
        try FileManager.default.createSymbolicLink(atPath: cache(daemon) + "/link.bin", withDestinationPath: "/tmp/bgtaskd-target.bin")
        #expect(startError(client, url: url, path: cache(daemon) + "/link.bin") == invalid)
        #expect(startError(client, url: url, path: cache(daemon) + "/missing-dir/x.bin") == invalid)
        // Bad URLs and options.
        #expect(startError(client, url: "file:///etc/passwd", path: cache(daemon) + "/x.bin") == invalid)
        #expect(startError(client, url: "not a url", path: cache(daemon) + "/x.bin") == invalid)
        // Ports that do not fit 16 bits: the HTTP client trapped on them, and the stored transfer crashed every restart.
        // A user name or password holding a character URLComponents escapes moved
        // the port's range: the first crashed the daemon, the second let 99999 through.
        for bad in ["http://127.0.0.1:99999/", "http://[::1]:65536/x", "http://127.0.0.1:0/x", "http://127.0.0.1:99999999999999999999999/",
                    "http://u:p\\\\s@127.0.0.1:99999/12345678", "http://u:p@ss:w@127.0.0.1:70000"] {
            #expect(startError(client, "StartDownload", url: bad, path: cache(daemon) + "/x.bin") == invalid, "\(bad)")
            #expect(startError(client, "StartUpload", url: bad, path: cache(daemon) + "/x.bin") == invalid, "\(bad)")
        }
        #expect(startError(client, url: url, path: cache(daemon) + "/x.bin", options: ["discretionary": .string("yes")]) == invalid)
        #expect(startError(client, url: url, path: cache(daemon) + "/x.bin", options: ["speed": .bool(true)]) == invalid)
        #expect(startError(client, url: url, path: cache(daemon) + "/x.bin", options: ["resource_timeout_s": .double(-1)]) == invalid)
        #expect(startError(client, url: url, path: cache(daemon) + "/x.bin", options: ["resource_timeout_s": .double(.nan)]) == invalid)
        #expect(startError(client, url: url, path: cache(daemon) + "/x.bin",
                           options: ["headers": .dictionary(key: "s", value: "s", [.init(key: .string("X-A"), value: .string("a\r\nB: c"))])]) == invalid)
        #expect(startError(client, url: url, path: cache(daemon) + "/x.bin",
                           options: ["headers": .dictionary(key: "s", value: "s", [.init(key: .string("Range"), value: .string("bytes=0-"))])]) == invalid)
        // Control characters the HTTP client refuses at every attempt: taken, they were retried as network failures for days.
        for control in ["a\u{0B}b", "\u{01}", "x\u{7F}"] {
            #expect(startError(client, url: url, path: cache(daemon) + "/x.bin",
                               options: ["headers": .dictionary(key: "s", value: "s", [.init(key: .string("X-T"), value: .string(control))])]) == invalid)
        }
        // Who may ask: a checked-in app that declares the mode.
        #expect(startError(try RawClient(daemon), url: url, path: cache(daemon) + "/x.bin") == "org.bgtaskd.BackgroundTasks1.Error.UnknownApplication")
        #expect(startError(try app(daemon, id: "org.example.Plain"), url: url, path: cache(daemon) + "/x.bin")
                == "org.bgtaskd.BackgroundTasks1.Error.ModeNotDeclared")
        #expect(try list(client).isEmpty)
        // A huge timeout saturates instead of overflowing, and survives a restart.
        let id = try start(client, url: url, path: cache(daemon) + "/x.bin", options: ["resource_timeout_s": .double(1e300)])
        let done = try #require(try waitForFinished(client, id), "\(daemon.log)")
        #expect(done.result == "success")
        // A good port after a password with an escaped character is taken.
        let escaped = try start(client, url: url.replacingOccurrences(of: "http://", with: "http://u:p@ss:w@"), path: cache(daemon) + "/y.bin")
        #expect(try waitForFinished(client, escaped)?.result == "success", "\(daemon.log.suffix(2000))")
    }

    @Test func a503AndADroppedConnectionAreRetriedAndTheDownloadResumes() throws {
        let server = try TransferServer()
        let daemon = try daemon()
        let client = try app(daemon)
        let flaky = try start(client, url: server.url("/blob/2M?fail=1"), path: cache(daemon) + "/flaky.bin")
        let dropped = try start(client, url: server.url("/blob/4M?drop=1000000"), path: cache(daemon) + "/dropped.bin")
        let first = try #require(try waitForFinished(client, flaky), "\(daemon.log)")
        #expect(first.result == "success" && first.info["attempts"] == .uint64(1), "\(first.info)")
        #expect(TransferServer.isBlob(cache(daemon) + "/flaky.bin", size: 2 << 20))
        let second = try #require(try waitForFinished(client, dropped), "\(daemon.log)")
        #expect(second.result == "success" && second.info["resumed"] == .bool(true) && second.info["restarted"] == .bool(false), "\(second.info)")
        #expect(second.info["status"] == .uint64(206), "the last answer was the range: \(second.info)")
        #expect(TransferServer.isBlob(cache(daemon) + "/dropped.bin", size: 4 << 20))
        // The second request asked only for what was missing.
        let ranges = try server.ranges(of: "/blob/4M?drop=1000000")
        #expect(ranges.count == 2 && ranges[0] == nil && ranges[1]?.hasPrefix("bytes=") == true && ranges[1] != "bytes=0-", "\(ranges)")
    }

    /// `Retry-After: 0` on every answer was taken at its word: the daemon
    /// asked again at once, thousands of times a second, writing its
    /// database each time. The backoff's own wait still holds.
    @Test func aRetryAfterOfZeroDoesNotMakeABusyLoop() throws {
        let server = try TransferServer()
        let daemon = try daemon()
        let client = try app(daemon)
        let path = "/blob/1000?fail=1000&retry_after=0"
        let id = try start(client, url: server.url(path), path: cache(daemon) + "/eager.bin")
        Thread.sleep(forTimeInterval: 2.5)
        // At once, after 1 s, then after 2 s more: two or three by now.
        let asked = try server.ranges(of: path).count
        #expect((1...3).contains(asked), "\(asked) requests in 2.5 s")
        try client.call(Self.interface, "Cancel") { try $0.append(id) }
    }

    /// A refused connection held its transfer slot for the HTTP client's
    /// whole connect timeout (20 s, retrying): four of them made every other
    /// transfer wait that long.
    @Test func refusedConnectionsDoNotHoldTheSlots() throws {
        let server = try TransferServer()
        let daemon = try daemon()
        let client = try app(daemon)
        let refused = try (0..<4).map { try start(client, url: "http://127.0.0.1:1/x\($0)", path: cache(daemon) + "/refused\($0).bin") }
        let id = try start(client, url: server.url("/blob/1K"), path: cache(daemon) + "/quick.bin")
        #expect(try waitForFinished(client, id, timeout: .seconds(10))?.result == "success", "\(daemon.log.suffix(3000))")
        for id in refused { try client.call(Self.interface, "Cancel") { try $0.append(id) } }
    }

    @Test func aServerWithoutRangesMakesTheDownloadStartAgainAndSaySo() throws {
        let server = try TransferServer()
        let daemon = try daemon()
        let client = try app(daemon)
        let id = try start(client, url: server.url("/blob/3M?drop=500000&norange=1"), path: cache(daemon) + "/again.bin")
        let done = try #require(try waitForFinished(client, id), "\(daemon.log)")
        #expect(done.result == "success" && done.info["restarted"] == .bool(true), "\(done.info)")
        #expect(TransferServer.isBlob(cache(daemon) + "/again.bin", size: 3 << 20))
        #expect(daemon.log.contains("starts again from zero"))
    }

    /// A 206 to a request that asked for no range was taken for the whole
    /// file: ten bytes that belong at offset 500 landed as the download.
    @Test func aRangeNobodyAskedForIsNotTheWholeFile() throws {
        let server = try TransferServer()
        let daemon = try daemon()
        let client = try app(daemon)
        let elsewhere = "/blob/1000?partial=500-509"
        let fromZero = "/blob/1000?partial=0-9"
        let misplaced = try start(client, url: server.url(elsewhere), path: cache(daemon) + "/elsewhere.bin")
        let head = try start(client, url: server.url(fromZero), path: cache(daemon) + "/head.bin")
        // Bytes from elsewhere are dropped and the whole file asked for again.
        let first = try #require(try waitForFinished(client, misplaced), "\(daemon.log)")
        #expect(first.result == "success" && first.info["attempts"] == .uint64(1) && first.info["bytes_done"] == .uint64(1000), "\(first.info)")
        #expect(TransferServer.isBlob(cache(daemon) + "/elsewhere.bin", size: 1000))
        #expect(try server.ranges(of: elsewhere) == [nil, nil])
        #expect(daemon.log.contains("bytes 500-509"), "the log says which bytes came")
        // Bytes from the start are kept, and the rest asked for.
        let second = try #require(try waitForFinished(client, head), "\(daemon.log)")
        #expect(second.result == "success" && second.info["resumed"] == .bool(true) && second.info["bytes_done"] == .uint64(1000), "\(second.info)")
        #expect(TransferServer.isBlob(cache(daemon) + "/head.bin", size: 1000))
        #expect(try server.ranges(of: fromZero) == [nil, "bytes=10-"])
    }

    /// A 206 whose range claimed to end at the largest byte number (with `*`
    /// for the total) made the daemon add one to that end and trap: any
    /// server an app downloaded from could stop the daemon, and again after
    /// every restart, as the stored transfer was tried again. Now that range
    /// is unusable, and the whole file is asked for again.
    @Test func aRangeEndingAtTheLargestNumberIsRefused() throws {
        let server = try TransferServer()
        let daemon = try daemon()
        let client = try app(daemon)
        let endless = "/blob/1000?partial=0-9&end=18446744073709551615&total=*"
        let id = try start(client, url: server.url(endless), path: cache(daemon) + "/endless.bin")
        let done = try #require(try waitForFinished(client, id), "\(daemon.log)")
        #expect(done.result == "success" && done.info["bytes_done"] == .uint64(1000), "\(done.info)")
        #expect(TransferServer.isBlob(cache(daemon) + "/endless.bin", size: 1000))
        #expect(try server.ranges(of: endless) == [nil, nil])
        #expect(daemon.log.contains("without a usable Content-Range"), "\(daemon.log)")
        #expect(daemon.stop() == .status(0))
    }

    /// A resumed 206 was taken as the end of the file however much of its
    /// range came, and whatever total it claimed: a cut, an overlong or a
    /// contradicting answer landed a file of the wrong size as success.
    @Test func aResumedRangeMustComeWholeAndFitTheFileItContinues() throws {
        let server = try TransferServer()
        let daemon = try daemon()
        let client = try app(daemon)
        // Each first answers 1000 bytes of 100000 and drops; the range that follows misbehaves once.
        let short = "/blob/100000?drop=1000&span=10&total=*&body=3"
        let long = "/blob/100000?drop=1000&span=10&total=*&body=20"
        let changed = "/blob/100000?drop=1000&span=5&total=1005"
        let ids = try [short, long, changed].enumerated().map { index, path in
            try start(client, url: server.url(path), path: cache(daemon) + "/\(index).bin")
        }
        for (index, id) in ids.enumerated() {
            let done = try #require(try waitForFinished(client, id), "\(daemon.log)")
            #expect(done.result == "success" && done.info["bytes_done"] == .uint64(100_000) && done.info["attempts"] == .uint64(2),
                    "\(index): \(done.info)")
            #expect(TransferServer.isBlob(cache(daemon) + "/\(index).bin", size: 100_000), "\(index)")
            // Only the third dropped bytes it had, and it says so.
            #expect(done.info["restarted"] == .bool(index == 2), "\(index): \(done.info)")
        }
        // Three bytes of ten: the next attempt continues after them.
        #expect(try server.ranges(of: short) == [nil, "bytes=1000-", "bytes=1003-"])
        // Twenty bytes of ten: the ten are kept, the rest is not written.
        #expect(try server.ranges(of: long) == [nil, "bytes=1000-", "bytes=1010-"])
        // A total of 1005 where the same ETag said 100000: another file, started again from zero.
        #expect(try server.ranges(of: changed) == [nil, "bytes=1000-", nil])
        #expect(daemon.log.contains("starting again from zero"), "\(daemon.log)")
    }

    /// A server that ignores If-Range and answers the resumed range from a
    /// file that changed (another ETag): those bytes would have been spliced
    /// after the old ones and the whole reported a success. The download
    /// starts again from zero instead.
    @Test func aRangeFromAChangedFileStartsAgainFromZero() throws {
        let server = try TransferServer()
        let daemon = try daemon()
        let client = try app(daemon)
        let path = "/blob/100000?drop=1000&newetag=v2"
        let id = try start(client, url: server.url(path), path: cache(daemon) + "/changed.bin")
        let done = try #require(try waitForFinished(client, id), "\(daemon.log)")
        #expect(done.result == "success" && done.info["restarted"] == .bool(true), "\(done.info)")
        #expect(try server.ranges(of: path) == [nil, "bytes=1000-", nil])
        #expect(daemon.log.contains("the server's file changed"), "\(daemon.log.suffix(2000))")
        #expect(TransferServer.isBlob(cache(daemon) + "/changed.bin", size: 100_000))
    }

    /// A redirect loop fails the transfer at once: it was retried, going
    /// round again, until its resource timeout (7 days by default).
    @Test func aRedirectLoopFailsTheTransfer() throws {
        let server = try TransferServer()
        let daemon = try daemon()
        let client = try app(daemon)
        let id = try start(client, url: server.url("/redirect"), path: cache(daemon) + "/loop.bin")
        let done = try #require(try waitForFinished(client, id), "\(daemon.log)")
        #expect(done.result == "failed", "\(done.info)")
        #expect((done.info["error"].map { "\($0)" } ?? "").contains("cycle"), "\(done.info)")
        #expect(partialFiles(in: cache(daemon)).isEmpty)
    }

    /// The app's own headers went on to another host on a redirect (the HTTP
    /// client drops only credentials and cookies): an API key reached
    /// whatever the server redirected to. They, and a URL's credentials, go
    /// only to the first URL's origin now.
    @Test func theAppsHeadersAndCredentialsStayWithTheFirstURLsOrigin() throws {
        let server = try TransferServer()
        let daemon = try daemon()
        let client = try app(daemon)
        let key: [String: BusValue] = ["headers": .dictionary(key: "s", value: "s", [.init(key: .string("X-Api-Key"), value: .string("K123"))])]
        let elsewhere = server.url("/blob/1K").replacingOccurrences(of: "127.0.0.1", with: "localhost")
        let away = try start(client, url: server.url("/redirect?to=\(elsewhere)"), path: cache(daemon) + "/away.bin", options: key)
        let home = try start(client, url: server.url("/redirect?code=301&to=/blob/2K"), path: cache(daemon) + "/home.bin", options: key)
        let secret = server.url("/redirect?code=308&to=\(server.url("/blob/3K").replacingOccurrences(of: "127.0.0.1", with: "localhost"))")
            .replacingOccurrences(of: "http://", with: "http://user:secretpw@")
        let credentials = try start(client, url: secret, path: cache(daemon) + "/credentials.bin")
        for id in [away, home, credentials] {
            let done = try #require(try waitForFinished(client, id), "\(daemon.log)")
            #expect(done.result == "success", "\(done.info)")
        }
        #expect(TransferServer.isBlob(cache(daemon) + "/away.bin", size: 1 << 10))
        let perPath = try #require(try server.json("/stats")["per_path"] as? [String: Any])
        func seen(_ path: String, _ field: String) -> [String?] {
            ((perPath[path] as? [String: Any])?[field] as? [Any] ?? []).map { $0 as? String }
        }
        #expect(seen("/redirect?to=\(elsewhere)", "api_keys") == ["K123"])
        #expect(seen("/blob/1K", "api_keys") == [nil], "another host: \(perPath)")
        #expect(seen("/blob/2K", "api_keys") == ["K123"], "the same origin: \(perPath)")
        #expect(seen("/blob/3K", "authorizations") == [nil], "another host: \(perPath)")
    }

    /// An upload answered 307 was a failed transfer (the HTTP client cannot
    /// send a streamed body again); it is sent again whole to the new URL. A
    /// 303 asks for the answer with a GET.
    @Test func anUploadFollowsARedirect() throws {
        let server = try TransferServer()
        let daemon = try daemon()
        let client = try app(daemon)
        let source = cache(daemon) + "/report.bin"
        let bytes = (0..<100_003).map { UInt8(truncatingIfNeeded: $0 &* 13) }
        try Data(bytes).write(to: URL(fileURLWithPath: source))
        let moved = try start(client, "StartUpload", url: server.url("/redirect?code=307&to=/upload/moved"), path: source,
                              options: ["method": .string("PUT")])
        let seeOther = try start(client, "StartUpload", url: server.url("/redirect?code=303&to=/blob/10"), path: source,
                                 options: ["method": .string("POST")])
        let first = try #require(try waitForFinished(client, moved), "\(daemon.log)")
        #expect(first.result == "success" && first.info["status"] == .uint64(201), "\(first.info)")
        #expect(try server.json("/uploads/moved")["bytes"] as? Int == bytes.count)
        let second = try #require(try waitForFinished(client, seeOther), "\(daemon.log)")
        #expect(second.result == "success" && second.info["status"] == .uint64(200), "\(second.info)")
    }

    /// A download that filled its disk said it had got as far as its last
    /// progress report (2 KiB of 2 MB): it says how far it got now.
    @Test(.enabled(if: StorageFullTests.canMount, "needs root to mount a tmpfs"))
    func aDownloadThatFillsItsDiskSaysHowFarItGot() throws {
        let server = try TransferServer()
        let daemon = try daemon()
        let client = try app(daemon)
        let small = cache(daemon) + "/small"
        try FileManager.default.createDirectory(atPath: small, withIntermediateDirectories: true)
        let mounted = try CommandResult.run("/bin/mount", ["-t", "tmpfs", "-o", "size=1m", "tmpfs", small])
        try #require(mounted.succeeded, "\(mounted)")
        defer { _ = try? CommandResult.run("/bin/umount", ["-l", small]) }
        let id = try start(client, url: server.url("/blob/4M"), path: small + "/big.bin")
        let done = try #require(try waitForFinished(client, id), "\(daemon.log)")
        #expect(done.result == "failed" && "\(done.info["error"] ?? .string(""))".contains("cannot write"), "\(done.info)")
        guard case .uint64(let bytes)? = done.info["bytes_done"] else {
            Issue.record("no bytes_done in \(done.info)")
            return
        }
        #expect(bytes > 900_000 && bytes <= 1 << 20, "about the 1 MiB the disk held: \(bytes)")
        #expect(partialFiles(in: small).isEmpty)
    }

    /// A download that finished while the state directory's disk was full
    /// landed, but its end could not be stored: it went back to waiting and
    /// was downloaded again from its first byte, for as long as the disk
    /// stayed full. The file now goes back to being partial, whole, and the
    /// next attempt finishes it without a request.
    @Test(.enabled(if: StorageFullTests.canMount, "needs root to mount a tmpfs"))
    func aDownloadWhoseEndCannotBeStoredIsNotDownloadedAgain() throws {
        let disk = try StorageFullTests.SmallDisk(size: "2m")
        let server = try TransferServer()
        let daemon = try daemon(stateDirectory: disk.path + "/state")
        let client = try app(daemon)
        // 5 s to download: the disk is filled before it ends, even on a busy machine.
        let path = "/blob/2M?rate=400000"
        let id = try start(client, url: server.url(path), path: cache(daemon) + "/whole.bin")
        func entry() throws -> [String: BusValue]? { try list(client).first { $0["transfer_id"] == .string(id) } }
        let deadline = ContinuousClock.now + .seconds(20)
        while ContinuousClock.now < deadline, case .uint64(let done)? = try entry()?["bytes_done"], done == 0 {
            Thread.sleep(forTimeInterval: 0.05)
        }
        disk.fill()
        #expect(daemon.waitForLog(containing: "could not be saved", timeout: .seconds(20)), "\(daemon.log.suffix(2000))")
        let waiting = try entry()
        #expect(waiting?["state"] == .string("waiting"), "\(String(describing: waiting))")
        #expect(!FileManager.default.fileExists(atPath: cache(daemon) + "/whole.bin"), "the file is partial again while its end is not stored")
        disk.makeRoom()
        let done = try #require(try waitForFinished(client, id), "\(daemon.log)")
        #expect(done.result == "success", "\(done.info)")
        #expect(TransferServer.isBlob(cache(daemon) + "/whole.bin", size: 2 << 20))
        let ranges = try server.ranges(of: path)
        #expect(ranges.count == 1, "downloaded once: \(ranges)")
        #expect(partialFiles(in: cache(daemon)).isEmpty)
        #expect(daemon.stop() == .status(0))
    }

    /// A redirect to a port past 65535 made the HTTP client trap: the daemon
    /// died, and again after every restart, for the transfer's 7 days.
    @Test func aRedirectToAPortNoneHasFailsTheTransfer() throws {
        let server = try TransferServer()
        let daemon = try daemon()
        let client = try app(daemon)
        let id = try start(client, url: server.url("/redirect?to=http://127.0.0.1:99999/x"), path: cache(daemon) + "/port.bin")
        let done = try #require(try waitForFinished(client, id), "\(daemon.log)")
        #expect(done.result == "failed" && "\(done.info["error"] ?? .string(""))".contains("99999"), "\(done.info)")
        #expect(daemon.stop() == .status(0))
    }

    /// A server whose certificate is not trusted, or that speaks no TLS on
    /// the port an https URL names, had the transfer retried with backoff
    /// for its 7 days, its app told nothing, and the log showed a Swift dump
    /// with a path of the daemon's build (found by an outside test). It fails
    /// at once, saying why.
    @Test func aTLSHandshakeThatFailsOnTheServerFailsTheTransferAtOnce() throws {
        let server = try TransferServer()
        let daemon = try daemon()
        let client = try app(daemon)
        let plain = try start(client, url: "https://127.0.0.1:\(server.port)/blob/1K", path: cache(daemon) + "/plain.bin")
        let refused = try #require(try waitForFinished(client, plain), "\(daemon.log)")
        let why = "\(refused.info["error"] ?? .string(""))"
        #expect(refused.result == "failed" && why.contains("the TLS handshake with the server failed") && why.contains("not retried"),
                "\(refused.info)")
        #expect(!why.contains(".build/"), "\(why)")

        // A certificate nobody trusts.
        let scratch = NSTemporaryDirectory() + "bgtaskd-tls-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: scratch, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: scratch) }
        let made = try CommandResult.run("/usr/bin/openssl", [
            "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", scratch + "/key.pem", "-out", scratch + "/cert.pem",
            "-days", "1", "-subj", "/CN=127.0.0.1",
        ])
        #expect(made.succeeded, "\(made)")
        let tls = try ChildProcess("/usr/bin/openssl", [
            "s_server", "-accept", "127.0.0.1:0", "-cert", scratch + "/cert.pem", "-key", scratch + "/key.pem", "-WWW",
        ])
        defer { _ = tls.stop() }
        let accept = try #require(tls.waitForLine { $0.hasPrefix("ACCEPT ") }, "\(tls.lines)")
        let port = try #require(accept.split(separator: ":").last.map(String.init))
        let untrusted = try start(client, url: "https://127.0.0.1:\(port)/x", path: cache(daemon) + "/untrusted.bin")
        let done = try #require(try waitForFinished(client, untrusted), "\(daemon.log)")
        #expect(done.result == "failed" && "\(done.info["error"] ?? .string(""))".contains("the server's certificate is not trusted"),
                "\(done.info)")
        #expect(daemon.stop() == .status(0))
    }

    @Test func anErrorStatusFailsTheTransferAndLeavesNoPartialFile() throws {
        let server = try TransferServer()
        let daemon = try daemon()
        let client = try app(daemon)
        let id = try start(client, url: server.url("/blob/1M?status=404"), path: cache(daemon) + "/missing.bin")
        let done = try #require(try waitForFinished(client, id), "\(daemon.log)")
        #expect(done.result == "failed" && done.info["status"] == .uint64(404), "\(done.info)")
        #expect(!FileManager.default.fileExists(atPath: cache(daemon) + "/missing.bin"))
        #expect(partialFiles(in: cache(daemon)).isEmpty)
    }

    /// A 416 to a request that asked for no range was taken for "cannot
    /// continue from here" and retried until the transfer's timeout (7 days);
    /// it fails as other errors do. A 204 that carries a Content-Length was
    /// retried as a body cut short; a 204 has no body whatever it claims.
    @Test func a416WithoutARangeFailsAndA204ClaimingALengthIsEmpty() throws {
        let server = try TransferServer()
        let daemon = try daemon()
        let client = try app(daemon)
        let refused = try start(client, url: server.url("/blob/1M?status=416"), path: cache(daemon) + "/refused.bin")
        let failed = try #require(try waitForFinished(client, refused, timeout: .seconds(15)), "\(daemon.log)")
        #expect(failed.result == "failed" && failed.info["status"] == .uint64(416), "\(failed.info)")
        let empty = try start(client, url: server.url("/blob/1M?status=204&claim=11"), path: cache(daemon) + "/empty.bin")
        let done = try #require(try waitForFinished(client, empty, timeout: .seconds(15)), "\(daemon.log)")
        #expect(done.result == "success" && done.info["status"] == .uint64(204), "\(done.info)")
        #expect((try? Data(contentsOf: URL(fileURLWithPath: cache(daemon) + "/empty.bin")))?.isEmpty == true)
        #expect(daemon.stop() == .status(0))
    }

    /// A password in the URL reaches the server, never the log nor what
    /// the daemon tells of the transfer; nor does one in a URL refused.
    @Test func aPasswordInTheURLIsNotShown() throws {
        let server = try TransferServer()
        let daemon = try daemon()
        let client = try app(daemon)
        let url = server.url("/blob/1K").replacingOccurrences(of: "http://", with: "http://user:secretpw@")
        let id = try start(client, url: url, path: cache(daemon) + "/private.bin")
        let done = try #require(try waitForFinished(client, id), "\(daemon.log)")
        #expect(done.result == "success", "\(done.info)")
        #expect(TransferServer.isBlob(cache(daemon) + "/private.bin", size: 1 << 10))
        // It reaches the server as Basic credentials (the HTTP client sends none of a URL's by itself).
        let perPath = try server.json("/stats")["per_path"] as? [String: Any]
        let authorizations = (perPath?["/blob/1K"] as? [String: Any])?["authorizations"] as? [Any]
        #expect(authorizations?.first as? String == "Basic " + Data("user:secretpw".utf8).base64EncodedString(), "\(String(describing: authorizations))")
        let shown = server.url("/blob/1K").replacingOccurrences(of: "http://", with: "http://user:***@")
        #expect(done.info["url"] == .string(shown))
        #expect(try list(client).first?["url"] == .string(shown))
        // The refusal of a URL quotes it, without the password.
        for bad in ["http://user:secretpw@", "http://user:secretpw@[bad/x"] {
            #expect(throws: BusError.self) {
                do { try start(client, url: bad, path: cache(daemon) + "/x.bin") } catch let error as BusError {
                    #expect(error.name == "org.freedesktop.DBus.Error.InvalidArgs" && error.message.contains("user:***@"), "\(error)")
                    #expect(!error.message.contains("secretpw"), "\(error)")
                    throw error
                }
            }
        }
        #expect(daemon.stop() == .status(0))
        #expect(daemon.log.contains("user:***@"), "the download was logged: \(daemon.log)")
        #expect(!daemon.log.contains("secretpw"), "\(daemon.log)")
    }

    /// A build that let a port beyond 16 bits through stored the transfer,
    /// and the HTTP client trapped on it at every start. Such a record now
    /// fails with the reason instead of reaching the client.
    @Test func aStoredTransferWithABadPortFailsInsteadOfCrashingTheDaemon() throws {
        let daemon = try daemon()
        var client = try app(daemon)
        // The discard port refuses: the transfer waits for a retry, stored.
        let id = try start(client, url: "http://127.0.0.1:9/x", path: cache(daemon) + "/x.bin")
        try daemon.crashAndRestart {
            let changed = try daemon.rewriteStoredRecords(
                plugin: "transfer", collection: "transfers", replacing: "127.0.0.1:9", with: "'127.0.0.1:99999'")
            #expect(changed == 1, "the stored transfer was rewritten")
        }
        client = try app(daemon)
        let done = try #require(try waitForFinished(client, id), "\(daemon.log)")
        #expect(done.result == "failed" && (done.info["error"].map { "\($0)" } ?? "").contains("port 99999"), "\(done.info)")
        Thread.sleep(forTimeInterval: 2)
        #expect(daemon.stop() == .status(0), "still up, and stops cleanly: \(daemon.log)")
    }

    /// A build that let a control character into a header value through
    /// stored the transfer; the HTTP client refused it at every attempt,
    /// which was taken as a network failure and retried for days. Such a
    /// record now fails with the reason.
    @Test func aStoredTransferWithAControlCharacterInAHeaderFails() throws {
        let daemon = try daemon()
        var client = try app(daemon)
        let headers: [String: BusValue] = ["headers": .dictionary(key: "s", value: "s", [.init(key: .string("X-T"), value: .string("aQQb"))])]
        // The discard port refuses: the transfer waits for a retry, stored.
        let id = try start(client, url: "http://127.0.0.1:9/x", path: cache(daemon) + "/x.bin", options: headers)
        try daemon.crashAndRestart {
            let changed = try daemon.rewriteStoredRecords(plugin: "transfer", collection: "transfers", replacing: "aQQb", with: "'a\\u000bb'")
            #expect(changed == 1, "the stored transfer was rewritten")
        }
        client = try app(daemon)
        let done = try #require(try waitForFinished(client, id), "\(daemon.log)")
        #expect(done.result == "failed" && (done.info["error"].map { "\($0)" } ?? "").contains("control character U+000B"), "\(done.info)")
        #expect(daemon.stop() == .status(0))
    }

    @Test func aKilledDaemonResumesTheDownloadWhereItStopped() throws {
        let server = try TransferServer()
        let daemon = try daemon()
        var client = try app(daemon)
        let size = 8 << 20
        // 8 s to download: the crash comes between a third and the end, even on a busy machine.
        let path = "/blob/8M?rate=1000000"
        let id = try start(client, url: server.url(path), path: cache(daemon) + "/big.bin")
        // Wait until about a third is on disk, then crash the daemon.
        let deadline = ContinuousClock.now + .seconds(30)
        var have = 0
        while have < size / 3, ContinuousClock.now < deadline {
            Thread.sleep(forTimeInterval: 0.1)
            have = partialFiles(in: cache(daemon)).first.flatMap {
                try? FileManager.default.attributesOfItem(atPath: cache(daemon) + "/" + $0)[.size] as? Int
            } ?? 0
        }
        #expect(have >= size / 3, "\(daemon.log)")
        try daemon.crashAndRestart()
        client = try app(daemon)
        let done = try #require(try waitForFinished(client, id), "\(daemon.log)")
        #expect(done.result == "success" && done.info["resumed"] == .bool(true), "\(done.info)")
        #expect(TransferServer.isBlob(cache(daemon) + "/big.bin", size: size))
        // Sent at most once, but for what was in flight when the daemon died (four seconds' worth here).
        let sent = try server.bytesSent()
        #expect(sent <= size + 4_000_000 + (1 << 20), "sent \(sent) for \(size)")
    }

    @Test func cancelStopsTheTransferAndRemovesItsPartialFile() throws {
        let server = try TransferServer()
        let daemon = try daemon()
        let client = try app(daemon)
        let id = try start(client, url: server.url("/blob/50M?rate=1000000"), path: cache(daemon) + "/slow.bin")
        let deadline = ContinuousClock.now + .seconds(20)
        while try list(client).first?["state"] != .string("running"), ContinuousClock.now < deadline { Thread.sleep(forTimeInterval: 0.05) }
        #expect(try list(client).first?["state"] == .string("running"))
        #expect(client.errorName(Self.interface, "Cancel") { try $0.append("t999-0") } == "org.freedesktop.DBus.Error.InvalidArgs")
        // Another app cannot cancel it.
        let other = try RawClient(daemon)
        try other.call("Manager", "CheckIn") { try $0.append("org.example.Plain") }
        #expect(other.errorName(Self.interface, "Cancel") { try $0.append(id) } == "org.freedesktop.DBus.Error.InvalidArgs")
        try client.call(Self.interface, "Cancel") { try $0.append(id) }
        #expect(try list(client).isEmpty)
        let gone = ContinuousClock.now + .seconds(10)
        while !partialFiles(in: cache(daemon)).isEmpty, ContinuousClock.now < gone { Thread.sleep(forTimeInterval: 0.05) }
        #expect(partialFiles(in: cache(daemon)).isEmpty)
        #expect(!FileManager.default.fileExists(atPath: cache(daemon) + "/slow.bin"))
    }

    @Test func discretionaryTransfersWaitForACPowerAndAnUnmeteredNetwork() throws {
        let system = try MockSystemBus(services: [.upower(onBattery: true, percentage: 50), .networkManager(connectivity: 4, metered: 3)])
        defer { system.stop() }
        let server = try TransferServer()
        let daemon = try daemon(environment: system.environment)
        // The power comes from the daemon's first read of UPower: until then it is unknown, which holds nothing back.
        #expect(daemon.waitForLog(containing: "following power sources"), "\(daemon.log)")
        let client = try app(daemon)
        let discretionary = try start(client, url: server.url("/blob/1M"), path: cache(daemon) + "/later.bin", options: ["discretionary": .bool(true)])
        let unmetered = try start(client, url: server.url("/blob/1M?x=2"), path: cache(daemon) + "/wifi.bin", options: ["allow_metered": .bool(false)])
        let now = try start(client, url: server.url("/blob/1M?x=3"), path: cache(daemon) + "/now.bin")
        #expect(try waitForFinished(client, now)?.result == "success", "\(daemon.log)")
        func waiting(_ id: String) throws -> String? {
            guard case .string(let reason)? = try list(client).first(where: { $0["transfer_id"] == .string(id) })?["waiting_for"] else { return nil }
            return reason
        }
        #expect(try waiting(discretionary) == "unmetered network")
        #expect(try waiting(unmetered) == "unmetered network")
        // An unmetered network lets the one through; the discretionary one still waits for AC power.
        try system.setNetwork(connectivity: 4, metered: 2)
        #expect(try waitForFinished(client, unmetered)?.result == "success", "\(daemon.log)")
        #expect(try waiting(discretionary) == "AC power")
        let table = try daemon.bgtaskctl(["transfers"])
        #expect(table.succeeded && table.standardOutput.contains("WAITING FOR") && table.standardOutput.contains("AC power")
                && table.standardOutput.contains(discretionary), "\(table)")
        let json = try daemon.bgtaskctl(["--json", "transfers", "s"])
        #expect(json.succeeded && json.standardOutput.contains("\"waiting_for\"") && json.standardOutput.contains("\"discretionary\""), "\(json)")
        try system.setOnBattery(false, percentage: 60)
        #expect(try waitForFinished(client, discretionary)?.result == "success", "\(daemon.log)")
        #expect(TransferServer.isBlob(cache(daemon) + "/later.bin", size: 1 << 20))
    }

    /// A network turned metered stopped only what had not started yet: a
    /// download that must avoid metered networks ran on over it. It pauses
    /// now, and continues from where it stopped once the network is
    /// unmetered again.
    @Test func aRunningTransferPausesWhenTheNetworkTurnsMetered() throws {
        let system = try MockSystemBus(services: [.networkManager(connectivity: 4, metered: 2)])
        defer { system.stop() }
        let server = try TransferServer()
        let daemon = try daemon(environment: system.environment)
        let client = try app(daemon)
        let path = "/blob/4M?rate=1000000"
        let id = try start(client, url: server.url(path), path: cache(daemon) + "/wifi.bin", options: ["allow_metered": .bool(false)])
        func entry() throws -> [String: BusValue]? { try list(client).first { $0["transfer_id"] == .string(id) } }
        let deadline = ContinuousClock.now + .seconds(20)
        while ContinuousClock.now < deadline, case .uint64(let done)? = try entry()?["bytes_done"], done == 0 {
            Thread.sleep(forTimeInterval: 0.05)
        }
        try system.setNetwork(connectivity: 4, metered: 1)
        #expect(daemon.waitForLog(containing: "transfer(s) pause: waiting for unmetered network"), "\(daemon.log.suffix(2000))")
        let paused = try entry()
        #expect(paused?["waiting_for"] == .string("unmetered network"), "\(String(describing: paused))")
        try system.setNetwork(connectivity: 4, metered: 2)
        let done = try #require(try waitForFinished(client, id), "\(daemon.log)")
        #expect(done.result == "success" && done.info["resumed"] == .bool(true), "\(done.info)")
        #expect(TransferServer.isBlob(cache(daemon) + "/wifi.bin", size: 4 << 20))
        let ranges = try server.ranges(of: path)
        #expect(ranges.count == 2 && ranges[1]?.hasPrefix("bytes=") == true && ranges[1] != "bytes=0-", "\(ranges)")
    }

    /// A system bus that crashed took NetworkManager with it, but its last
    /// word (metered) held a download that must avoid metered networks for
    /// good. That word holds until the bus is back; then NetworkManager,
    /// absent, is unknown, which holds nothing back, as without it.
    @Test func aSystemBusThatCrashesTakesItsNetworkConditionsWithIt() throws {
        let system = try MockSystemBus(services: [.networkManager(connectivity: 4, metered: 1)], restartable: true)
        defer { system.stop() }
        let server = try TransferServer()
        let daemon = try daemon(environment: system.environment)
        let client = try app(daemon)
        let id = try start(client, url: server.url("/blob/1M"), path: cache(daemon) + "/later.bin", options: ["allow_metered": .bool(false)])
        try waitUntil({ try list(client).first { $0["transfer_id"] == .string(id) }?["waiting_for"] }, is: "unmetered network", daemon)
        try system.crashAndRestart(with: [])
        #expect(try waitForFinished(client, id)?.result == "success", "\(daemon.log)")
        #expect(daemon.stop() == .status(0))
    }

    /// A system bus that restarts with NetworkManager on it: the network is
    /// followed again once the daemon is back on the bus, and a metered one
    /// holds a download that must avoid it again. Before, NetworkManager's
    /// subscriptions ended with the old bus until the daemon restarted, and
    /// the download ran on the metered network.
    @Test func theNetworkIsFollowedAgainAfterTheSystemBusRestarts() throws {
        let metered = MockService.networkManager(connectivity: 4, metered: 1)
        let system = try MockSystemBus(services: [metered], restartable: true)
        defer { system.stop() }
        let server = try TransferServer()
        let daemon = try daemon(environment: system.environment)
        let client = try app(daemon)
        let id = try start(client, url: server.url("/blob/8M?rate=1000000"), path: cache(daemon) + "/metered.bin",
                           options: ["allow_metered": .bool(false)])
        func waitingFor() throws -> BusValue? { try list(client).first { $0["transfer_id"] == .string(id) }?["waiting_for"] }
        try waitUntil(waitingFor, is: "unmetered network", daemon)
        let back = "the system bus is back: following the network again"
        for round in 1...2 {
            // Held while the bus and NetworkManager come back: a daemon that
            // came back first would find no NetworkManager yet, and a network
            // not known to be metered holds nothing back. That window is real
            // (README, "Not done yet"); this test is about following the
            // network again once NetworkManager is there.
            daemon.process.send(SIGSTOP)
            defer { daemon.process.send(SIGCONT) }
            try system.crashAndRestart(with: [metered])
            daemon.process.send(SIGCONT)
            let deadline = ContinuousClock.now + .seconds(15)
            while ContinuousClock.now < deadline, daemon.log.components(separatedBy: back).count < round + 1 {
                Thread.sleep(forTimeInterval: 0.05)
            }
            #expect(daemon.log.components(separatedBy: back).count == round + 1, "round \(round): \(daemon.log.suffix(2000))")
            #expect(try waitingFor() == .string("unmetered network"), "round \(round): \(daemon.log.suffix(2000))")
        }
        // Neither at start-up (before NetworkManager was read) nor while the bus was away.
        #expect(!daemon.log.contains("transfer \(id) attempt 1 starts"), "it ran on the metered network: \(daemon.log.suffix(2000))")
        try system.setNetwork(connectivity: 4, metered: 2)
        let done = try #require(try waitForFinished(client, id), "\(daemon.log)")
        #expect(done.result == "success", "\(done.info)")
        #expect(TransferServer.isBlob(cache(daemon) + "/metered.bin", size: 8 << 20))
        #expect(daemon.stop() == .status(0))
    }

    /// NetworkManager there but hanging when the daemon starts: its reads
    /// timed out, which made the network unknown, and a download that must
    /// avoid metered networks started on what may have been one. Now it
    /// waits until NetworkManager answers (read again after 5 s, doubling),
    /// while a download allowed on any network runs.
    @Test func aHangingNetworkManagerHoldsBackOnlyWhatMustAvoidMeteredNetworks() throws {
        let unmetered = MockService.networkManager(connectivity: 4, metered: 2)
        let system = try MockSystemBus(services: [unmetered])
        defer { system.stop() }
        try system.setHung(unmetered, true)
        var hung = true
        defer { if hung { try? system.setHung(unmetered, false) } }
        let server = try TransferServer()
        let daemon = try daemon(environment: system.environment)
        let client = try app(daemon)
        let wifiOnly = try start(client, url: server.url("/blob/64K"), path: cache(daemon) + "/wifi.bin", options: ["allow_metered": .bool(false)])
        let anyNetwork = try start(client, url: server.url("/blob/64K?n=2"), path: cache(daemon) + "/any.bin")
        #expect(daemon.waitForLog(containing: "cannot read org.freedesktop.NetworkManager Metered", timeout: .seconds(30)), "\(daemon.log)")
        let any = try #require(try waitForFinished(client, anyNetwork, timeout: .seconds(30)), "\(daemon.log.suffix(2000))")
        #expect(any.result == "success", "\(any.info)")
        #expect(try list(client).first { $0["transfer_id"] == .string(wifiOnly) }?["waiting_for"] == .string("unmetered network"),
                "\(daemon.log.suffix(2000))")
        #expect(!daemon.log.contains("transfer \(wifiOnly) attempt 1 starts"), "it ran on what may be a metered network: \(daemon.log.suffix(2000))")
        // A read again, while it still hangs, holds nothing else back (it took 10 s before).
        #expect(daemon.waitForLog(containing: "reading NetworkManager again: its last read failed", timeout: .seconds(30)), "\(daemon.log)")
        let failures = daemon.log.components(separatedBy: "cannot read org.freedesktop.NetworkManager Metered").count
        let during = try start(client, url: server.url("/blob/64K?n=3"), path: cache(daemon) + "/during.bin")
        let duringDone = try #require(try waitForFinished(client, during, timeout: .seconds(30)), "\(daemon.log.suffix(2000))")
        #expect(duringDone.result == "success", "\(duringDone.info)")
        #expect(daemon.log.components(separatedBy: "cannot read org.freedesktop.NetworkManager Metered").count == failures,
                "it waited for the read to time out: \(daemon.log.suffix(2000))")
        try system.setHung(unmetered, false)
        hung = false
        let done = try #require(try waitForFinished(client, wifiOnly, timeout: .seconds(60)), "\(daemon.log.suffix(2000))")
        #expect(done.result == "success", "\(done.info)")
        #expect(daemon.log.contains("reading NetworkManager again: its last read failed"), "\(daemon.log.suffix(2000))")
        #expect(TransferServer.isBlob(cache(daemon) + "/wifi.bin", size: 64 << 10))
        #expect(daemon.stop() == .status(0))
    }

    /// The refusal past Transfers.MaxPerApp said the app had as many
    /// transfers as the limit, whatever it had.
    @Test func theRefusalPastTheLimitSaysHowManyTheAppHas() throws {
        let server = try TransferServer()
        let daemon = try daemon(settings: ["Transfers.MaxPerApp=1"])
        let client = try app(daemon)
        _ = try start(client, url: server.url("/blob/10M?rate=100000"), path: cache(daemon) + "/one.bin")
        let message = try client.bus.newMethodCall(
            destination: "org.bgtaskd.BackgroundTasks1", path: "/org/bgtaskd/BackgroundTasks1", interface: "org.bgtaskd.BackgroundTasks1.Transfers",
            member: "StartDownload")
        try message.append("s")
        try message.append(server.url("/blob/1K"))
        try message.append(cache(daemon) + "/two.bin")
        try message.append(value: options([:]))
        do {
            _ = try client.bus.call(message, timeout: 10_000_000)
            Issue.record("a second transfer past MaxPerApp=1 was taken")
        } catch let error as BusError {
            #expect(error.name.hasSuffix("LimitExceeded") && error.message.contains("has 1 transfers already, the most Transfers.MaxPerApp (1) allows"),
                    "\(error)")
        }
        #expect(daemon.stop() == .status(0))
    }

    /// An app uninstalled while its download ran: the download went on,
    /// its result waiting for a check-in that cannot come. It pauses now,
    /// and goes on from where it stopped when the app is installed again
    /// (a package upgrade removes and writes the entry back).
    @Test func anUninstalledAppsTransfersPauseUntilItIsBack() throws {
        let server = try TransferServer()
        let daemon = try daemon()
        let client = try app(daemon)
        let path = "/blob/4M?rate=1000000"
        let id = try start(client, url: server.url(path), path: cache(daemon) + "/gone.bin")
        func entry() throws -> [String: BusValue]? { try list(client).first { $0["transfer_id"] == .string(id) } }
        let deadline = ContinuousClock.now + .seconds(20)
        while ContinuousClock.now < deadline, case .uint64(let done)? = try entry()?["bytes_done"], done == 0 {
            Thread.sleep(forTimeInterval: 0.05)
        }
        let desktopEntry = daemon.applicationsDirectory + "/\(Self.app).desktop"
        let saved = try String(contentsOfFile: desktopEntry, encoding: .utf8)
        unlink(desktopEntry)
        #expect(daemon.waitForLog(containing: "\(Self.app) is uninstalled: its 1 running transfer(s) pause"), "\(daemon.log.suffix(2000))")
        let table = try daemon.bgtaskctl(["transfers"])
        #expect(table.succeeded && table.standardOutput.contains("its app to be installed again"), "\(table)")
        // Well past the 4 s the download takes: it has not gone on.
        Thread.sleep(forTimeInterval: 5)
        #expect(try server.ranges(of: path).count == 1)
        try saved.write(toFile: desktopEntry, atomically: true, encoding: .utf8)
        let done = try #require(try waitForFinished(client, id), "\(daemon.log)")
        #expect(done.result == "success" && done.info["resumed"] == .bool(true), "\(done.info)")
        #expect(TransferServer.isBlob(cache(daemon) + "/gone.bin", size: 4 << 20))
        let ranges = try server.ranges(of: path)
        #expect(ranges.count == 2 && ranges[1]?.hasPrefix("bytes=") == true && ranges[1] != "bytes=0-", "\(ranges)")
    }

    /// The power comes from the daemon's own watch of power-profiles-daemon
    /// (plugin ABI 1.8): with both of its names on the bus, the newer one
    /// leaving does not end power saving while the older still reports it.
    @Test func discretionaryTransfersWaitForPowerSavingToEndUnderEitherName() throws {
        let system = try MockSystemBus(services: [
            .upower(onBattery: false, percentage: 80), .powerProfiles(profile: "power-saver"),
            .powerProfiles(profile: "power-saver", name: .current), .networkManager(connectivity: 4, metered: 2),
        ])
        defer { system.stop() }
        let server = try TransferServer()
        let daemon = try daemon(environment: system.environment)
        #expect(daemon.waitForLog(containing: "following power sources"), "\(daemon.log)")
        let client = try app(daemon)
        let later = try start(client, url: server.url("/blob/1M"), path: cache(daemon) + "/later.bin", options: ["discretionary": .bool(true)])
        func waiting() throws -> String? {
            guard case .string(let reason)? = try list(client).first(where: { $0["transfer_id"] == .string(later) })?["waiting_for"]
            else { return nil }
            return reason
        }
        #expect(try waiting() == "power-saver mode to end", "\(daemon.log)")
        system.stopService(.powerProfiles(profile: "power-saver", name: .current))
        Thread.sleep(forTimeInterval: 1)
        #expect(try waiting() == "power-saver mode to end", "the legacy name still says power-saver: \(daemon.log)")
        try system.setPowerProfile("balanced")
        #expect(try waitForFinished(client, later)?.result == "success", "\(daemon.log)")
        #expect(TransferServer.isBlob(cache(daemon) + "/later.bin", size: 1 << 20))
    }

    /// xdg-user-dirs writes `XDG_DOWNLOAD_DIR="$HOME/"` for a disabled
    /// directory; the whole home was then every app's download directory.
    @Test func aDisabledDownloadDirectoryOpensNothingOfTheHome() throws {
        let server = try TransferServer()
        let daemon = try daemon()
        let client = try app(daemon)
        try FileManager.default.createDirectory(atPath: daemon.home + "/config", withIntermediateDirectories: true)
        try #"XDG_DOWNLOAD_DIR="$HOME/""#.write(toFile: daemon.home + "/config/user-dirs.dirs", atomically: true, encoding: .utf8)
        try FileManager.default.createDirectory(atPath: daemon.home + "/.ssh", withIntermediateDirectories: true)
        try "secret".write(toFile: daemon.home + "/.ssh/id_rsa", atomically: true, encoding: .utf8)
        let invalid = "org.freedesktop.DBus.Error.InvalidArgs"
        #expect(startError(client, url: server.url("/blob/1K"), path: daemon.home + "/.bashrc") == invalid)
        #expect(startError(client, url: server.url("/blob/1K"), path: daemon.home + "/data/org.example.Plain.bin") == invalid)
        #expect(startError(client, "StartUpload", url: server.url("/upload/k"), path: daemon.home + "/.ssh/id_rsa") == invalid)
        // The app's own directories still are.
        let own = try start(client, url: server.url("/blob/1K"), path: cache(daemon) + "/own.bin")
        #expect(try waitForFinished(client, own)?.result == "success", "\(daemon.log)")
    }

    @Test func aFinishedTransferLaunchesItsAppWhenItIsNotRunning() throws {
        let server = try TransferServer()
        let daemon = try daemon()
        var client: RawClient? = try app(daemon)
        let id = try start(client!, url: server.url("/blob/10M?rate=5000000"), path: cache(daemon) + "/late.bin")
        // The app goes away before the download is done: bgtaskd launches it for the result.
        client = nil
        #expect(daemon.waitForLog(containing: "launched \(Self.app) for transfer", timeout: .seconds(30)), "\(daemon.log)")
        // The result waits for the app's next check-in.
        let again = try app(daemon)
        let done = try #require(try waitForFinished(again, id), "\(daemon.log)")
        #expect(done.result == "success")
    }

    @Test func sleepPausesTransfersAndTheWakeResumesThem() throws {
        let server = try TransferServer()
        let daemon = try daemon()
        let client = try app(daemon)
        // 6 s to download: the sleep comes before the end, even on a busy machine.
        let path = "/blob/6M?rate=1000000"
        let id = try start(client, url: server.url(path), path: cache(daemon) + "/night.bin")
        let deadline = ContinuousClock.now + .seconds(20)
        while try list(client).first?["bytes_done"].map({ $0 == .uint64(0) }) ?? true, ContinuousClock.now < deadline {
            Thread.sleep(forTimeInterval: 0.05)
        }
        #expect(try daemon.callManager("SimulateSleep").succeeded)
        let paused = ContinuousClock.now + .seconds(10)
        while try list(client).first?["state"] != .string("waiting"), ContinuousClock.now < paused { Thread.sleep(forTimeInterval: 0.05) }
        let entry = try #require(try list(client).first)
        #expect(entry["state"] == .string("waiting") && entry["waiting_for"] == .string("the machine to wake"), "\(entry)")
        #expect(try waitForFinished(client, id, timeout: .seconds(3)) == nil, "nothing moves while asleep")
        #expect(try daemon.callManager("SimulateWake").succeeded)
        let done = try #require(try waitForFinished(client, id), "\(daemon.log)")
        #expect(done.result == "success" && done.info["resumed"] == .bool(true), "\(done.info)")
        #expect(TransferServer.isBlob(cache(daemon) + "/night.bin", size: 6 << 20))
        #expect(try server.ranges(of: path).count == 2)
    }

    @Test func bgtaskctlSaysWhenTheTransferPluginIsMissing() throws {
        let empty = FileManager.default.temporaryDirectory.appendingPathComponent("bgtaskd-no-plugins-\(UUID())").path
        try FileManager.default.createDirectory(atPath: empty, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: empty) }
        let daemon = try DaemonUnderTest(arguments: ["--plugin-dir", empty])
        let result = try daemon.bgtaskctl(["transfers"])
        #expect(!result.succeeded && result.standardError.contains("without its transfer plugin"), "\(result)")
        #expect(daemon.stop() == .status(0))
    }

    /// A large file arrives whole: sizes, progress and the bytes themselves.
    @Test func aLargeDownloadArrivesWhole() throws {
        let server = try TransferServer()
        let daemon = try daemon()
        let client = try app(daemon)
        try client.listen(for: "TransferProgress")
        let size = 300 << 20
        let destination = cache(daemon) + "/large.bin"
        let id = try start(client, url: server.url("/blob/300M"), path: destination)
        let done = try #require(try waitForFinished(client, id, timeout: .seconds(120)), "\(daemon.log)")
        #expect(done.result == "success" && done.info["bytes_done"] == .uint64(UInt64(size)) && done.info["bytes_total"] == .uint64(UInt64(size)))
        #expect(TransferServer.isBlob(destination, size: size))
        let progress = try client.received.filter { $0.member == "TransferProgress" }.map { message -> (UInt64, UInt64) in
            try message.rewind()
            _ = try message.readString()
            return (try message.readUInt64(), try message.readUInt64())
        }
        #expect(progress.last.map { $0 == (UInt64(size), UInt64(size)) } == true, "the last progress is the whole file: \(progress.suffix(3))")
        #expect(zip(progress, progress.dropFirst()).allSatisfy { $0.0 <= $1.0 }, "progress never goes back")
        try FileManager.default.removeItem(atPath: destination)
    }

    /// `Retry-After` given as a date (valid HTTP) was ignored: the retry
    /// came after the plain backoff's 1 s.
    @Test func aRetryAfterDateIsHonoured() throws {
        let server = try TransferServer()
        let daemon = try daemon()
        let client = try app(daemon)
        _ = try start(client, url: server.url("/blob/1K?fail=1&retry_at=600"), path: cache(daemon) + "/later.bin")
        #expect(daemon.waitForLog(containing: "attempt 2 in "), "\(daemon.log)")
        let line = try #require(daemon.log.split(separator: "\n").first { $0.contains("attempt 2 in ") })
        let seconds = line.components(separatedBy: "attempt 2 in ").last.flatMap { Double($0.prefix { $0 != " " }) }
        #expect((590...600).contains(seconds ?? 0), "\(line)")
        #expect(daemon.stop() == .status(0))
    }

    /// A transfer told to come back in an hour tries again as soon as the network comes back.
    @Test func theNetworkComingBackEndsTheWaitForARetry() throws {
        let system = try MockSystemBus(services: [.networkManager(connectivity: 4, metered: 2)])
        defer { system.stop() }
        let server = try TransferServer()
        let daemon = try daemon(environment: system.environment)
        let client = try app(daemon)
        let id = try start(client, url: server.url("/blob/1M?fail=1&retry_after=3600"), path: cache(daemon) + "/back.bin")
        let deadline = ContinuousClock.now + .seconds(10)
        while try list(client).first?["waiting_for"] != .string("a retry"), ContinuousClock.now < deadline { Thread.sleep(forTimeInterval: 0.05) }
        let waiting = try #require(try list(client).first)
        #expect(waiting["waiting_for"] == .string("a retry") && waiting["attempts"] == .uint64(1), "\(waiting)")
        try system.setNetwork(connectivity: 1, metered: 2)
        #expect(try waitForFinished(client, id, timeout: .seconds(2)) == nil)
        try system.setNetwork(connectivity: 4, metered: 2)
        let done = try #require(try waitForFinished(client, id, timeout: .seconds(15)), "\(daemon.log)")
        #expect(done.result == "success")
    }

    /// resource_timeout_s ends a transfer that is still running: timedOut, its bytes gone, and it stays so.
    @Test func aTransferPastItsResourceTimeoutEndsTimedOut() throws {
        let server = try TransferServer()
        let daemon = try daemon()
        let client = try app(daemon)
        let id = try start(client, url: server.url("/blob/8M?rate=2000000"), path: cache(daemon) + "/slow.bin",
                           options: ["resource_timeout_s": .double(1.5)])
        let done = try #require(try waitForFinished(client, id, timeout: .seconds(20)), "\(daemon.log)")
        #expect(done.result == "timedOut" && done.info["state"] == .string("finished"), "\(done.info)")
        // Had the attempt gone on, it would have finished after 4 s and landed the file.
        Thread.sleep(forTimeInterval: 4.5)
        #expect(!FileManager.default.fileExists(atPath: cache(daemon) + "/slow.bin"))
        #expect(partialFiles(in: cache(daemon)).isEmpty)
        let listed = try list(client)
        #expect(listed.first?["result"] == .string("timedOut"), "\(listed)")
    }

    /// A free slot goes to the app with the fewest transfers running, not to
    /// the oldest transfer: one app's queue does not hold back another app's
    /// download, which starts when the first of the queue is done.
    @Test func oneAppsQueueDoesNotHoldBackAnotherAppsDownload() throws {
        let server = try TransferServer()
        let daemon = try daemon(settings: ["Transfers.MaxConcurrent=1"])
        let busy = try app(daemon)
        let other = try app(daemon, id: Self.otherApp)
        // Each of the queue takes a second.
        for n in 1...3 { try start(busy, url: server.url("/blob/1M?rate=1000000&n=\(n)"), path: cache(daemon) + "/q\(n).bin") }
        let mine = try start(other, url: server.url("/blob/64K"), path: cache(daemon, of: Self.otherApp) + "/mine.bin")
        let done = try #require(try waitForFinished(other, mine, timeout: .seconds(30)), "\(daemon.log)")
        #expect(done.result == "success", "\(done.info)")
        // Oldest first, it would have waited for all three.
        let queue = try list(busy)
        #expect(queue.count == 3 && queue.filter { $0["state"] == .string("finished") }.count <= 1, "\(queue)")
    }

    /// With every slot taken by one app's slow downloads, another app's
    /// download waited until one of them finished. Now the busy app pauses
    /// one (it continues where it stopped, by a range request) and the
    /// other app's download runs at once.
    @Test func anAppWithNothingRunningGetsASlotFromAnAppThatHoldsThemAll() throws {
        let server = try TransferServer()
        let daemon = try daemon(settings: ["Transfers.MaxConcurrent=2"])
        let busy = try app(daemon)
        let other = try app(daemon, id: Self.otherApp)
        // Each takes 8 s.
        let slow = (1...2).map { "/blob/4M?rate=500000&n=\($0)" }
        let ids = try slow.enumerated().map { try start(busy, url: server.url($0.element), path: cache(daemon) + "/slow\($0.offset).bin") }
        try waitUntilMoving(busy, ids)
        let mine = try start(other, url: server.url("/blob/64K"), path: cache(daemon, of: Self.otherApp) + "/mine.bin")
        let done = try #require(try waitForFinished(other, mine, timeout: .seconds(30)), "\(daemon.log)")
        #expect(done.result == "success", "\(done.info)")
        #expect(try list(busy).filter { $0["state"] == .string("finished") }.isEmpty, "it did not wait for a slow one to end")
        #expect(daemon.log.contains("pauses: \(Self.otherApp) has transfers waiting and none running"), "\(daemon.log.suffix(2000))")
        let results = try ids.map { try #require(try waitForFinished(busy, $0), "\(daemon.log)") }
        #expect(results.allSatisfy { $0.result == "success" }, "\(results.map(\.info))")
        #expect(results.filter { $0.info["resumed"] == .bool(true) }.count == 1, "\(results.map(\.info))")
        for n in 0..<2 { #expect(TransferServer.isBlob(cache(daemon) + "/slow\(n).bin", size: 4 << 20)) }
        #expect(daemon.stop() == .status(0))
    }

    /// With one slot (`Transfers.MaxConcurrent=1`), another app's small
    /// download waited until a slow one of the first app finished: the rule
    /// that makes room only took from an app running two. Now a download
    /// that can continue where it stopped yields its slot once it has held
    /// it for `Transfers.TurnSec`, and continues by a range request after.
    @Test func anAppWaitsOnlyATurnForTheOneSlotAnotherAppHolds() throws {
        let server = try TransferServer()
        let daemon = try daemon(settings: ["Transfers.MaxConcurrent=1", "Transfers.TurnSec=1.5"])
        let busy = try app(daemon)
        let other = try app(daemon, id: Self.otherApp)
        // Takes 8 s.
        let slow = try start(busy, url: server.url("/blob/4M?rate=500000"), path: cache(daemon) + "/slow.bin")
        try waitUntilMoving(busy, [slow])
        let mine = try start(other, url: server.url("/blob/64K"), path: cache(daemon, of: Self.otherApp) + "/mine.bin")
        let done = try #require(try waitForFinished(other, mine, timeout: .seconds(30)), "\(daemon.log)")
        #expect(done.result == "success", "\(done.info)")
        #expect(try list(busy).filter { $0["state"] == .string("finished") }.isEmpty, "it did not wait for the slow one to end")
        #expect(daemon.log.contains("transfer \(slow) of \(Self.app) pauses: \(Self.otherApp) has transfers waiting and none running, \(Self.app) has had its turn"),
                "\(daemon.log.suffix(2000))")
        let result = try #require(try waitForFinished(busy, slow), "\(daemon.log)")
        #expect(result.result == "success", "\(result.info)")
        #expect(result.info["resumed"] == .bool(true), "\(result.info)")
        #expect(TransferServer.isBlob(cache(daemon) + "/slow.bin", size: 4 << 20))
        #expect(daemon.stop() == .status(0))
    }

    /// Two apps' slow downloads and one slot: the one that yielded its turn
    /// did not get it back until the other finished, because the other's
    /// first attempt had not yet named its validator when its turn was
    /// reckoned (no timer was set). Both now take turns, each continuing by
    /// a range request.
    @Test func twoAppsSlowDownloadsTakeTurnsForOneSlot() throws {
        let server = try TransferServer()
        let daemon = try daemon(settings: ["Transfers.MaxConcurrent=1", "Transfers.TurnSec=1.5"])
        let first = try app(daemon)
        let second = try app(daemon, id: Self.otherApp)
        // Each takes 8 s alone.
        let a = try start(first, url: server.url("/blob/4M?rate=500000&n=1"), path: cache(daemon) + "/a.bin")
        try waitUntilMoving(first, [a])
        let b = try start(second, url: server.url("/blob/4M?rate=500000&n=2"), path: cache(daemon, of: Self.otherApp) + "/b.bin")
        let doneB = try #require(try waitForFinished(second, b, timeout: .seconds(60)), "\(daemon.log.suffix(3000))")
        let doneA = try #require(try waitForFinished(first, a, timeout: .seconds(60)), "\(daemon.log.suffix(3000))")
        #expect(doneA.result == "success" && doneB.result == "success", "\(doneA.info) \(doneB.info)")
        #expect(daemon.log.contains("transfer \(a) of \(Self.app) pauses: \(Self.otherApp) has transfers waiting and none running, \(Self.app) has had its turn"),
                "\(daemon.log.suffix(3000))")
        #expect(daemon.log.contains("transfer \(b) of \(Self.otherApp) pauses: \(Self.app) has transfers waiting and none running, \(Self.otherApp) has had its turn"),
                "the turn came back to the first app: \(daemon.log.suffix(3000))")
        #expect(doneA.info["resumed"] == .bool(true) && doneB.info["resumed"] == .bool(true), "\(doneA.info) \(doneB.info)")
        #expect(TransferServer.isBlob(cache(daemon) + "/a.bin", size: 4 << 20))
        #expect(TransferServer.isBlob(cache(daemon, of: Self.otherApp) + "/b.bin", size: 4 << 20))
        #expect(daemon.stop() == .status(0))
    }

    /// A download that yielded its turn left its app with none running, as
    /// the app it yielded to: the free slot went by who was served longest
    /// ago, so the yielding app's own next download could take it. The slot
    /// now goes to the app it was freed for.
    @Test func theSlotAYieldedTurnFreesGoesToTheAppThatWaits() throws {
        let server = try TransferServer()
        let daemon = try daemon(settings: ["Transfers.MaxConcurrent=2", "Transfers.TurnSec=1.5"])
        let first = try app(daemon)
        let second = try app(daemon, id: Self.otherApp)
        let third = try app(daemon, id: Self.thirdApp)
        let slow = try start(first, url: server.url("/blob/4M?rate=500000&n=1"), path: cache(daemon) + "/slow.bin")
        try waitUntilMoving(first, [slow])
        // The third app was served after the first: between apps with none running, the first would win the slot.
        let earlier = try start(third, url: server.url("/blob/64K?n=0"), path: cache(daemon, of: Self.thirdApp) + "/earlier.bin")
        #expect(try waitForFinished(third, earlier, timeout: .seconds(30))?.result == "success", "\(daemon.log.suffix(3000))")
        let other = try start(second, url: server.url("/blob/4M?rate=500000&n=2"), path: cache(daemon, of: Self.otherApp) + "/other.bin")
        // The first app's second download waits behind its first.
        let queued = try start(first, url: server.url("/blob/4M?rate=500000&n=3"), path: cache(daemon) + "/queued.bin")
        try waitUntilMoving(second, [other])
        let waiting = try start(third, url: server.url("/blob/64K"), path: cache(daemon, of: Self.thirdApp) + "/small.bin")
        let done = try #require(try waitForFinished(third, waiting, timeout: .seconds(60)), "\(daemon.log.suffix(3000))")
        #expect(done.result == "success", "\(done.info)")
        let log = daemon.log
        let pause = try #require(log.range(of: "pauses: \(Self.thirdApp) has transfers waiting and none running"), "\(log.suffix(3000))")
        let thirdStarts = try #require(log.range(of: "transfer \(waiting) attempt 1 starts"), "\(log.suffix(3000))")
        #expect(pause.lowerBound < thirdStarts.lowerBound)
        if let queuedStarts = log.range(of: "transfer \(queued) attempt 1 starts") {
            #expect(thirdStarts.lowerBound < queuedStarts.lowerBound, "the yielding app's own download took the slot: \(log.suffix(3000))")
        }
        #expect(log.components(separatedBy: "pauses: \(Self.thirdApp) has transfers waiting").count == 2, "one pause for one app: \(log.suffix(3000))")
        #expect(daemon.stop() == .status(0))
    }

    /// The transfer paused to make room was the one started last, and the
    /// one paused before had just started again: another app starting
    /// small downloads one after the other paused the same transfer every
    /// time, and one that cannot continue where it stopped began from its
    /// first byte each time. A transfer paused so is not paused again
    /// within a minute.
    @Test func aTransferPausedForAnotherAppIsNotPausedAgainAtOnce() throws {
        let server = try TransferServer()
        let daemon = try daemon(settings: ["Transfers.MaxConcurrent=2"])
        let busy = try app(daemon)
        let other = try app(daemon, id: Self.otherApp)
        // Servers that take no ranges: a paused one starts again from zero.
        let ids = try (1...2).map {
            try start(busy, url: server.url("/blob/4M?rate=400000&norange=1&n=\($0)"), path: cache(daemon) + "/slow\($0).bin")
        }
        try waitUntilMoving(busy, ids)
        for n in 0..<3 {
            let mine = try start(other, url: server.url("/blob/64K?k=\(n)"), path: cache(daemon, of: Self.otherApp) + "/mine\(n).bin")
            let done = try #require(try waitForFinished(other, mine, timeout: .seconds(30)), "\(daemon.log)")
            #expect(done.result == "success")
            try complete(other, done.token)
            // Time for the paused one to get its slot back.
            Thread.sleep(forTimeInterval: 0.7)
        }
        let victims = daemon.log.split(separator: "\n").filter { $0.contains(" pauses: \(Self.otherApp) has transfers waiting") }
            .compactMap { line in line.range(of: "transfer ").flatMap { line[$0.upperBound...].split(separator: " ").first.map(String.init) } }
        #expect(!victims.isEmpty && Set(victims).count == victims.count, "paused again and again: \(victims)")
        #expect(daemon.stop() == .status(0))
    }

    /// Results that waited for the app come together on its check-in, under
    /// one token that says how many it carries.
    @Test func resultsThatWaitedComeUnderOneTokenThatCountsThem() throws {
        let server = try TransferServer()
        let daemon = try daemon(settings: ["Transfers.WakeBudgetSec=1"])
        var client: RawClient? = try app(daemon)
        let first = try start(client!, url: server.url("/blob/1M?rate=2000000&n=1"), path: cache(daemon) + "/one.bin")
        let second = try start(client!, url: server.url("/blob/1M?rate=2000000&n=2"), path: cache(daemon) + "/two.bin")
        client = nil
        // The app is not running and cannot be launched (/bin/false): the results wait.
        let admin = try RawClient(daemon)
        let deadline = ContinuousClock.now + .seconds(30)
        while try list(admin).filter({ $0["state"] == .string("finished") }).count < 2, ContinuousClock.now < deadline {
            Thread.sleep(forTimeInterval: 0.1)
        }
        Thread.sleep(forTimeInterval: 3)
        let again = try app(daemon)
        #expect(again.waitForSignals(2, timeout: .seconds(10)), "\(daemon.log)")
        let results = try finished(again)
        #expect(Set(results.map(\.id)) == [first, second], "\(results.map(\.id))")
        #expect(Set(results.map(\.token)).count == 1 && results.allSatisfy { $0.info["token_transfers"] == .uint64(2) },
                "\(results.map { ($0.token, $0.info["token_transfers"] as Any) })")
        try complete(again, results[0].token)
        #expect(try list(again).isEmpty)
    }

    /// A directory swapped for a link after the start cannot lead a transfer
    /// out: the upload does not send the file the link points at, and the
    /// download writes nothing there.
    @Test func aDirectorySwappedForALinkAfterTheStartLeadsNowhere() throws {
        let system = try MockSystemBus(services: [.upower(onBattery: true, percentage: 50)])
        defer { system.stop() }
        let server = try TransferServer()
        let daemon = try daemon(environment: system.environment)
        // On battery must be known before they start, or they would not wait.
        #expect(daemon.waitForLog(containing: "following power sources"), "\(daemon.log)")
        let client = try app(daemon)
        let outside = daemon.home + "/outside"
        try FileManager.default.createDirectory(atPath: outside, withIntermediateDirectories: true)
        try Data("secret".utf8).write(to: URL(fileURLWithPath: outside + "/x"))
        let inside = cache(daemon) + "/d"
        try FileManager.default.createDirectory(atPath: inside, withIntermediateDirectories: true)
        try Data("harmless".utf8).write(to: URL(fileURLWithPath: inside + "/x"))
        // Discretionary: they wait for AC power, which gives time to swap the directory.
        let upload = try start(client, "StartUpload", url: server.url("/upload/x"), path: inside + "/x", options: ["discretionary": .bool(true)])
        let download = try start(client, url: server.url("/blob/1M"), path: inside + "/y", options: ["discretionary": .bool(true)])
        try FileManager.default.moveItem(atPath: inside, toPath: cache(daemon) + "/d-moved")
        try FileManager.default.createSymbolicLink(atPath: inside, withDestinationPath: outside)
        try system.setOnBattery(false, percentage: 60)
        let sent = try #require(try waitForFinished(client, upload), "\(daemon.log)")
        #expect(sent.result == "failed" && (sent.info["error"].map { "\($0)" } ?? "").contains("cannot be used any more: "), "\(sent.info)")
        let fetched = try #require(try waitForFinished(client, download), "\(daemon.log)")
        #expect(fetched.result == "failed", "\(fetched.info)")
        #expect(try server.json("/stats")["bytes_received"] as? Int == 0, "nothing was uploaded")
        let leftovers = try FileManager.default.contentsOfDirectory(atPath: outside)
        #expect(leftovers == ["x"], "nothing was written outside: \(leftovers)")
    }
}
