@testable import BgTaskDaemon
import BgTaskCore
import Foundation
import Testing

/// Defaults, INI parsing and the order of sources (docs/DESIGN.md §2).
@Suite struct ConfigurationTests {
    /// docs/DESIGN.md §2's table, verbatim.
    static let designDefaults: [(key: String, value: String)] = [
        ("Tasks.BudgetSec", "600"),
        ("Tasks.WarningSec", "5"),
        ("Tasks.KillGraceSec", "2"),
        ("Tasks.MaxPerConnection", "100"),
        ("Fetch.WakeBudgetSec", "30"),
        ("Fetch.MinimumIntervalSec", "900"),
        ("Fetch.MaximumSpacingSec", "21600"),
        ("RemoteNotifications.WakeBudgetSec", "30"),
        ("RemoteNotifications.SilentPerHour", "3"),
        ("RemoteNotifications.MaxPayloadBytes", "4096"),
        ("Location.WakeBudgetSec", "10"),
        ("Location.MaxRegionsPerApp", "20"),
        ("Location.MinRadiusM", "100"),
        ("Location.SignificantChangeM", "500"),
        ("Location.SignificantChangeMinIntervalSec", "300"),
        ("Location.DwellSec", "20"),
        ("Transfers.WakeBudgetSec", "30"),
        ("Transfers.MaxConcurrent", "4"),
        ("Transfers.MaxPerApp", "5000"),
        ("Transfers.TurnSec", "300"),
        ("Scheduler.MaxConcurrentWakes", "2"),
        ("Scheduler.ChunkSec", "10"),
    ]

    // MARK: Defaults

    /// The engine's keys, then those the fetch, location, remote-notification and transfer plugins declare.
    @Test func keysAreExactlyTheDesignTable() {
        #expect(Set(BundledPluginKeys.configuration().keys.map(\.name)) == Set(Self.designDefaults.map(\.key)))
        #expect(Configuration.engineKeys.allSatisfy { $0.plugin == nil })
        #expect(BundledPluginKeys.keys.map(\.plugin) == ["fetch", "fetch", "fetch"] + Array(repeating: "location", count: 6)
            + ["remote-notification", "remote-notification", "remote-notification"] + Array(repeating: "transfer", count: 4))
    }

    @Test(arguments: designDefaults)
    func defaultMatchesTheDesign(_ key: String, _ value: String) {
        #expect(BundledPluginKeys.configuration().value(of: key) == value)
    }

    /// A section of a mode whose plugin is not loaded names the missing plugin.
    @Test func keyOfAModeWithoutItsPluginNamesThePlugin() throws {
        var configuration = Configuration()
        let error = #expect(throws: Configuration.ParseError.self) { try configuration.apply(override: "Fetch.WakeBudgetSec=5") }
        #expect(error?.reason == "[Fetch] belongs to the fetch mode, whose plugin (libbgtaskd-mode-fetch.so) is not loaded")
        let location = #expect(throws: Configuration.ParseError.self) {
            try configuration.apply(iniText: "[Location]\nMinRadiusM=0\n", file: "l.conf")
        }
        #expect(location?.description == "l.conf:1: [Location] belongs to the location mode, whose plugin (libbgtaskd-mode-location.so) is not loaded")
    }

    @Test func defaultsReachTheStoredProperties() {
        let configuration = Configuration()
        #expect(configuration.taskBudgetSec == 600)
        #expect(configuration.taskWarningSec == 5)
        #expect(configuration.taskKillGraceSec == 2)
        #expect(configuration.maxTasksPerConnection == 100)
        #expect(configuration.maxConcurrentWakes == 2)
        #expect(configuration.chunkSec == 10)
    }

    @Test func defaultTaskPolicyIsTheSeedsOne() {
        let policy = Configuration().taskPolicy
        #expect(policy.budget == .seconds(600))
        #expect(policy.warning == .seconds(5))
        #expect(policy.killGrace == .seconds(2))
        #expect(policy.maxTasksPerConnection == 100)
    }

    @Test func unknownKeyHasNoValue() {
        #expect(Configuration().value(of: "Tasks.Bogus") == nil)
        #expect(Configuration().value(of: "BudgetSec") == nil)
    }

    // MARK: INI parsing

    @Test func sectionsCommentsAndWhitespace() throws {
        var configuration = BundledPluginKeys.configuration()
        try configuration.apply(iniText: """
            # bgtaskd.conf
            ; another comment style

              [Tasks]
              BudgetSec = 30\t
            WarningSec=\t1.5
            \tMaxPerConnection =7
                # an indented comment
            [RemoteNotifications]
            SilentPerHour=0
            WakeBudgetSec=250.5

            """, file: "test.conf")
        #expect(configuration.taskBudgetSec == 30)
        #expect(configuration.taskWarningSec == 1.5)
        #expect(configuration.maxTasksPerConnection == 7)
        #expect(configuration.value(of: "RemoteNotifications.SilentPerHour") == "0")
        #expect(configuration.value(of: "RemoteNotifications.WakeBudgetSec") == "250.5")
        // Keys not mentioned keep their defaults.
        #expect(configuration.taskKillGraceSec == 2)
        #expect(configuration.chunkSec == 10)
    }

    @Test func emptyAndCommentOnlyFilesChangeNothing() throws {
        var configuration = BundledPluginKeys.configuration()
        try configuration.apply(iniText: "", file: "empty.conf")
        try configuration.apply(iniText: "# nothing\n\n; here\n", file: "comments.conf")
        let defaults = BundledPluginKeys.configuration()
        #expect(configuration.keys.map { configuration.value(of: $0.name) } == defaults.keys.map { defaults.value(of: $0.name) })
    }

    @Test func fractionalAndExponentNumbers() throws {
        var configuration = BundledPluginKeys.configuration()
        try configuration.apply(override: "Tasks.BudgetSec=0.25")
        try configuration.apply(override: "Scheduler.ChunkSec=1e1")
        #expect(configuration.taskBudgetSec == 0.25)
        #expect(configuration.chunkSec == 10)
        #expect(configuration.taskPolicy.budget == .milliseconds(250))
        #expect(configuration.value(of: "Tasks.BudgetSec") == "0.25")
    }

    @Test func overrideReachesTheTaskPolicy() throws {
        var configuration = BundledPluginKeys.configuration()
        for override in ["Tasks.BudgetSec=3", "Tasks.WarningSec=1", "Tasks.KillGraceSec=0.5", "Tasks.MaxPerConnection=4"] {
            try configuration.apply(override: override)
        }
        let policy = configuration.taskPolicy
        #expect(policy.budget == .seconds(3))
        #expect(policy.warning == .seconds(1))
        #expect(policy.killGrace == .milliseconds(500))
        #expect(policy.maxTasksPerConnection == 4)
    }

    /// `--set =5` said "unknown section []": an override without a section
    /// or a key is named as the form it misses.
    @Test(arguments: ["=5", "Tasks.=5", ".BudgetSec=5", "Tasks=5"])
    func anOverrideWithoutSectionOrKeySaysSo(_ override: String) {
        var configuration = BundledPluginKeys.configuration()
        let error = #expect(throws: Configuration.ParseError.self) { try configuration.apply(override: override) }
        #expect(error?.description.contains("expected Section.Key=VALUE") == true, "\(String(describing: error))")
        #expect(error?.description.contains("unknown") == false, "\(String(describing: error))")
    }

    @Test func overrideTrimsBlanksAroundKeyAndValue() throws {
        var configuration = BundledPluginKeys.configuration()
        try configuration.apply(override: " Fetch.MinimumIntervalSec = 60 ")
        #expect(configuration.value(of: "Fetch.MinimumIntervalSec") == "60")
    }

    @Test func crlfLineEndingsAreAccepted() throws {
        var configuration = BundledPluginKeys.configuration()
        try configuration.apply(iniText: "[Tasks]\r\nBudgetSec=30\r\nWarningSec=2\r\n", file: "crlf.conf")
        #expect(configuration.taskBudgetSec == 30)
        #expect(configuration.taskWarningSec == 2)
    }

    // MARK: Later sources win

    @Test func laterLineInOneFileWins() throws {
        var configuration = BundledPluginKeys.configuration()
        try configuration.apply(iniText: "[Tasks]\nBudgetSec=30\n[Fetch]\nWakeBudgetSec=5\n[Tasks]\nBudgetSec=40\n", file: "a.conf")
        #expect(configuration.taskBudgetSec == 40)
        #expect(configuration.value(of: "Fetch.WakeBudgetSec") == "5")
    }

    @Test func laterFileWinsAndEarlierKeysStay() throws {
        var configuration = BundledPluginKeys.configuration()
        try configuration.apply(iniText: "[Tasks]\nBudgetSec=30\nWarningSec=3\n", file: "first.conf")
        try configuration.apply(iniText: "[Tasks]\nBudgetSec=60\n", file: "second.conf")
        #expect(configuration.taskBudgetSec == 60)
        #expect(configuration.taskWarningSec == 3)
    }

    @Test func loadReadsUserFileThenConfigThenSet() throws {
        let directory = try TemporaryDirectory()
        try directory.write("xdg/bgtaskd/bgtaskd.conf", "[Tasks]\nBudgetSec=100\nWarningSec=3\nKillGraceSec=1\n")
        try directory.write("extra.conf", "[Tasks]\nBudgetSec=200\nWarningSec=4\n")
        let configuration = try Configuration.load(
            configFiles: [directory.path("extra.conf")], overrides: ["Tasks.BudgetSec=300"],
            environment: ["XDG_CONFIG_HOME": directory.path("xdg"), "HOME": directory.path("home")])
        #expect(configuration.taskBudgetSec == 300)  // --set beats --config
        #expect(configuration.taskWarningSec == 4)  // --config beats the user file
        #expect(configuration.taskKillGraceSec == 1)  // the user file beats the default
        #expect(configuration.maxTasksPerConnection == 100)
    }

    /// A relative XDG_CONFIG_HOME was read relative to the working directory;
    /// the XDG spec says to ignore it: $HOME/.config stands in.
    @Test func aRelativeConfigHomeMeansTheDefault() throws {
        let directory = try TemporaryDirectory()
        try directory.write("home/.config/bgtaskd/bgtaskd.conf", "[Tasks]\nBudgetSec=123\n")
        let configuration = try Configuration.load(
            configFiles: [], overrides: [], environment: ["XDG_CONFIG_HOME": "relative/xdg", "HOME": directory.path("home")])
        #expect(configuration.taskBudgetSec == 123)
    }

    @Test func laterOverrideWins() throws {
        let directory = try TemporaryDirectory()
        let configuration = try Configuration.load(
            configFiles: [], overrides: ["Scheduler.ChunkSec=5", "Scheduler.ChunkSec=7"],
            environment: ["XDG_CONFIG_HOME": directory.path("none"), "HOME": directory.path("home")])
        #expect(configuration.chunkSec == 7)
    }

    @Test(arguments: [nil, ""])
    func userFileFallsBackToHomeDotConfig(_ xdgConfigHome: String?) throws {
        let directory = try TemporaryDirectory()
        try directory.write("home/.config/bgtaskd/bgtaskd.conf", "[Scheduler]\nMaxConcurrentWakes=5\n")
        var environment = ["HOME": directory.path("home")]
        environment["XDG_CONFIG_HOME"] = xdgConfigHome
        let configuration = try Configuration.load(configFiles: [], overrides: [], environment: environment)
        #expect(configuration.maxConcurrentWakes == 5)
    }

    @Test func missingUserFileIsFine() throws {
        let directory = try TemporaryDirectory()
        let configuration = try Configuration.load(
            configFiles: [], overrides: [],
            environment: ["XDG_CONFIG_HOME": directory.path("nothing-here"), "HOME": directory.path("home")])
        #expect(configuration.taskBudgetSec == 600)
    }
}
