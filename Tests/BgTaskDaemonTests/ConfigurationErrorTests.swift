@testable import BgTaskDaemon
import Foundation
import Testing

/// Every configuration error stops start-up and names file, line and key (docs/DESIGN.md §2).
@Suite struct ConfigurationErrorTests {
    /// Applies `text` as `bgtaskd.conf` and returns the error it must cause.
    func failure(_ text: String, file: String = "/etc/bgtaskd/bgtaskd.conf") -> Configuration.ParseError? {
        var configuration = BundledPluginKeys.configuration()
        return #expect(throws: Configuration.ParseError.self) {
            try configuration.apply(iniText: text, file: file)
        }
    }

    /// Applies `--set override` and returns the error it must cause.
    func overrideFailure(_ override: String) -> Configuration.ParseError? {
        var configuration = BundledPluginKeys.configuration()
        return #expect(throws: Configuration.ParseError.self) { try configuration.apply(override: override) }
    }

    // MARK: Values

    @Test(arguments: ["abc", "", "30s", "1,5", "0x", "ten", "0x10", "0x1p4"])
    func badNumberNamesFileLineAndKey(_ value: String) throws {
        let error = try #require(failure("# comment\n\n[Tasks]\nBudgetSec=\(value)\n"))
        #expect(error.origin == .init(file: "/etc/bgtaskd/bgtaskd.conf", line: 4))
        #expect(error.key == "Tasks.BudgetSec")
        #expect(error.reason.contains("'\(value)'"))
        #expect(error.description.hasPrefix("/etc/bgtaskd/bgtaskd.conf:4: Tasks.BudgetSec: "))
    }

    /// A value, key or `--set` of megabytes was echoed whole in the error: a
    /// megabyte line in the log. Each is cut short in its middle, and what
    /// the error says of it still shows.
    @Test func aHugeValueKeyOrOverrideIsCutShortInTheError() throws {
        let huge = String(repeating: "9", count: 200_000) + "x"
        let value = try #require(failure("[Tasks]\nBudgetSec=\(huge)\n"))
        #expect(value.description.utf8.count < 1000, "\(value.description.prefix(400))")
        #expect(value.description.hasPrefix("/etc/bgtaskd/bgtaskd.conf:2: Tasks.BudgetSec: '999"))
        #expect(value.description.hasSuffix("99x' is not a number of seconds"), "\(value.description)")
        #expect(value.description.contains("bytes left out"))
        let key = try #require(failure("[Tasks]\nBudget\(String(repeating: "S", count: 200_000))=3\n"))
        #expect(key.description.utf8.count < 1000 && key.description.hasSuffix("unknown key"), "\(key.description.prefix(400))")
        // One character of 100,000 combining marks, and wide characters, are cut by bytes too.
        for odd in ["a" + String(repeating: "\u{301}", count: 100_000), String(repeating: "漢", count: 120)] {
            let error = try #require(failure("[Tasks]\nBudgetSec=\(odd)\n"))
            #expect(error.description.utf8.count < 1000 && !error.description.contains("-"), "\(error.description.prefix(300))")
        }
        let override = try #require(overrideFailure("Tasks.BudgetSec=" + huge))
        #expect(override.description.utf8.count < 1500 && override.description.hasSuffix("is not a number of seconds"), "\(override.description.prefix(400))")
    }

    @Test(arguments: ["nan", "NaN", "inf", "-inf", "infinity", "+Infinity"])
    func nonFiniteNumbersAreRefused(_ value: String) throws {
        let error = try #require(failure("[Fetch]\nMinimumIntervalSec=\(value)\n"))
        #expect(error.origin.line == 2)
        #expect(error.key == "Fetch.MinimumIntervalSec")
        #expect(error.reason.contains("not a number"))
    }

    @Test(arguments: ["Tasks.WarningSec", "Tasks.KillGraceSec", "Fetch.MinimumIntervalSec", "RemoteNotifications.WakeBudgetSec",
                      "Scheduler.ChunkSec", "Tasks.BudgetSec"])
    func negativeNumbersAreRefused(_ key: String) throws {
        let error = try #require(overrideFailure("\(key)=-1"))
        #expect(error.key == key)
        #expect(error.reason.contains("-1"))
    }

    @Test(arguments: ["Tasks.BudgetSec", "Fetch.WakeBudgetSec", "RemoteNotifications.WakeBudgetSec",
                      "Scheduler.ChunkSec"])
    func zeroIsRefusedWherePositiveIsRequired(_ key: String) throws {
        let section = key.split(separator: ".")[0], name = key.split(separator: ".")[1]
        let error = try #require(failure("[\(section)]\n\(name)=0\n", file: "zero.conf"))
        #expect(error.origin == .init(file: "zero.conf", line: 2))
        #expect(error.key == key)
        #expect(error.reason.contains("greater than 0"))
    }

    /// 1e-9 passed "greater than 0" and became a budget or chunk of 0 µs: a
    /// chunk of 0 froze and thawed apps in a busy loop that flooded the log.
    /// (Wake budgets start at a millisecond: see the next test.)
    @Test(arguments: ["Tasks.BudgetSec"])
    func positiveTimesUnderAMicrosecondAreRefused(_ key: String) throws {
        for value in ["1e-9", "1e-300", "0.0000004"] {
            let error = try #require(overrideFailure("\(key)=\(value)"))
            #expect(error.key == key)
            #expect(error.reason.contains("microsecond") && error.reason.contains(value), "\(error.reason)")
        }
        var configuration = BundledPluginKeys.configuration()
        try configuration.apply(override: "\(key)=0.000001")
    }

    /// A wake budget past a day (or under a millisecond) loaded, and then
    /// every wake of the mode failed: the host gives wakes 1 ms to a day.
    @Test(arguments: ["Fetch.WakeBudgetSec", "RemoteNotifications.WakeBudgetSec", "Location.WakeBudgetSec", "Transfers.WakeBudgetSec"])
    func wakeBudgetsAreWhatTheHostGivesWakes(_ key: String) throws {
        for value in ["86401", "100000", "0.0005", "1e-9"] {
            let error = try #require(overrideFailure("\(key)=\(value)"), "\(value)")
            #expect(error.key == key)
        }
        var configuration = BundledPluginKeys.configuration()
        try configuration.apply(override: "\(key)=86400")
    }

    @Test func aChunkTooShortToFreezeBetweenIsRefused() throws {
        for value in ["0.001", "0.099", "1e-9"] {
            let error = try #require(overrideFailure("Scheduler.ChunkSec=\(value)"))
            #expect(error.key == "Scheduler.ChunkSec")
            #expect(error.reason.contains("at least 0.1"), "\(error.reason)")
        }
        var configuration = BundledPluginKeys.configuration()
        try configuration.apply(override: "Scheduler.ChunkSec=0.1")
        #expect(configuration.taskPolicy.chunk == .milliseconds(100))
    }

    @Test(arguments: ["Tasks.WarningSec", "Tasks.KillGraceSec", "Fetch.MinimumIntervalSec",
                      "RemoteNotifications.SilentPerHour"])
    func zeroIsAllowedWhereItMeansNone(_ key: String) throws {
        var configuration = BundledPluginKeys.configuration()
        try configuration.apply(override: "\(key)=0")
        #expect(configuration.value(of: key) == "0")
    }

    @Test(arguments: ["Tasks.MaxPerConnection", "RemoteNotifications.MaxPayloadBytes", "Scheduler.MaxConcurrentWakes"])
    func wholeNumberKeysNeedAtLeastOne(_ key: String) throws {
        let error = try #require(overrideFailure("\(key)=0"))
        #expect(error.key == key)
        #expect(error.reason.contains("at least 1"))
    }

    @Test(arguments: ["1.5", "1e2", "many", "-3"])
    func wholeNumberKeysRefuseOtherNumbers(_ value: String) throws {
        let error = try #require(failure("[RemoteNotifications]\nSilentPerHour=\(value)\n"))
        #expect(error.origin.line == 2)
        #expect(error.key == "RemoteNotifications.SilentPerHour")
        #expect(error.reason.contains(value))
    }

    @Test func hugeDurationsAreRefused() {
        var configuration = BundledPluginKeys.configuration()
        let error = #expect(throws: Configuration.ParseError.self) { try configuration.apply(override: "Tasks.BudgetSec=1e300") }
        #expect(error?.reason == "must be at most 1000000000, got 1e300")
        let huge = #expect(throws: Configuration.ParseError.self) {
            try configuration.apply(override: "Tasks.MaxPerConnection=9223372036854775807")
        }
        #expect(huge?.key == "Tasks.MaxPerConnection")
        #expect(huge?.reason.contains("at most") == true)
        let overflow = #expect(throws: Configuration.ParseError.self) {
            try configuration.apply(override: "Tasks.MaxPerConnection=99999999999999999999")
        }
        #expect(overflow?.reason.contains("not a whole number") == true)
    }

    // MARK: Structure

    @Test func unknownKeyNamesSectionAndKey() throws {
        let error = try #require(failure("[Tasks]\nBudgetSec=30\nBudgetSecs=30\n"))
        #expect(error.origin.line == 3)
        #expect(error.key == "Tasks.BudgetSecs")
        #expect(error.reason == "unknown key")
        #expect(error.description == "/etc/bgtaskd/bgtaskd.conf:3: Tasks.BudgetSecs: unknown key")
    }

    @Test func keyOfAnotherSectionIsUnknown() throws {
        let error = try #require(failure("[Fetch]\nBudgetSec=30\n"))
        #expect(error.key == "Fetch.BudgetSec")
        #expect(error.reason == "unknown key")
    }

    @Test(arguments: ["[Taks]", "[tasks]", "[Tasks.BudgetSec]", "[Fetch.MinimumInterval]", "[ Tasks ]"])
    func unknownSectionNamesLine(_ header: String) throws {
        let error = try #require(failure("# settings\n\(header)\nBudgetSec=30\n"))
        #expect(error.origin.line == 2)
        #expect(error.reason.contains("unknown section"))
        #expect(error.description.hasPrefix("/etc/bgtaskd/bgtaskd.conf:2: "))
    }

    @Test(arguments: ["[Tasks", "[]", "[Tasks] # comment"])
    func malformedSectionHeader(_ header: String) throws {
        let error = try #require(failure("\n\(header)\n"))
        #expect(error.origin.line == 2)
        #expect(error.reason.contains("section header"))
    }

    @Test func keyOutsideOfSection() throws {
        let error = try #require(failure("# no section yet\nBudgetSec = 30\n[Tasks]\n"))
        #expect(error.origin.line == 2)
        #expect(error.key == "BudgetSec")
        #expect(error.reason.contains("outside of any [Section]"))
    }

    @Test func lineWithoutEquals() throws {
        let error = try #require(failure("[Tasks]\nBudgetSec 30\n"))
        #expect(error.origin.line == 2)
        #expect(error.reason.contains("Key=Value"))
    }

    @Test func errorInSecondFileNamesThatFile() throws {
        var configuration = BundledPluginKeys.configuration()
        try configuration.apply(iniText: "[Tasks]\nBudgetSec=30\n", file: "first.conf")
        let error = #expect(throws: Configuration.ParseError.self) {
            try configuration.apply(iniText: "[Tasks]\n\nWarningSec=x\n", file: "second.conf")
        }
        #expect(error?.origin == .init(file: "second.conf", line: 3))
        #expect(error?.key == "Tasks.WarningSec")
    }

    // MARK: Files and --set

    @Test func missingConfigFileNamesIt() throws {
        let directory = try TemporaryDirectory()
        let missing = directory.path("nope.conf")
        let error = #expect(throws: Configuration.ParseError.self) {
            try Configuration.load(
                configFiles: [missing], overrides: [],
                environment: ["XDG_CONFIG_HOME": directory.path("xdg"), "HOME": directory.path("home")])
        }
        #expect(error?.origin.file == missing)
        #expect(error?.description.contains(missing) == true)
        #expect(error?.reason == "no such file")
    }

    /// A configuration file that is a link to nothing read as "no such
    /// file" (for --config) or as no file at all (the standard ones: the
    /// user's settings silently not applied). It says what it is now.
    @Test func aConfigFileLinkedToNothingSaysSo() throws {
        let directory = try TemporaryDirectory()
        let link = directory.path("linked.conf")
        #expect(symlink(directory.path("gone/bgtaskd.conf"), link) == 0)
        let explicit = #expect(throws: Configuration.ParseError.self) {
            try Configuration.load(
                configFiles: [link], overrides: [],
                environment: ["XDG_CONFIG_HOME": directory.path("xdg"), "HOME": directory.path("home")])
        }
        func plain(_ path: String) -> String { path.replacingOccurrences(of: "//", with: "/") }
        #expect(explicit?.reason == "\(plain(link)) is a symbolic link to \(directory.path("gone/bgtaskd.conf")), which leads nowhere")
        // The folder a dotfiles manager links to, moved away: the standard file behind it was silently not read.
        try FileManager.default.createDirectory(atPath: directory.path("xdg"), withIntermediateDirectories: true)
        #expect(symlink(directory.path("gone/bgtaskd"), directory.path("xdg/bgtaskd")) == 0)
        let standard = #expect(throws: Configuration.ParseError.self) {
            try Configuration.load(
                configFiles: [], overrides: [],
                environment: ["XDG_CONFIG_HOME": directory.path("xdg"), "HOME": directory.path("home")])
        }
        #expect(standard?.origin.file == directory.path("xdg/bgtaskd/bgtaskd.conf"))
        #expect(standard?.reason == "\(plain(directory.path("xdg/bgtaskd"))) is a symbolic link to \(directory.path("gone/bgtaskd")), which leads nowhere")
        // A loop leads nowhere either; a link that leads somewhere is no problem.
        #expect(symlink("loop2", directory.path("loop1")) == 0 && symlink("loop1", directory.path("loop2")) == 0)
        #expect(DanglingLink.problem(with: directory.path("loop1")) == "\(plain(directory.path("loop1"))) is a symbolic link to loop2, which leads nowhere")
        #expect(symlink(directory.path("xdg"), directory.path("fine")) == 0)
        #expect(DanglingLink.problem(with: directory.path("fine")) == nil)
    }

    /// A configuration file of gigabytes (a wrong --config, a sparse file)
    /// was read whole into memory before it was refused: 850 MB and 35 s for
    /// 200 MB. It is refused by its size, and a FIFO or device is not read.
    @Test func aFileTooLargeOrNotRegularIsRefusedUnread() throws {
        let directory = try TemporaryDirectory()
        let huge = directory.path("huge.conf")
        #expect(FileManager.default.createFile(atPath: huge, contents: nil))
        #expect(truncate(huge, 2 << 30) == 0)
        let fifo = directory.path("fifo.conf")
        #expect(mkfifo(fifo, 0o600) == 0)
        func failure(_ path: String) -> Configuration.ParseError? {
            #expect(throws: Configuration.ParseError.self) {
                try Configuration.load(
                    configFiles: [path], overrides: [],
                    environment: ["XDG_CONFIG_HOME": directory.path("xdg"), "HOME": directory.path("home")])
            }
        }
        let started = ContinuousClock.now
        #expect(failure(huge)?.reason == "is \(2 << 30) bytes, more than a configuration file may be (\(Configuration.maximumFileSize))")
        #expect(ContinuousClock.now - started < .seconds(5), "refused without reading it")
        #expect(failure(fifo)?.reason == "is not a regular file")
        #expect(failure("/dev/null")?.reason == "is not a regular file")
        // A byte order mark is not part of the text; bytes that are not UTF-8 are refused.
        try directory.write("bom.conf", "\u{FEFF}[Tasks]\nBudgetSec=12\n")
        let configuration = try Configuration.load(
            configFiles: [directory.path("bom.conf")], overrides: [],
            environment: ["XDG_CONFIG_HOME": directory.path("xdg"), "HOME": directory.path("home")])
        #expect(configuration.taskBudgetSec == 12)
        #expect(FileManager.default.createFile(atPath: directory.path("latin1.conf"), contents: Data([0x5B, 0xE9, 0x5D, 0x0A])))
        #expect(failure(directory.path("latin1.conf"))?.reason == "is not UTF-8 text")
    }

    @Test func errorInConfigFileStopsLoadingWithItsLine() throws {
        let directory = try TemporaryDirectory()
        try directory.write("bad.conf", "[Tasks]\nBudgetSec=30\n\n[Scheduler]\nChunkSec=-5\n")
        let error = #expect(throws: Configuration.ParseError.self) {
            try Configuration.load(
                configFiles: [directory.path("bad.conf")], overrides: ["Tasks.BudgetSec=10"],
                environment: ["XDG_CONFIG_HOME": directory.path("xdg"), "HOME": directory.path("home")])
        }
        #expect(error?.origin == .init(file: directory.path("bad.conf"), line: 5))
        #expect(error?.key == "Scheduler.ChunkSec")
    }

    @Test func errorInUserFileNamesIt() throws {
        let directory = try TemporaryDirectory()
        try directory.write("xdg/bgtaskd/bgtaskd.conf", "[Tasks]\nMaxPerConnection=lots\n")
        let error = #expect(throws: Configuration.ParseError.self) {
            try Configuration.load(
                configFiles: [], overrides: [],
                environment: ["XDG_CONFIG_HOME": directory.path("xdg"), "HOME": directory.path("home")])
        }
        #expect(error?.origin == .init(file: directory.path("xdg/bgtaskd/bgtaskd.conf"), line: 2))
        #expect(error?.key == "Tasks.MaxPerConnection")
    }

    @Test func badSetValueNamesTheOverride() throws {
        let error = try #require(overrideFailure("Tasks.BudgetSec=abc"))
        #expect(error.origin.line == nil)
        #expect(error.key == "Tasks.BudgetSec")
        #expect(error.description == "--set 'Tasks.BudgetSec=abc': Tasks.BudgetSec: 'abc' is not a number of seconds")
    }

    @Test func unknownSetKeyNamesTheOverride() throws {
        let error = try #require(overrideFailure("Tasks.Bogus=1"))
        #expect(error.key == "Tasks.Bogus")
        #expect(error.description.contains("--set 'Tasks.Bogus=1'"))
        #expect(error.reason == "unknown key")
    }

    @Test(arguments: ["Tasks.BudgetSec", "BudgetSec=30", "=30", ""])
    func malformedSetNamesTheOverride(_ override: String) throws {
        let error = try #require(overrideFailure(override))
        #expect(error.description.contains("--set '\(override)'"))
    }

    @Test func badSetStopsLoad() throws {
        let directory = try TemporaryDirectory()
        let error = #expect(throws: Configuration.ParseError.self) {
            try Configuration.load(
                configFiles: [], overrides: ["Tasks.BudgetSec=5", "Scheduler.MaxConcurrentWakes=0"],
                environment: ["XDG_CONFIG_HOME": directory.path("xdg"), "HOME": directory.path("home")])
        }
        #expect(error?.origin.file == "--set 'Scheduler.MaxConcurrentWakes=0'")
        #expect(error?.key == "Scheduler.MaxConcurrentWakes")
    }
}
