public import ArgumentParser
import BgTaskPluginABI
import BgTaskProtocol
import Foundation
import Logging
import SDBus

/// `bgtaskd`: the command line of docs/DESIGN.md §2.
public struct DaemonCommand: ParsableCommand {
    /// Built once: ArgumentParser reads it many times while it parses.
    public static let configuration = CommandConfiguration(
        commandName: "bgtaskd",
        abstract: "Background execution for Linux desktop apps, the iOS way, over D-Bus.",
        discussion: """
            Apps ask for time to finish work after they leave the foreground \
            (BeginBackgroundTask/EndBackgroundTask on org.bgtaskd.BackgroundTasks1); \
            bgtaskd warns them before their deadline and terminates those that overstay.

            Configuration is read from /etc/bgtaskd/bgtaskd.conf, then \
            $XDG_CONFIG_HOME/bgtaskd/bgtaskd.conf, then --config, then --set (later wins). \
            The daemon's keys and those the plugins in the plugin directories \
            (--plugin-dir, else the default) declare (defaults in seconds unless named otherwise):
            \(helpKeys())

            The daemon is ready once it owns the bus name; under systemd it also sends READY=1. \
            SIGTERM, SIGINT or SIGHUP stops it cleanly (exit 0); a state database deleted or replaced \
            while it runs stops it with 74. Start-up stops with: 78, a bad \
            configuration (naming file, line and key); 65, a state database it must not touch \
            (damaged, another program's, from a newer bgtaskd, empty but not new, or in use by \
            another bgtaskd); 74, a full disk under the state directory (or under the \
            --bus-introspect file); 73, a state directory \
            (or --bus-introspect file) it cannot create, or one it cannot write (a read-only mount, another owner); 69, no bus, the bus name is taken, or the bus went away; \
            64, a command line it does not understand.
            """,
        version: "bgtaskd \(BgTaskNames.releaseVersion) (D-Bus API \(BgTaskNames.apiVersion), "
            + "plugin ABI \(BGTASKD_PLUGIN_ABI_MAJOR).\(BGTASKD_PLUGIN_ABI_MINOR))")

    /// The keys for `--help`: the engine's, then each plugin's under its
    /// name, from the `--plugin-dir` on the command line (ArgumentParser
    /// builds help before it parses), else the default directories. The
    /// plugins are looked at only when help is asked for: a start looks
    /// for them once, in ``run()``, with its refusals logged.
    private static func helpKeys() -> String {
        let arguments = Array(CommandLine.arguments.dropFirst())
        let asksForHelp = arguments.contains { ["-h", "--help", "help"].contains($0) }
        // Quiet: refusals are the business of a real start, not of --help.
        let quiet = Logger(label: "bgtaskd-help") { _ in SwiftLogNoOpLogHandler() }
        let directories = helpPluginDirectories(arguments).map { PluginLoader.directories($0) } ?? PluginLoader.defaultDirectories()
        let candidates = asksForHelp ? PluginLoader(logger: quiet).candidates(in: directories) : []
        let configuration = Configuration(pluginKeys: candidates.flatMap(\.configKeys))
        return configuration.keys.map { key in
            let owner = key.plugin.map { "  (\($0) plugin)" } ?? ""
            return "  \(key.name)=\(configuration.value(of: key.name) ?? "")  \(key.summary)\(owner)"
        }.joined(separator: "\n")
    }

    /// The last `--plugin-dir DIRS` or `--plugin-dir=DIRS` of `arguments`, split at colons; nil without one.
    static func helpPluginDirectories(_ arguments: [String]) -> [String]? {
        var found: String?
        for (index, argument) in arguments.enumerated() {
            if argument == "--plugin-dir", index + 1 < arguments.count {
                found = arguments[index + 1]
            } else if argument.hasPrefix("--plugin-dir=") {
                found = String(argument.dropFirst("--plugin-dir=".count))
            }
        }
        return found.map { $0.split(separator: ":").map(String.init) }
    }

    @Option(name: .long, help: ArgumentHelp("Bus to serve on: session, system or a D-Bus address such as unix:path=/tmp/bus.", valueName: "session|system|ADDRESS"))
    var bus: String = "session"

    @Option(name: .long, help: ArgumentHelp("Directory for the daemon's state (default $XDG_STATE_HOME/bgtaskd).", valueName: "DIR"))
    var stateDir: String?

    @Option(name: .long, help: ArgumentHelp("Colon-separated directories to load mode plugins from.", valueName: "DIR[:DIR...]"))
    var pluginDir: String?

    @Option(name: .long, help: ArgumentHelp("Configuration file read after the standard ones (repeatable: read in the order given).", valueName: "FILE"))
    var config: [String] = []

    @Option(name: .customLong("set"), help: ArgumentHelp("Override one key, e.g. --set Tasks.BudgetSec=30 (repeatable).", valueName: "Section.Key=VALUE"))
    var overrides: [String] = []

    @Option(name: .long, help: ArgumentHelp("Write the D-Bus introspection XML of the daemon's interfaces to FILE ('-' for stdout) and exit.", valueName: "FILE"))
    var busIntrospect: String?

    @Option(name: .long, help: ArgumentHelp(
        "Least severe log level: trace, debug, info, notice, warning, error, critical (default: $BGTASKD_LOG_LEVEL, else info).",
        valueName: "LEVEL"))
    var logLevel: String?

    public init() {}

    /// What the system said of a failed file operation ("Not a directory"),
    /// rather than Foundation's "The operation could not be completed".
    static func why(_ error: any Error) -> String {
        let nsError = error as NSError
        if let underlying = nsError.userInfo[NSUnderlyingErrorKey] as? any Error {
            let posix = underlying as NSError
            if posix.domain == NSPOSIXErrorDomain { return String(cString: strerror(Int32(posix.code))) }
        }
        if nsError.domain == NSPOSIXErrorDomain { return String(cString: strerror(Int32(nsError.code))) }
        return error.localizedDescription
    }

    public func validate() throws {
        // An empty value would be read as an address, or a directory, named "".
        if let problem = Bus.Address.problem(with: bus) { throw ValidationError("--bus: \(problem)") }
        if stateDir?.isEmpty == true { throw ValidationError("--state-dir needs a directory") }
        // Split at colons, "" and ":" name no directory: the default ones would be loaded unasked.
        if let pluginDir, pluginDirectories.isEmpty {
            throw ValidationError("--plugin-dir needs a directory, not '\(pluginDir)'")
        }
        if config.contains("") { throw ValidationError("--config needs a file") }
        if busIntrospect?.isEmpty == true { throw ValidationError("--bus-introspect needs a file, or '-' for standard output") }
    }

    public func run() throws {
        // The default is worked out here: as the option's own, --help showed a second one.
        let fromEnvironment = logLevel == nil ? ProcessInfo.processInfo.environment["BGTASKD_LOG_LEVEL"] : nil
        let logLevel = logLevel ?? fromEnvironment ?? "info"
        guard let level = Logger.Level(rawValue: logLevel) else {
            let levels = Logger.Level.allCases.map(\.rawValue).joined(separator: ", ")
            let source = fromEnvironment != nil ? " (from BGTASKD_LOG_LEVEL)" : ""
            throw ValidationError("unknown log level '\(logLevel)'\(source): one of \(levels)")
        }
        // Describing the interfaces tells only of what is wrong.
        LoggingSystem.bootstrap { StandardErrorLogHandler(label: $0, level: busIntrospect == nil ? level : max(level, .warning)) }
        let logger = Logger(label: "bgtaskd")

        // The plugins come first: their keys are part of the configuration.
        let candidates = PluginLoader(logger: logger).candidates(in: PluginLoader.directories(pluginDirectories))
        let configuration: Configuration
        do {
            configuration = try Configuration.load(
                configFiles: config, overrides: overrides, pluginKeys: candidates.flatMap(\.configKeys))
        } catch {
            logger.critical("bad configuration: \(error)")
            throw ExitCode(78)  // EX_CONFIG: systemd should not restart into the same error
        }
        if let busIntrospect {
            return try writeIntrospection(to: busIntrospect, candidates: candidates, configuration: configuration, logger: logger)
        }
        let environment = ProcessInfo.processInfo.environment
        var stateDirectory = stateDir ?? Self.defaultStateDirectory(environment)
        if let problem = DanglingLink.problem(with: stateDirectory) {
            logger.critical("cannot use the state directory \(stateDirectory): \(problem)")
            throw ExitCode(73)  // EX_CANTCREAT
        }
        var isDirectory: ObjCBool = false
        if FileManager.default.fileExists(atPath: stateDirectory, isDirectory: &isDirectory), !isDirectory.boolValue {
            logger.critical("cannot use the state directory \(stateDirectory): it is a file, not a directory")
            throw ExitCode(73)  // EX_CANTCREAT
        }
        do {
            try FileManager.default.createDirectory(
                atPath: stateDirectory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        } catch {
            logger.critical("cannot create the state directory \(stateDirectory): \(Self.why(error))")
            throw ExitCode(73)  // EX_CANTCREAT
        }
        // One name for one directory: the cgroups of launched apps are named
        // after it, and a restart that spelled it otherwise (relative, through
        // a link) did not take back the apps its predecessor launched.
        if let resolved = realpath(stateDirectory, nil) {
            stateDirectory = String(cString: resolved)
            free(resolved)
        }
        var settings = Daemon.Settings(
            configuration: configuration, bus: Bus.Address(parsing: bus), stateDirectory: stateDirectory,
            pluginDirectories: pluginDirectories)
        settings.pluginCandidates = candidates
        do {
            let daemon = try Daemon(settings: settings, logger: logger)
            let code = try daemon.run()
            if code != 0 { throw ExitCode(code) }
        } catch let error as BusError {
            logger.critical("\(error.message)\(Self.sessionBusHint(for: error, bus: bus, environment: environment))", metadata: ["error": "\(error.name)"])
            throw ExitCode(69)  // EX_UNAVAILABLE: no bus, or the name is taken
        } catch let error as StoreError where error.code == .diskFull {
            logger.critical("\(error)")
            throw ExitCode(74)  // EX_IOERR: nothing is wrong with the database; the disk is full
        } catch let error as StoreError where error.code == .notWritable {
            logger.critical("\(error)")
            throw ExitCode(73)  // EX_CANTCREAT: nothing is wrong with the database; it cannot be written here
        } catch let error as StoreError {
            logger.critical("\(error)")
            throw ExitCode(65)  // EX_DATAERR: a database we must not touch
        }
    }

    /// `--bus-introspect`: the daemon's interfaces and those its plugins export, as XML.
    private func writeIntrospection(
        to path: String, candidates: [PluginLoader.Candidate], configuration: Configuration, logger: Logger
    ) throws {
        let plugins = PluginInterfaceCollector.interfaces(of: candidates, configuration: configuration, logger: logger)
        let xml = IntrospectionXML.render(Daemon.busInterfaces(for: nil) + plugins)
        if path == "-" { return print(xml, terminator: "") }
        var isDirectory: ObjCBool = false
        if FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory), isDirectory.boolValue {
            logger.critical("cannot write the introspection XML to \(path): it is a directory (name a file in it, or '-' for standard output)")
            throw ExitCode(73)  // EX_CANTCREAT
        }
        do throws(OutputFile.Failure) {
            try OutputFile.write(xml, to: path)
        } catch {
            logger.critical("cannot write the introspection XML to \(path): \(error)")
            // A write that failed (a full disk) is 74, EX_IOERR, as everywhere else; a file that cannot be made 73, EX_CANTCREAT.
            throw ExitCode(error.isWriteFailure ? 74 : 73)
        }
    }

    private var pluginDirectories: [String] {
        (pluginDir ?? "").split(separator: ":").map(String.init)
    }

    /// Where the session bus was looked for, when it was not found: sd-bus
    /// says only "No medium found" or "No such file or directory".
    static func sessionBusHint(for error: BusError, bus: String, environment: [String: String]) -> String {
        guard bus == "session", error.message.hasPrefix("connecting to the session bus") else { return "" }
        if let address = environment["DBUS_SESSION_BUS_ADDRESS"], !address.isEmpty { return " (DBUS_SESSION_BUS_ADDRESS=\(address))" }
        guard let runtime = environment["XDG_RUNTIME_DIR"], !runtime.isEmpty else {
            return "; neither DBUS_SESSION_BUS_ADDRESS nor XDG_RUNTIME_DIR is set: give --bus ADDRESS, or start one with dbus-daemon --session (scripts/run-daemon does)"
        }
        return "; DBUS_SESSION_BUS_ADDRESS is not set and there is no bus at \(runtime)/bus: give --bus ADDRESS, or start one with dbus-daemon --session (scripts/run-daemon does)"
    }

    static func defaultStateDirectory(_ environment: [String: String]) -> String {
        if let state = environment["XDG_STATE_HOME"], state.hasPrefix("/") { return state + "/bgtaskd" }
        return (environment["HOME"] ?? NSHomeDirectory()) + "/.local/state/bgtaskd"
    }
}
