import BgTaskProtocol
import BgTaskTestKit
import Foundation
import Testing

/// Keeps the README honest: every `busctl --user …` and `bgtaskctl …` line of
/// its shell examples runs, in the README's order, against a real daemon with
/// both plugins loaded and the example apps installed the way the README
/// says (`scripts/install-examples`). Only the bus and the path of
/// `bgtaskctl` are substituted. A line must succeed, and print what its
/// `# → …` comment shows, unless that comment names an error
/// (`# → InvalidArgs: unknown application state …`): then the line must fail
/// with that error and its message.
@Suite struct ReadmeTests {
    /// What a README line promises.
    enum Expectation: Equatable {
        /// Success; standard output starts with `output` when the comment shows it.
        case succeeds(output: String?)
        /// Failure with the D-Bus error `name` (short, as the README writes
        /// it) and a message containing `message`.
        case fails(name: String, message: String)
    }

    /// One command of the README.
    struct Example: CustomStringConvertible {
        /// 1-based line in README.md.
        var line: Int
        /// The command as written, without its comment.
        var command: String
        var expectation: Expectation
        /// Shell variable assignments that come before it in the README (`B='…'`).
        var assignments: [String]

        var description: String { "README.md:\(line): \(command)" }
    }

    /// The error names the README may expect, short as it writes them.
    static let errorNames: [String: String] = Dictionary(
        uniqueKeysWithValues: BgTaskError.Code.all.map { ($0.shortName, $0.rawValue) })

    // MARK: Reading the README

    /// The `busctl --user` and `bgtaskctl` commands of `readme`'s shell
    /// examples, in order: lines of ```sh blocks, and `$ `-prompted lines of
    /// plain ``` blocks (sample sessions).
    static func examples(in readme: String) throws -> [Example] {
        var examples: [Example] = []
        var assignments: [String] = []
        var block: String?  // the open fence's info string
        for (index, rawLine) in readme.components(separatedBy: "\n").enumerated() {
            let line = rawLine.trimmingCharacters(in: .whitespaces)
            if line.hasPrefix("```") {
                block = block == nil ? String(line.dropFirst(3)).trimmingCharacters(in: .whitespaces) : nil
                continue
            }
            guard let kind = block else { continue }
            var text: String
            switch kind {
            case "sh", "bash", "shell": text = line
            case "": guard line.hasPrefix("$ ") else { continue }; text = String(line.dropFirst(2))
            default: continue
            }
            let (command, comment) = splitComment(text)
            if command.range(of: #"^[A-Za-z_][A-Za-z0-9_]*="#, options: .regularExpression) != nil {
                assignments.append(command)
                continue
            }
            guard command.hasPrefix("busctl --user ") || command.hasPrefix("bgtaskctl ") else { continue }
            examples.append(Example(
                line: index + 1, command: command, expectation: try expectation(from: comment, line: index + 1),
                assignments: assignments))
        }
        return examples
    }

    /// The command and the text of its comment (after an unquoted ` #`).
    static func splitComment(_ text: String) -> (command: String, comment: String?) {
        var quote: Character?
        var previous: Character = " "
        for index in text.indices {
            let character = text[index]
            if let open = quote {
                if character == open { quote = nil }
            } else if character == "'" || character == "\"" {
                quote = character
            } else if character == "#", previous == " " || previous == "\t" {
                let comment = text[text.index(after: index)...].trimmingCharacters(in: .whitespaces)
                return (text[..<index].trimmingCharacters(in: .whitespaces), comment)
            }
            previous = character
        }
        return (text.trimmingCharacters(in: .whitespaces), nil)
    }

    /// What a `# → …` comment promises; a comment without `→` promises success only.
    static func expectation(from comment: String?, line: Int) throws -> Expectation {
        guard let comment, comment.hasPrefix("→") else { return .succeeds(output: nil) }
        let shown = comment.dropFirst().trimmingCharacters(in: .whitespaces)
        // "Name: message …" names an error; anything else is output.
        if let colon = shown.firstIndex(of: ":"),
           shown[..<colon].range(of: #"^[A-Z][A-Za-z]+$"#, options: .regularExpression) != nil {
            let name = String(shown[..<colon])
            guard errorNames[name] != nil else {
                throw TestKitError("README.md:\(line): the comment names \(name), which is no error of bgtaskd's")
            }
            let message = shown[shown.index(after: colon)...].components(separatedBy: "…")[0]
            return .fails(name: name, message: message.trimmingCharacters(in: .whitespaces))
        }
        // Output up to an ellipsis or a gloss after two spaces: "ud 1 1.79769e+308  (active: unlimited)".
        let output = shown.components(separatedBy: "…")[0].components(separatedBy: "  ")[0]
            .trimmingCharacters(in: .whitespaces)
        return .succeeds(output: output.isEmpty ? nil : output)
    }

    // MARK: The test

    @Test func readmeParsingFindsWhatItShould() throws {
        let sample = """
            ```sh
            B='x y'
            busctl --user call $B Ping        # → d 1.5  (a gloss)
            bgtaskctl push a.b -a 'x # y'    # an alert
            busctl --user call $B Bad s q     # → InvalidArgs: unknown thing 'q' …
            swift build
            ```
            ```
            $ bgtaskctl status
            bgtaskctl is not a command here
            ```
            ```swift
            bgtaskctl tasks
            ```
            """
        let found = try Self.examples(in: sample)
        #expect(found.map(\.command) == [
            "busctl --user call $B Ping", "bgtaskctl push a.b -a 'x # y'", "busctl --user call $B Bad s q", "bgtaskctl status",
        ])
        #expect(found.map(\.expectation) == [
            .succeeds(output: "d 1.5"), .succeeds(output: nil), .fails(name: "InvalidArgs", message: "unknown thing 'q'"),
            .succeeds(output: nil),
        ])
        #expect(found[0].assignments == ["B='x y'"])
        #expect(throws: (any Error).self) { try Self.examples(in: "```sh\nbgtaskctl x  # → Oops: no\n```") }
    }

    @Test func everyBusctlAndBgtaskctlLineOfTheReadmeWorks() throws {
        let root = BinaryLocator.packageRoot()
        let readme = try String(contentsOfFile: root + "/README.md", encoding: .utf8)
        let examples = try Self.examples(in: readme)
        // A broken extraction must not pass by finding nothing.
        #expect(examples.filter { $0.command.hasPrefix("busctl") }.count >= 5, "\(examples)")
        #expect(examples.filter { $0.command.hasPrefix("bgtaskctl") }.count >= 8, "\(examples)")
        #expect(examples.contains { if case .fails = $0.expectation { true } else { false } }, "\(examples)")

        // The example apps, installed as the README says, into the daemon's own home.
        let home = FileManager.default.temporaryDirectory.appendingPathComponent("bgtaskd-readme-\(UUID())").path
        try FileManager.default.createDirectory(atPath: home + "/data", withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: home) }
        let example = BinaryLocator.path(of: "bgtaskd-example-fetch")
        let install = try CommandResult.run(
            root + "/scripts/install-examples", ["--bin-path", (example as NSString).deletingLastPathComponent],
            environment: ["HOME": home, "XDG_DATA_HOME": home + "/data"])
        try #require(install.succeeded, "\(install)")
        for app in ["org.example.Weather", "org.example.News", "org.example.Chat"] {
            let entry = try String(contentsOfFile: home + "/data/applications/\(app).desktop", encoding: .utf8)
            #expect(entry.contains("Exec=\(example) --app-id \(app) "), "\(entry)")
        }

        let daemon = try DaemonUnderTest(home: home)
        let bgtaskctl = BinaryLocator.path(of: "bgtaskctl")
        #expect(try daemon.property("Plugins").contains(#""fetch""#) && daemon.property("Plugins").contains(#""remote-notification""#))

        for example in examples {
            var command = example.command
            if command.hasPrefix("bgtaskctl ") {
                command = ShellWord.quoted(bgtaskctl) + " --bus " + ShellWord.quoted(daemon.bus.address)
                    + command.dropFirst("bgtaskctl".count)
            }
            var environment = daemon.environment
            // sd-bus logs the error name of a failed call at debug level; busctl itself prints only the message.
            if case .fails = example.expectation { environment["SYSTEMD_LOG_LEVEL"] = "debug" }
            let script = (example.assignments + [command]).joined(separator: "\n")
            let result = try Self.runWaitingForWake(example, daemon) {
                try CommandResult.run("/bin/bash", ["-c", script], environment: environment)
            }
            switch example.expectation {
            case .succeeds(let output):
                #expect(result.succeeded, "\(example)\n\(result)\ndaemon log:\n\(daemon.log)")
                if let output {
                    #expect(result.standardOutput.hasPrefix(output), "\(example): expected output starting with \(output)\n\(result)")
                }
            case .fails(let name, let message):
                #expect(!result.succeeded, "\(example) succeeded, but the README says it fails with \(name)\n\(result)")
                #expect(result.standardError.contains(Self.errorNames[name]!), "\(example): no \(name)\n\(result)")
                #expect(result.standardError.contains(message), "\(example): no '\(message)'\n\(result)")
            }
        }
        #expect(daemon.stop() == .status(0))
    }

    /// Waits until `daemon`'s log holds `text` more than `before` times.
    static func waitForLog(_ daemon: DaemonUnderTest, _ text: String, moreThan before: Int, timeout: TimeInterval = 20) -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        while daemon.log.components(separatedBy: text).count - 1 <= before {
            if Date() > deadline { return false }
            usleep(50_000)
        }
        return true
    }

    /// A line that wakes an example app (`fetch simulate APP`, `push APP …`)
    /// must get it launched and answering: the next line may depend on it, and
    /// a reply that only says the daemon took the request proves little.
    /// Runs `line` and waits for the wake it set off; returns the line's result.
    static func runWaitingForWake(
        _ example: Example, _ daemon: DaemonUnderTest, _ line: () throws -> CommandResult
    ) throws -> CommandResult {
        let words = example.command.split(separator: " ").map(String.init)
        let fetched = words.count >= 4 && words[0] == "bgtaskctl" && words[1] == "fetch" && words[2] == "simulate"
            && example.expectation == .succeeds(output: nil)
        let completions = fetched ? daemon.log.components(separatedBy: "\(words[3]) completed its fetch").count - 1 : 0
        let result = try line()
        guard result.succeeded, words.count >= 3, words[0] == "bgtaskctl" else { return result }
        if fetched {
            #expect(waitForLog(daemon, "\(words[3]) completed its fetch", moreThan: completions),
                    "\(example): the app did not complete its fetch\n\(daemon.log)")
        } else if words[1] == "push" {
            // bgtaskctl push prints the push id; the app completes it (the daemon logs that at debug level).
            let pushID = result.standardOutput.trimmingCharacters(in: .whitespacesAndNewlines)
            #expect(waitForLog(daemon, "\(words[2]) completed push \(pushID)", moreThan: 0),
                    "\(example): the app did not complete push \(pushID)\n\(daemon.log)")
        }
        return result
    }

    /// `scripts/deps` took any argument but `--check` as "install", with
    /// sudo, and had no `--help`; `scripts/install`'s usage errors exited 1,
    /// as its failures do. Usage errors exit 2 now, and nothing is installed.
    @Test func theScriptsTellUsageErrorsFromFailures() throws {
        let root = BinaryLocator.packageRoot()
        let help = try CommandResult.run(root + "/scripts/deps", ["--help"])
        #expect(help.succeeded && help.standardOutput.contains("--check"), "\(help)")
        for (script, arguments) in [("deps", ["--bogus"]), ("deps", ["--check", "extra"]), ("install", ["--bogus"]),
                                    ("install", ["--dry-run", "--prefix", "relative"])] {
            let refused = try CommandResult.run(root + "/scripts/" + script, arguments)
            #expect(refused.exit == .status(2), "\(script) \(arguments): \(refused)")
            #expect(!refused.standardError.contains("installing"), "\(script) \(arguments): \(refused)")
        }
    }
}
