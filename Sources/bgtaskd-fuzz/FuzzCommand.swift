import ArgumentParser
import Foundation

/// `bgtaskd-fuzz`: fuzzes a real bgtaskd on a private bus with calls derived
/// from the introspection XML, and reports crashes, hangs, leaks, error
/// names outside the contract and failed restarts.
struct FuzzCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "bgtaskd-fuzz",
        abstract: "Fuzzes bgtaskd over D-Bus with typed, extreme and random calls from its introspection XML.",
        discussion: """
            Starts a dbus-daemon of its own and bgtaskd on it (temporary state, home and desktop \
            entries; no system bus), calls every method of every interface the daemon exports: each \
            argument at every extreme of its type, wrong signatures, then seeded random calls and \
            sequences that make state. Every call must be answered within --timeout; the daemon must \
            stay alive, answer Ping, use only org.freedesktop.DBus.Error.* and its documented errors, \
            not grow by more than --leak-threshold, exit 0 on SIGTERM and restart on the state the \
            run left. Exits 0 only when there are no findings (1 with findings, 2 when the fuzzer \
            itself could not run). The daemon runs with Tasks.BudgetSec and the Fetch, \
            RemoteNotifications, Location and Transfers WakeBudgetSec raised to a day: the fuzzer's own connections play the \
            apps, and the daemon would otherwise terminate the fuzzer for overstaying.

            --huge-options instead measures one DeliverPush with a million unknown option keys \
            against the latency of GetBackgroundTimeRemaining from a second connection.
            """)

    @Option(help: "Total calls. The typed and signature phases (about 1,300 calls) always run in full; random calls fill up the rest.")
    var calls = 20000

    @Option(help: "Seed of the random phase (the same seed makes the same calls).")
    var seed: UInt64 = 1

    @Flag(help: "A short run for the test suite: 4,000 calls, few values over 64 KiB, short settle and restart.")
    var quick = false

    @Option(help: ArgumentHelp("Seconds a call may take before it counts as a hang.", valueName: "SECONDS"))
    var timeout = 5.0

    @Option(help: ArgumentHelp("Resident memory growth over the run that counts as a leak.", valueName: "MIB"))
    var leakThreshold = 16.0

    @Option(help: ArgumentHelp("The introspection XML (default: dbus/org.bgtaskd.BackgroundTasks1.xml of the repository).", valueName: "PATH"))
    var xml: String?

    @Option(help: ArgumentHelp("The bgtaskd executable (default: beside this one).", valueName: "PATH"))
    var bgtaskd: String?

    @Option(help: ArgumentHelp("Where libbgtaskd-mode-*.so are (default: beside this executable).", valueName: "DIR"))
    var pluginDir: String?

    @Option(help: ArgumentHelp("The dbus-daemon executable.", valueName: "PATH"))
    var dbusDaemon = "/usr/bin/dbus-daemon"

    @Option(name: .customLong("daemon-set"), help: ArgumentHelp("An extra --set for bgtaskd (repeatable).", valueName: "Section.Key=VALUE"))
    var daemonSettings: [String] = []

    @Option(help: ArgumentHelp("Seconds the daemon restarted on the run's state is called for.", valueName: "SECONDS"))
    var restartSeconds: Double?

    @Flag(help: "Do not reduce crashes and hangs to the fewest calls that reproduce them.")
    var noReduce = false

    @Flag(help: "Print the report as JSON.")
    var json = false

    @Flag(help: "Keep the temporary directory (logs, state) and print where it is.")
    var keep = false

    @Flag(help: "Print progress to standard error.")
    var verbose = false

    @Flag(help: "Measure one DeliverPush with --huge-keys unknown option keys instead of fuzzing.")
    var hugeOptions = false

    @Option(help: "Unknown option keys in the --huge-options call.")
    var hugeKeys = 1_000_000

    mutating func run() throws {
        InterruptCleanup.install()
        let directory = Self.ownDirectory
        let settings = Harness.Settings(
            bgtaskd: bgtaskd ?? directory + "/bgtaskd", pluginDirectory: pluginDir ?? directory,
            dbusDaemon: dbusDaemon, daemonSettings: daemonSettings)
        let harness: Harness
        do {
            harness = try Harness(settings: settings)
        } catch {
            Console.error("\(error)")
            throw ExitCode(2)
        }
        defer {
            harness.shutdown(keep: keep)
            if keep { Console.error("logs and state kept in \(harness.workspace.root)") }
        }
        if hugeOptions {
            let result: HugeOptionsProbe.Result
            do {
                result = try HugeOptionsProbe(harness: harness, keys: hugeKeys, timeout: max(timeout, 300)).run()
            } catch {
                Console.error("\(error)")
                throw ExitCode(2)
            }
            print(json ? Self.encode(result) : result.text())
            return
        }

        let xmlPath = xml ?? Self.findContract(from: directory)
        guard let xmlPath, let text = FileManager.default.contents(atPath: xmlPath) else {
            Console.error("cannot find the introspection XML; give it with --xml")
            throw ExitCode(2)
        }
        let contract: InterfaceModel
        do {
            contract = try InterfaceModel(xml: String(decoding: text, as: UTF8.self))
        } catch {
            Console.error("\(xmlPath): \(error)")
            throw ExitCode(2)
        }
        var runSettings = FuzzRun.Settings(
            calls: quick ? min(calls, 4000) : calls, seed: seed, quick: quick, timeout: timeout,
            leakThresholdKiB: Int(leakThreshold * 1024))
        if quick {
            runSettings.settleSeconds = 0.5
            runSettings.restartSeconds = 2
            runSettings.heavyChance = 0.01
        }
        if let restartSeconds { runSettings.restartSeconds = restartSeconds }
        runSettings.reduce = !noReduce
        runSettings.verbose = verbose
        let report: FuzzReport
        do {
            report = try FuzzRun(settings: runSettings, harness: harness, contract: contract, xmlPath: xmlPath).run()
        } catch {
            Console.error("\(error)")
            throw ExitCode(2)
        }
        print(json ? report.json() : report.text())
        if !report.passed { throw ExitCode(1) }
    }

    /// The directory of this executable (its siblings are the daemon and plugins).
    static var ownDirectory: String {
        let executable = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
        return URL(fileURLWithPath: executable).deletingLastPathComponent().path
    }

    /// `dbus/org.bgtaskd.BackgroundTasks1.xml` in a directory above the
    /// executable or the working directory, else in the source tree it was built from.
    static func findContract(from directory: String) -> String? {
        let relative = "dbus/org.bgtaskd.BackgroundTasks1.xml"
        for start in [directory, FileManager.default.currentDirectoryPath] {
            var url = URL(fileURLWithPath: start)
            while url.path != "/" {
                let candidate = url.appendingPathComponent(relative).path
                if FileManager.default.fileExists(atPath: candidate) { return candidate }
                url.deleteLastPathComponent()
            }
        }
        let source = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let candidate = source.appendingPathComponent(relative).path
        return FileManager.default.fileExists(atPath: candidate) ? candidate : nil
    }

    static func encode(_ value: some Encodable) -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        return (try? encoder.encode(value)).map { String(decoding: $0, as: UTF8.self) } ?? "{}"
    }
}
