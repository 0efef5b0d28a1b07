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
        ("RemoteNotifications.WakeBudgetSec", "30"),
        ("RemoteNotifications.SilentPerHour", "3"),
        ("RemoteNotifications.MaxPayloadBytes", "4096"),
        ("Location.WakeBudgetSec", "10"),
        ("Location.MaxRegionsPerApp", "20"),
        ("Location.MinRadiusM", "100"),
        ("Location.SignificantChangeM", "500"),
        ("Location.SignificantChangeMinIntervalSec", "300"),
        ("Scheduler.MaxConcurrentWakes", "2"),
        ("Scheduler.ChunkSec", "10"),
    ]

    // MARK: Defaults

    @Test func keysAreExactlyTheDesignTable() {
        #expect(Configuration.keys.map(\.name) == Self.designDefaults.map(\.key))
    }

    @Test(arguments: designDefaults)
    func defaultMatchesTheDesign(_ key: String, _ value: String) {
        #expect(Configuration().value(of: key) == value)
    }

    @Test func defaultsReachTheStoredProperties() {
        let configuration = Configuration()
        #expect(configuration.taskBudgetSec == 600)
        #expect(configuration.taskWarningSec == 5)
        #expect(configuration.taskKillGraceSec == 2)
        #expect(configuration.maxTasksPerConnection == 100)
        #expect(configuration.fetchWakeBudgetSec == 30)
        #expect(configuration.fetchMinimumIntervalSec == 900)
        #expect(configuration.pushWakeBudgetSec == 30)
        #expect(configuration.silentPushesPerHour == 3)
        #expect(configuration.maxPayloadBytes == 4096)
        #expect(configuration.locationWakeBudgetSec == 10)
        #expect(configuration.maxRegionsPerApp == 20)
        #expect(configuration.minRadiusM == 100)
        #expect(configuration.significantChangeM == 500)
        #expect(configuration.significantChangeMinIntervalSec == 300)
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
        var configuration = Configuration()
        try configuration.apply(iniText: """
            # bgtaskd.conf
            ; another comment style

              [Tasks]
              BudgetSec = 30\t
            WarningSec=\t1.5
            \tMaxPerConnection =7
                # an indented comment
            [Location]
            MinRadiusM=0
            SignificantChangeM=250.5

            """, file: "test.conf")
        #expect(configuration.taskBudgetSec == 30)
        #expect(configuration.taskWarningSec == 1.5)
        #expect(configuration.maxTasksPerConnection == 7)
        #expect(configuration.minRadiusM == 0)
        #expect(configuration.significantChangeM == 250.5)
        // Keys not mentioned keep their defaults.
        #expect(configuration.taskKillGraceSec == 2)
        #expect(configuration.chunkSec == 10)
    }

    @Test func emptyAndCommentOnlyFilesChangeNothing() throws {
        var configuration = Configuration()
        try configuration.apply(iniText: "", file: "empty.conf")
        try configuration.apply(iniText: "# nothing\n\n; here\n", file: "comments.conf")
        #expect(configuration == Configuration())
    }

    @Test func fractionalAndExponentNumbers() throws {
        var configuration = Configuration()
        try configuration.apply(override: "Tasks.BudgetSec=0.25")
        try configuration.apply(override: "Scheduler.ChunkSec=1e1")
        #expect(configuration.taskBudgetSec == 0.25)
        #expect(configuration.chunkSec == 10)
        #expect(configuration.taskPolicy.budget == .milliseconds(250))
        #expect(configuration.value(of: "Tasks.BudgetSec") == "0.25")
    }

    @Test func overrideReachesTheTaskPolicy() throws {
        var configuration = Configuration()
        for override in ["Tasks.BudgetSec=3", "Tasks.WarningSec=1", "Tasks.KillGraceSec=0.5", "Tasks.MaxPerConnection=4"] {
            try configuration.apply(override: override)
        }
        let policy = configuration.taskPolicy
        #expect(policy.budget == .seconds(3))
        #expect(policy.warning == .seconds(1))
        #expect(policy.killGrace == .milliseconds(500))
        #expect(policy.maxTasksPerConnection == 4)
    }

    @Test func overrideTrimsBlanksAroundKeyAndValue() throws {
        var configuration = Configuration()
        try configuration.apply(override: " Fetch.MinimumIntervalSec = 60 ")
        #expect(configuration.fetchMinimumIntervalSec == 60)
    }

    @Test func crlfLineEndingsAreAccepted() throws {
        var configuration = Configuration()
        try configuration.apply(iniText: "[Tasks]\r\nBudgetSec=30\r\nWarningSec=2\r\n", file: "crlf.conf")
        #expect(configuration.taskBudgetSec == 30)
        #expect(configuration.taskWarningSec == 2)
    }

    // MARK: Later sources win

    @Test func laterLineInOneFileWins() throws {
        var configuration = Configuration()
        try configuration.apply(iniText: "[Tasks]\nBudgetSec=30\n[Fetch]\nWakeBudgetSec=5\n[Tasks]\nBudgetSec=40\n", file: "a.conf")
        #expect(configuration.taskBudgetSec == 40)
        #expect(configuration.fetchWakeBudgetSec == 5)
    }

    @Test func laterFileWinsAndEarlierKeysStay() throws {
        var configuration = Configuration()
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
            configFile: directory.path("extra.conf"), overrides: ["Tasks.BudgetSec=300"],
            environment: ["XDG_CONFIG_HOME": directory.path("xdg"), "HOME": directory.path("home")])
        #expect(configuration.taskBudgetSec == 300)  // --set beats --config
        #expect(configuration.taskWarningSec == 4)  // --config beats the user file
        #expect(configuration.taskKillGraceSec == 1)  // the user file beats the default
        #expect(configuration.maxTasksPerConnection == 100)
    }

    @Test func laterOverrideWins() throws {
        let directory = try TemporaryDirectory()
        let configuration = try Configuration.load(
            configFile: nil, overrides: ["Scheduler.ChunkSec=5", "Scheduler.ChunkSec=7"],
            environment: ["XDG_CONFIG_HOME": directory.path("none"), "HOME": directory.path("home")])
        #expect(configuration.chunkSec == 7)
    }

    @Test(arguments: [nil, ""])
    func userFileFallsBackToHomeDotConfig(_ xdgConfigHome: String?) throws {
        let directory = try TemporaryDirectory()
        try directory.write("home/.config/bgtaskd/bgtaskd.conf", "[Scheduler]\nMaxConcurrentWakes=5\n")
        var environment = ["HOME": directory.path("home")]
        environment["XDG_CONFIG_HOME"] = xdgConfigHome
        let configuration = try Configuration.load(configFile: nil, overrides: [], environment: environment)
        #expect(configuration.maxConcurrentWakes == 5)
    }

    @Test func missingUserFileIsFine() throws {
        let directory = try TemporaryDirectory()
        let configuration = try Configuration.load(
            configFile: nil, overrides: [],
            environment: ["XDG_CONFIG_HOME": directory.path("nothing-here"), "HOME": directory.path("home")])
        #expect(configuration.taskBudgetSec == 600)
    }
}
