import BgTaskTestKit
import Foundation
import Testing

/// The SDK's side of the transfer mode, through the real daemon and the test
/// app: `startDownload`, `onTransferProgress`, and a transfer handler that
/// gets each result decoded and completes it — in a running app, and in one
/// the daemon launches for results that finished after it quit.
@Suite struct SDKTransferTests {
    static let app = "org.example.Dl"

    func cache(_ daemon: DaemonUnderTest) throws -> String {
        let directory = daemon.home + "/.cache/" + Self.app
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        return directory
    }

    @Test func aRunningAppDownloadsAndHearsTheResult() throws {
        let server = try TransferServer()
        let daemon = try DaemonUnderTest(desktopEntries: [DesktopEntrySpec(id: Self.app, modes: ["transfer"], exec: "/bin/false")])
        let destination = try cache(daemon) + "/sdk.bin"
        let app = try daemon.startTestApp([
            "--app-id", Self.app, "--tasks", "0", "--transfer-handler",
            "--download", server.url("/blob/6M?rate=6000000") + "=" + destination,
        ])
        let started = app.waitForEvent("transfer_started")
        #expect(started?["id"] as? String != nil, "\(app.lines) \(app.standardError) \(daemon.log)")
        #expect(app.waitForEvent("transfer_progress") != nil, "\(app.lines)")
        let finished = app.waitForEvent("transfer_finished", timeout: .seconds(30))
        #expect(finished?["id"] as? String == started?["id"] as? String && finished?["result"] as? String == "success"
                && finished?["bytes"] as? Int == 6 << 20, "\(app.lines)\n\(daemon.log)")
        #expect(TransferServer.isBlob(destination, size: 6 << 20))
        // The handler's completion sent CompleteEvents: nothing is left.
        let admin = try RawClient(daemon)
        let deadline = ContinuousClock.now + .seconds(10)
        while try !TransfersTests().list(admin).isEmpty, ContinuousClock.now < deadline { Thread.sleep(forTimeInterval: 0.05) }
        #expect(try TransfersTests().list(admin).isEmpty)
        app.stop()
        #expect(daemon.stop() == .status(0))
    }

    @Test func anAppLaunchedForFinishedTransfersGetsTheirResults() throws {
        let server = try TransferServer()
        let testapp = BinaryLocator.path(of: "bgtaskd-testapp")
        let daemon = try DaemonUnderTest(desktopEntries: [
            DesktopEntrySpec(id: Self.app, modes: ["transfer"], exec: "\(testapp) --tasks 0 --transfer-handler --hold 10"),
        ])
        let destination = try cache(daemon) + "/later.bin"
        // A connection of the app starts the download, then quits.
        var client: RawClient? = try TransfersTests().app(daemon)
        _ = try TransfersTests().start(client!, url: server.url("/blob/4M?rate=4000000"), path: destination)
        client = nil
        #expect(daemon.waitForLog(containing: "launched \(Self.app) for transfer", timeout: .seconds(30)), "\(daemon.log)")
        let finished = daemon.process.waitForLine(timeout: .seconds(20)) { $0.contains(#""event":"transfer_finished""#) }
        #expect(finished?.contains(#""result":"success""#) == true, "\(daemon.process.lines)\n\(daemon.log)")
        #expect(TransferServer.isBlob(destination, size: 4 << 20))
        let admin = try RawClient(daemon)
        let deadline = ContinuousClock.now + .seconds(10)
        while try !TransfersTests().list(admin).isEmpty, ContinuousClock.now < deadline { Thread.sleep(forTimeInterval: 0.05) }
        #expect(try TransfersTests().list(admin).isEmpty, "completed by the launched app")
        #expect(daemon.stop() == .status(0))
    }
}
