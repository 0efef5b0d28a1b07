@testable import BgTaskDaemon
import BgTaskCore
import Glibc
import Testing

/// What a caller's sandbox and cgroup say about its app (docs/DESIGN.md §3).
@Suite struct SandboxInspectorTests {
    // MARK: .flatpak-info

    /// A caller can put its own `.flatpak-info` in a root it made: a huge
    /// one is read only as far as the limit (it was read whole on the loop,
    /// hundreds of MB), and a FIFO is not waited on.
    @Test func aHugeOrSpecialFlatpakInfoIsReadOnlyAsFarAsTheLimit() throws {
        let directory = try TemporaryDirectory()
        try directory.write("info", "[Application]\nname=org.gnome.Weather\n")
        let path = directory.path("info")
        #expect(truncate(path, 300 * 1024 * 1024) == 0, "a sparse file of 300 MB")
        let head = try #require(SandboxInspector.head(of: path))
        #expect(head.utf8.count == SandboxInspector.flatpakInfoLimit)
        #expect(SandboxInspector.flatpakAppID(fromInfo: head)?.rawValue == "org.gnome.Weather")
        #expect(mkfifo(directory.path("fifo"), 0o600) == 0)
        #expect(SandboxInspector.head(of: directory.path("fifo")) == nil)
    }

    /// A sandboxed app that made itself undumpable kept the daemon out of
    /// /proc/PID/root (EACCES), and was taken for an unsandboxed, trusted
    /// caller: only "no such file" means no sandbox.
    @Test func aRootTheDaemonMayNotReadIsNoProofOfNoSandbox() {
        #expect(SandboxInspector.flatpakInfoPresence(statResult: 0, errno: 0) == .present)
        #expect(SandboxInspector.flatpakInfoPresence(statResult: -1, errno: ENOENT) == .absent)
        #expect(SandboxInspector.flatpakInfoPresence(statResult: -1, errno: ENOTDIR) == .absent)
        for errno in [EACCES, EPERM, ELOOP, EIO] {
            #expect(SandboxInspector.flatpakInfoPresence(statResult: -1, errno: errno) == .unknown, "errno \(errno)")
        }
        // This process's own root can be read: it is no sandbox.
        #expect(SandboxInspector.inspect(pid: getpid()).isSandboxed == false)
    }

    @Test func flatpakInfoOfAnApp() {
        let info = """
            [Application]
            name=org.gnome.Weather
            runtime=runtime/org.gnome.Platform/x86_64/46

            [Instance]
            instance-id=2893127043
            instance-path=/home/u/.var/app/org.gnome.Weather
            app-path=/var/lib/flatpak/app/org.gnome.Weather/x86_64/stable/0123abcd/files
            branch=stable
            arch=x86_64
            flatpak-version=1.14.4
            session-bus-proxy=true

            [Context]
            shared=network;ipc;
            sockets=x11;wayland;

            """
        #expect(SandboxInspector.flatpakAppID(fromInfo: info)?.rawValue == "org.gnome.Weather")
    }

    @Test func nameOutsideTheApplicationGroupIsIgnored() {
        let info = "[Context]\nname=org.evil.Other\n[Instance]\nname=org.evil.Too\n[Application]\nname=org.good.App\n"
        #expect(SandboxInspector.flatpakAppID(fromInfo: info)?.rawValue == "org.good.App")
    }

    @Test func applicationGroupEndsAtTheNextGroup() {
        let info = "[Application]\nruntime=runtime/org.gnome.Platform/x86_64/46\n[Instance]\nname=org.evil.Other\n"
        #expect(SandboxInspector.flatpakAppID(fromInfo: info) == nil)
    }

    @Test func runtimeSandboxHasNoAppID() {
        // `flatpak run` of a runtime writes a [Runtime] group instead of [Application].
        let info = "[Runtime]\nname=org.gnome.Platform\nruntime=runtime/org.gnome.Platform/x86_64/46\n"
        #expect(SandboxInspector.flatpakAppID(fromInfo: info) == nil)
    }

    @Test func blanksAroundLinesAreIgnored() {
        #expect(SandboxInspector.flatpakAppID(fromInfo: "  [Application]  \n\tname=org.example.Foo \n")?.rawValue == "org.example.Foo")
    }

    @Test(arguments: [
        "", "garbage", "[Application]\n", "[Application]\nname=\n", "[Application]\nname=weather\n",
        "[Application]\nname=org.example.Wea ther\n", "[Application]\n# name=org.example.Foo\n",
        "name=org.example.Foo\n",
    ])
    func noValidNameMeansNoAppID(_ info: String) {
        #expect(SandboxInspector.flatpakAppID(fromInfo: info) == nil)
    }

    // MARK: /proc/PID/cgroup

    @Test func unifiedHierarchy() {
        let cgroup = "0::/user.slice/user-1000.slice/user@1000.service/app.slice/app-gnome-org.gnome.Weather-1234.scope\n"
        #expect(SandboxInspector.unitName(fromCgroup: cgroup) == "app-gnome-org.gnome.Weather-1234.scope")
    }

    @Test func innermostUnitWins() {
        let cgroup = "0::/user.slice/user-1000.slice/user@1000.service/app.slice/app-org.example.Foo@abc.service/worker/leaf\n"
        #expect(SandboxInspector.unitName(fromCgroup: cgroup) == "app-org.example.Foo@abc.service")
    }

    @Test func terminalShellIsItsOwnScope() {
        let cgroup = "0::/user.slice/user-1000.slice/user@1000.service/app.slice/app-org.gnome.Terminal.slice/vte-spawn-3f1c0a9e-6b1d-4c53-9a0e-2b7d8f6e5c4a.scope\n"
        let unit = SandboxInspector.unitName(fromCgroup: cgroup)
        #expect(unit == "vte-spawn-3f1c0a9e-6b1d-4c53-9a0e-2b7d8f6e5c4a.scope")
        #expect(unit.flatMap(SandboxInspector.appID(fromUnit:)) == nil)
    }

    @Test func hybridHierarchyUsesTheUnifiedLine() {
        let cgroup = """
            12:pids:/user.slice/user-1000.slice/user@1000.service
            11:freezer:/
            3:cpu,cpuacct:/user.slice
            1:name=systemd:/user.slice/user-1000.slice/user@1000.service/app.slice/app-flatpak-org.x.Y-99.scope
            0::/user.slice/user-1000.slice/user@1000.service/app.slice/app-flatpak-org.x.Y-99.scope

            """
        #expect(SandboxInspector.unitName(fromCgroup: cgroup) == "app-flatpak-org.x.Y-99.scope")
    }

    @Test func legacyHierarchyUsesNameSystemd() {
        let cgroup = """
            11:memory:/user.slice/user-1000.slice
            2:devices:/user.slice
            1:name=systemd:/user.slice/user-1000.slice/user@1000.service/app.slice/app-org.example.Foo@abc.service

            """
        #expect(SandboxInspector.unitName(fromCgroup: cgroup) == "app-org.example.Foo@abc.service")
    }

    @Test(arguments: [
        "", "garbage", "0::/", "0::/user.slice/user-1000.slice", "11:freezer:/\n3:cpu:/user.slice/x.scope\n",
        "1:name=systemd:/\n",
    ])
    func noUnitInCgroup(_ cgroup: String) {
        #expect(SandboxInspector.unitName(fromCgroup: cgroup) == nil)
    }

    @Test func loginSessionIsNotAnApp() {
        let unit = SandboxInspector.unitName(fromCgroup: "0::/user.slice/user-1000.slice/session-2.scope\n")
        #expect(unit == "session-2.scope")
        #expect(unit.flatMap(SandboxInspector.appID(fromUnit:)) == nil)
    }

    // MARK: Unit names

    @Test(arguments: [
        ("app-gnome-org.gnome.Weather-1234.scope", "org.gnome.Weather"),
        ("app-org.example.Foo@abc.service", "org.example.Foo"),
        ("app-flatpak-org.x.Y-99.scope", "org.x.Y"),
        ("app-org.example.Foo-1234.scope", "org.example.Foo"),
        ("app-org.example.Foo.service", "org.example.Foo"),
        ("app-gnome-org.gnome.Weather.service", "org.gnome.Weather"),
        ("app-gnome-org.gnome.Weather@1234.service", "org.gnome.Weather"),
        ("app-kde-org.kde.konsole-ab12cd.scope", "org.kde.konsole"),
        ("app-bgtaskd-org.example.News-f00d.scope", "org.example.News"),
        ("app-gnome-org.example.My\\x2dApp-5678.scope", "org.example.My-App"),
        ("app-org.example.My\\x2dApp@x.service", "org.example.My-App"),
        ("app-gnome-com.example.under_score-1.scope", "com.example.under_score"),
    ])
    func appUnits(_ unit: String, _ appID: String) {
        #expect(SandboxInspector.appID(fromUnit: unit)?.rawValue == appID)
    }

    @Test(arguments: [
        // Not app units.
        "vte-spawn-3f1c0a9e-6b1d-4c53-9a0e-2b7d8f6e5c4a.scope", "session-2.scope", "init.scope", "user@1000.service",
        "gnome-terminal-server.service", "org.gnome.Shell@wayland.service", "dbus-:1.2-org.gnome.Nautilus@0.service",
        "xapp-org.example.Foo-1.scope", "APP-org.example.Foo-1.scope",
        // Garbage.
        "", "app", "app-", "app-.scope", "app--1.scope", "app-org.example.Foo", "app-org.example.Foo-1.slice",
        "app-weather-1.scope", "app-gnome-weather-1.scope", "app-org..x-1.scope", "app-gnome-org.example.-1.scope",
        "app-gnome-org.example.Bad\\xZZ-1.scope", "app-gnome-org.example.Nul\\x00-1.scope",
        "app-gnome-org.example.Slash\\x2fX-1.scope", "app-gnome-org.example.Wea ther-1.scope",
    ])
    func nonAppUnits(_ unit: String) {
        #expect(SandboxInspector.appID(fromUnit: unit) == nil)
    }

    @Test func unescapeUndoesSystemdEscaping() {
        #expect(SandboxInspector.unescapeUnitName("a\\x2db\\x2ec") == "a-b.c")
        #expect(SandboxInspector.unescapeUnitName("plain") == "plain")
        // Incomplete or invalid escapes stay as they are.
        #expect(SandboxInspector.unescapeUnitName("a\\x2") == "a\\x2")
        #expect(SandboxInspector.unescapeUnitName("a\\xzz") == "a\\xzz")
    }

    // MARK: /proc

    @Test func processThatDoesNotExistIsUnknownAndUnsandboxed() {
        // Above the kernel's pid_max limit (4194304), so never a live process.
        let finding = SandboxInspector.inspect(pid: 4_194_305)
        #expect(finding == SandboxInspector.Finding(appID: nil, source: nil, isSandboxed: false))
    }

    @Test(.enabled(if: access("/.flatpak-info", F_OK) != 0, "the tests themselves run inside Flatpak"))
    func thisTestProcessIsNotSandboxed() {
        #expect(SandboxInspector.inspect(pid: getpid()).isSandboxed == false)
    }
}
