import BgTaskTestKit
import Foundation
import Testing

/// Every calling process costs the daemon one pidfd: its open-file limit is
/// raised at start, and when it runs out anyway, callers hear a distinct
/// error and the log says so once.
@Suite struct FileDescriptorTests {
    @Test func theSoftLimitIsRaisedToTheHardOne() throws {
        let daemon = try DaemonUnderTest(wrapper: ["/usr/bin/prlimit", "--nofile=1024:4096", "--"])
        #expect(daemon.waitForLog(containing: "open-file limit 4096 (raised from 1024)"), "\(daemon.log)")
        #expect(daemon.stop() == .status(0))
    }

    @Test func callersBeyondTheLimitAreRefusedWithLimitsExceededAndLoggedOnce() throws {
        let daemon = try DaemonUnderTest(wrapper: ["/usr/bin/prlimit", "--nofile=48:48", "--"])
        // 80 processes at once, each with a connection and a task, all alive together.
        let script = Self.holders(hold: 3, meanwhile: "")
        let result = try CommandResult.run("/usr/bin/python3", ["-c", script], environment: daemon.environment, timeout: .seconds(60))
        #expect(result.succeeded, "\(result)")
        let answers = result.standardOutput.split(separator: "\n").map(String.init)
        #expect(answers.count == 80)
        #expect(answers.contains("ok"))
        #expect(answers.contains("org.freedesktop.DBus.Error.LimitsExceeded"), "\(Set(answers))")
        #expect(Set(answers).isSubset(of: ["ok", "org.freedesktop.DBus.Error.LimitsExceeded"]), "\(Set(answers))")
        #expect(daemon.log.components(separatedBy: "out of file descriptors").count == 2, "logged once per burst")
        // The callers are gone: the next one is served, and the log says the burst ended.
        let client = try RawClient(daemon)
        #expect(client.errorName("Manager", "GetBackgroundTimeRemaining") == nil)
        #expect(daemon.waitForLog(containing: "file descriptors are available again"))
        #expect(daemon.stop() == .status(0))
    }

    /// Desktop entries rescanned while the daemon has no descriptor left: the
    /// scan could open nothing and every app was forgotten (pushes and fetches
    /// refused) until the next change. The apps known are kept, and the scan
    /// is tried again until it can be made.
    @Test func aRescanWithoutDescriptorsForgetsNoApp() throws {
        let daemon = try DaemonUnderTest(
            desktopEntries: [
                DesktopEntrySpec(id: "org.example.Kept", modes: ["fetch"], exec: "/bin/true"),
                DesktopEntrySpec(id: "org.example.AlsoKept", modes: ["remote-notification"], exec: "/bin/true"),
            ],
            wrapper: ["/usr/bin/prlimit", "--nofile=48:48", "--"])
        let script = Self.holders(hold: 6, meanwhile: """
            # Every descriptor is taken: an entry is added, and the daemon rescans.
            with open(sys.argv[1], "w") as entry:
                entry.write("[Desktop Entry]\\nType=Application\\nName=New\\nExec=/bin/true\\nX-BgTaskd-Modes=fetch;\\n")
            """)
        let added = daemon.applicationsDirectory + "/org.example.Added.desktop"
        let result = try CommandResult.run("/usr/bin/python3", ["-c", script, added], environment: daemon.environment, timeout: .seconds(60))
        #expect(result.succeeded, "\(result)")
        #expect(daemon.waitForLog(containing: "cannot read every desktop entry"), "\(daemon.log.suffix(2000))")
        #expect(daemon.waitForLog(containing: "desktop entries can be read again"), "\(daemon.log.suffix(2000))")
        let ids = try RawClient(daemon).applications().compactMap { entry -> String? in
            if case .string(let id)? = entry["app_id"] { id } else { nil }
        }
        #expect(Set(ids).isSuperset(of: ["org.example.Kept", "org.example.AlsoKept", "org.example.Added"]), "\(ids) \(daemon.log.suffix(2000))")
        #expect(daemon.stop() == .status(0))
    }

    /// A Python script that forks 80 processes, each with a connection of its
    /// own and a task (one pidfd each for the daemon), which print what
    /// BeginBackgroundTask answered ("ok" or the error's name) and hold on;
    /// `meanwhile` runs once they have all answered, and `hold` seconds
    /// after it they let go together.
    static func holders(hold: Int, meanwhile: String) -> String {
        """
        import dbus, os, sys, time
        address = os.environ["DBUS_SESSION_BUS_ADDRESS"]
        # The children hold their connections until the parent closes the
        # gate: all alive together however slowly the 80 of them start.
        gate_read, gate_write = os.pipe()
        children = []
        for i in range(80):
            read, write = os.pipe()
            pid = os.fork()
            if pid == 0:
                os.close(read)
                os.close(gate_write)
                try:
                    bus = dbus.bus.BusConnection(address)
                    manager = dbus.Interface(bus.get_object("org.bgtaskd.BackgroundTasks1", "/org/bgtaskd/BackgroundTasks1"),
                                             "org.bgtaskd.BackgroundTasks1.Manager")
                    manager.BeginBackgroundTask("held")
                    answer = "ok"
                except dbus.DBusException as error:
                    answer = error.get_dbus_name()
                os.write(write, answer.encode())
                os.close(write)
                os.read(gate_read, 1)
                os._exit(0)
            os.close(write)
            children.append((pid, read))
        for pid, read in children:
            print(os.read(read, 200).decode(), flush=True)
        \(meanwhile)
        time.sleep(\(hold))
        os.close(gate_write)
        for pid, read in children:
            os.waitpid(pid, 0)
        """
    }
}
