import BgTaskTestKit
import Foundation
import Testing

/// What a process the tests start takes along from the test process.
@Suite struct ServiceSpawnTests {
    /// A descriptor the test process holds without close-on-exec stays with
    /// the test: kept by a long-lived child it held another test's freshly
    /// written script busy (ETXTBSY) or its filled disk full.
    @Test func aChildKeepsNoDescriptorOfTheTestsBesidesItsOutput() throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("bgtaskd-spawn-\(UUID())").path
        let opened = open(path, O_WRONLY | O_CREAT, 0o600)
        #expect(opened >= 0)
        // A number of its own, well clear of what the shell opens.
        let descriptor = fcntl(opened, F_DUPFD, 200)
        close(opened)
        defer { close(descriptor); unlink(path) }
        #expect(descriptor >= 200)
        #expect(fcntl(descriptor, F_GETFD) & FD_CLOEXEC == 0, "the test needs a descriptor without close-on-exec")

        let child = try ChildProcess("/bin/sh", ["-c", "if [ -e /proc/self/fd/\(descriptor) ]; then echo kept; else echo closed; fi"])
        #expect(child.waitForExit() == .status(0))
        #expect(child.lines == ["closed"], "\(child.lines) \(child.standardError)")
    }
}
