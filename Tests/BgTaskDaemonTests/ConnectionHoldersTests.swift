@testable import BgTaskDaemon
import Glibc
import Testing

/// What tells a process's children from strangers, read from /proc/PID/stat.
@Suite struct ConnectionHoldersTests {
    @Test func aCommandWithSpacesAndParenthesesDoesNotShiftTheFields() throws {
        // Fields: pid (comm) state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime stime
        // cutime cstime priority nice threads itrealvalue starttime …
        let line = "4242 (we (ird) name) S 1 4240 4240 0 -1 4194560 100 0 0 0 5 3 0 0 20 0 1 0 987654 12345 678\n"
        let lineage = try #require(ConnectionHolders.lineage(stat: line))
        #expect(lineage == ConnectionHolders.Lineage(processGroup: 4240, startTime: 987_654))
        #expect(ConnectionHolders.lineage(stat: "4242 (short) S 1 2") == nil)
    }

    @Test func ownProcessIsReadFromProc() throws {
        let own = try #require(ConnectionHolders.lineage(of: getpid()))
        #expect(own.processGroup == getpgrp())
        #expect(own.startTime > 0)
    }
}
