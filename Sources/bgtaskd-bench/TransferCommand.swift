import ArgumentParser
import Foundation
import Glibc

/// The transfer mode's figures, each against the simplest alternative
/// measured in the same run:
///
/// - throughput: one large download from a local HTTP server through
///   bgtaskd (StartDownload to TransferFinished, the file flushed and
///   renamed) against `curl -o` of the same URL to the same directory,
///   rounds interleaved; the ratio of medians;
/// - memory: bgtaskd's resident memory with `--queued` transfers queued
///   (Transfers.MaxConcurrent of them running against a throttled URL);
/// - resume: a download killed (SIGKILL of the daemon) half way, the daemon
///   started again: bytes the server sent beyond the file's size.
///
/// It starts everything it needs itself: a dbus-daemon, the test HTTP
/// server (`--server`, Tests/IntegrationTests/Fixtures/transfer-server.py)
/// and bgtaskd, in a scratch directory it removes afterwards.
struct TransferCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "transfer",
        abstract: "Download throughput against curl, memory with queued transfers, and bytes repeated after a kill.")

    @Option(help: ArgumentHelp("The bgtaskd to measure (its plugins beside it).", valueName: "PATH"))
    var bgtaskd: String

    @Option(help: ArgumentHelp("The test HTTP server script.", valueName: "PATH"))
    var server: String

    @Option(help: "Size of the download raced against curl, in MiB.")
    var sizeMib = 1024

    @Option(help: "Rounds of bgtaskd and curl, interleaved.")
    var rounds = 3

    @Option(help: "Transfers queued for the memory figure.")
    var queued = 1000

    @Option(help: "Size of the download killed half way, in MiB.")
    var killSizeMib = 256

    static let app = "org.bgtaskd.Bench.Transfer"

    func run() throws {
        let scratch = FileManager.default.temporaryDirectory.appendingPathComponent("bgtaskd-bench-transfer-\(getpid())").path
        defer { try? FileManager.default.removeItem(atPath: scratch) }
        let home = scratch + "/home"
        let cache = home + "/.cache/" + Self.app
        try FileManager.default.createDirectory(atPath: cache, withIntermediateDirectories: true)
        _ = try DesktopEntries.write(id: Self.app, modes: ["transfer"], dataHome: home + "/data")

        let bus = try ServiceProcess(
            path: "/usr/bin/dbus-daemon", arguments: ["--session", "--nofork", "--address=unix:path=\(scratch)/bus"],
            environment: [:], log: scratch + "/dbus.log")
        defer { _ = bus.stop() }
        let address = "unix:path=\(scratch)/bus"
        try waitFor("dbus-daemon") { FileManager.default.fileExists(atPath: scratch + "/bus") }
        let http = try ServiceProcess(
            path: "/usr/bin/python3", arguments: [server, "--port-file", scratch + "/port"], environment: [:], log: scratch + "/http.log")
        defer { _ = http.stop() }
        try waitFor("the HTTP server") { FileManager.default.fileExists(atPath: scratch + "/port") }
        let port = try String(contentsOfFile: scratch + "/port", encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
        let base = "http://127.0.0.1:\(port)"
        let environment = [
            "HOME": home, "XDG_DATA_HOME": home + "/data", "XDG_CONFIG_HOME": home + "/config", "XDG_CACHE_HOME": home + "/.cache",
            "DBUS_SYSTEM_BUS_ADDRESS": "unix:path=/nonexistent/bgtaskd-bench",
        ]
        var daemon = try startDaemon(address: address, state: scratch + "/state", environment: environment, log: scratch + "/bgtaskd-1.log")
        defer { _ = daemon.stop() }
        var client = try TransferClient(address, app: Self.app)

        // Throughput, interleaved with curl.
        let size = sizeMib << 20
        var ours: [Double] = []
        var theirs: [Double] = []
        var theirsDurable: [Double] = []
        for round in 1...max(1, rounds) {
            let url = "\(base)/blob/\(sizeMib)M?round=\(round)"
            let curlFile = cache + "/curl.bin"
            let curlStart = MonotonicTime.nanoseconds()
            let curl = try ServiceProcess(path: "/usr/bin/curl", arguments: ["-sS", "-o", curlFile, url], environment: [:], log: scratch + "/curl.log")
            while curl.poll() == nil { MonotonicTime.sleep(seconds: 0.002) }
            let curlSeconds = MonotonicTime.microseconds(since: curlStart) / 1e6
            guard curl.poll() == 0, fileSize(curlFile) == size else { throw ValidationError("curl did not download \(url)") }
            // bgtaskd's file is on disk when it says so: curl's too, at equal durability, after an fsync.
            let fd = open(curlFile, O_WRONLY)
            _ = fsync(fd)
            close(fd)
            let durableSeconds = MonotonicTime.microseconds(since: curlStart) / 1e6
            unlink(curlFile)
            theirs.append(Double(size) / curlSeconds)
            theirsDurable.append(Double(size) / durableSeconds)

            let destination = cache + "/bgtaskd.bin"
            let start = MonotonicTime.nanoseconds()
            let id = try client.download(url + "&by=bgtaskd", to: destination)
            guard let done = try client.waitForFinished(id, timeout: 600), done.result == "success" else {
                throw ValidationError("bgtaskd did not download \(url)")
            }
            let seconds = MonotonicTime.microseconds(since: start) / 1e6
            guard fileSize(destination) == size else { throw ValidationError("bgtaskd's download of \(url) has the wrong size") }
            try client.complete(done.token)
            unlink(destination)
            ours.append(Double(size) / seconds)
            say("transfer: round \(round): bgtaskd \(format(ours.last! / 1e6, 0)) MB/s, curl \(format(theirs.last! / 1e6, 0)) MB/s, curl then fsync \(format(theirsDurable.last! / 1e6, 0)) MB/s")
        }
        let ratio = LatencyStats.median(ours) / LatencyStats.median(theirs)
        Figure.atLeast("transfer-throughput", "\(sizeMib) MiB download ÷ curl's, median of \(rounds)", value: ratio * 100, limit: 80, unit: "%", decimals: 0).report()
        let durableRatio = LatencyStats.median(ours) / LatencyStats.median(theirsDurable)
        Figure.atLeast("transfer-throughput-durable", "\(sizeMib) MiB download ÷ curl's then fsync, median of \(rounds)",
                       value: durableRatio * 100, limit: 80, unit: "%", decimals: 0).report()

        // Memory with transfers queued.
        let idle = ProcStatus(pid: daemon.pid).residentMiB ?? 0
        var ids: [String] = []
        // Each StartDownload's reply time: does a call slow down as the queue grows?
        var startTimes: [Double] = []
        for index in 0..<queued {
            let start = MonotonicTime.nanoseconds()
            ids.append(try client.download("\(base)/blob/1G?rate=1000&queued=\(index)", to: cache + "/queued-\(index).bin"))
            startTimes.append(MonotonicTime.microseconds(since: start))
        }
        MonotonicTime.sleep(seconds: 2)
        let status = ProcStatus(pid: daemon.pid)
        let resident = status.residentMiB ?? .infinity
        say("transfer: \(queued) queued: RSS \(format(resident, 1)) MiB (\(format(idle, 1)) MiB before), peak \(format(status.peakResidentMiB ?? 0, 1)) MiB")
        let window = min(100, startTimes.count)
        say("transfer: StartDownload reply, first \(window): \(LatencyStats(Array(startTimes.prefix(window))).summaryInMilliseconds); "
            + "last \(window): \(LatencyStats(Array(startTimes.suffix(window))).summaryInMilliseconds)")
        let listStart = MonotonicTime.nanoseconds()
        let listed = try client.list()
        say("transfer: ListTransfers of \(listed) transfers took \(milliseconds(MonotonicTime.microseconds(since: listStart))) ms")
        Figure.atMost("transfer-queued-rss", "daemon RSS with \(queued) transfers queued", value: resident, limit: 64, unit: "MiB", decimals: 1).report()
        for id in ids { try client.cancel(id) }

        // A kill half way, and the resume.
        let killSize = killSizeMib << 20
        let path = "/blob/\(killSizeMib)M?rate=100000000"
        let killed = try client.download(base + path, to: cache + "/killed.bin")
        let half = MonotonicTime.nanoseconds()
        var partial = 0
        while partial < killSize / 2, MonotonicTime.microseconds(since: half) < 120e6 {
            MonotonicTime.sleep(seconds: 0.005)
            partial = partialSize(in: cache)
        }
        kill(daemon.pid, SIGKILL)
        _ = daemon.stop()
        say("transfer: killed bgtaskd with \(partial) of \(killSize) bytes on disk")
        daemon = try startDaemon(address: address, state: scratch + "/state", environment: environment, log: scratch + "/bgtaskd-2.log")
        client = try TransferClient(address, app: Self.app)
        guard let done = try client.waitForFinished(killed, timeout: 600), done.result == "success", fileSize(cache + "/killed.bin") == killSize else {
            throw ValidationError("the killed download did not finish after the restart")
        }
        let sent = try bytesSent(base, path, scratch: scratch)
        let repeated = sent - killSize
        say("transfer: the server sent \(sent) bytes for \(killSize): \(repeated) again")
        Figure.atMost("transfer-resume", "bytes downloaded again after a kill -9 at 50 %", value: Double(repeated) / Double(1 << 20), limit: 1,
                      unit: "MiB", decimals: 2).report()
    }

    private func startDaemon(address: String, state: String, environment: [String: String], log: String) throws -> ServiceProcess {
        let daemon = try ServiceProcess(
            path: bgtaskd, arguments: ["--bus", address, "--state-dir", state, "--log-level", "info"], environment: environment, log: log)
        try waitFor("bgtaskd") { (try? String(contentsOfFile: log, encoding: .utf8))?.contains("info: ready") == true }
        return daemon
    }

    private func waitFor(_ what: String, _ condition: () -> Bool) throws {
        let start = MonotonicTime.nanoseconds()
        while !condition() {
            guard MonotonicTime.microseconds(since: start) < 30e6 else { throw ValidationError("\(what) did not start") }
            MonotonicTime.sleep(seconds: 0.02)
        }
    }

    private func fileSize(_ path: String) -> Int {
        var info = stat()
        return stat(path, &info) == 0 ? Int(info.st_size) : -1
    }

    private func partialSize(in directory: String) -> Int {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []
        return names.filter { $0.hasSuffix(".bgtaskd-part") }.map { fileSize(directory + "/" + $0) }.max() ?? 0
    }

    /// Blob bytes the server sent for `path` (its /stats).
    private func bytesSent(_ base: String, _ path: String, scratch: String) throws -> Int {
        let file = scratch + "/stats.json"
        let curl = try ServiceProcess(path: "/usr/bin/curl", arguments: ["-sS", "-o", file, base + "/stats"], environment: [:], log: scratch + "/curl.log")
        while curl.poll() == nil { MonotonicTime.sleep(seconds: 0.002) }
        let data = try Data(contentsOf: URL(fileURLWithPath: file))
        let stats = try JSONSerialization.jsonObject(with: data) as? [String: Any]
        // No count is no figure: a missing one must not read as nothing sent again.
        guard let entry = (stats?["per_path"] as? [String: Any])?[path] as? [String: Any], let sent = entry["bytes_sent"] as? Int else {
            throw ValidationError("the server's /stats has no byte count for \(path)")
        }
        return sent
    }
}
