import Foundation
import Logging
import Testing

@testable import BgTaskDaemon

/// The journal of what is frozen, read back by the next start.
@Suite struct FreezeJournalTests {
    static let logger = Logger(label: "bgtaskd-tests")

    @Test func whatWasFrozenIsReadBackOnceAndTheJournalEmptied() throws {
        let directory = try TemporaryDirectory()
        let path = directory.path("bgtaskd.sqlite3.frozen")
        let journal = FreezeJournal(path: path, logger: Self.logger) { $0() }
        journal.add(.cgroup("/sys/fs/cgroup/app.scope"))
        journal.add(.process(pid: 42, startTime: 7))
        journal.save()

        let next = FreezeJournal(path: path, logger: Self.logger) { $0() }
        #expect(next.takeLeftovers() == [.cgroup("/sys/fs/cgroup/app.scope"), .process(pid: 42, startTime: 7)])
        #expect(next.takeLeftovers() == [])
    }

    /// A link in the journal's place, to a file of the user's: the file was
    /// emptied at start, and the journal written into it at the next freeze.
    @Test func aLinkInTheJournalsPlaceIsNeitherReadNorWrittenThrough() throws {
        let directory = try TemporaryDirectory()
        let victim = directory.path("victim")
        let text = "cgroup /sys/fs/cgroup/someone-else.scope\n"
        try text.write(toFile: victim, atomically: true, encoding: .utf8)
        let path = directory.path("bgtaskd.sqlite3.frozen")
        try FileManager.default.createSymbolicLink(atPath: path, withDestinationPath: victim)

        let journal = FreezeJournal(path: path, logger: Self.logger) { $0() }
        #expect(journal.takeLeftovers() == [], "its lines are not taken as things to thaw")
        journal.add(.unit("app-bgtaskd-org.example.App-1.scope"))
        journal.save()
        #expect(try String(contentsOfFile: victim, encoding: .utf8) == text)
    }
}
