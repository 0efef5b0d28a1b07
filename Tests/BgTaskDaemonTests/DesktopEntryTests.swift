@testable import BgTaskDaemon
import BgTaskCore
import Testing

/// Reading a desktop entry the way the Desktop Entry Specification asks (docs/DESIGN.md §3).
@Suite struct DesktopEntryTests {
    private let id = try! AppID(validating: "org.example.Weather")

    private func parse(_ text: String) -> DesktopEntry? {
        DesktopEntry.parse(text, id: id, path: "/apps/org.example.Weather.desktop")
    }

    @Test func aTypicalEntry() throws {
        let entry = try #require(parse("""
            [Desktop Entry]
            Type=Application
            Name=Weather
            Icon=org.example.Weather
            Exec=weather %U
            X-BgTaskd-Modes=fetch;remote-notification;location;

            [Desktop Action new-window]
            Name=New Window
            Exec=weather --new-window

            """))
        #expect(entry == DesktopEntry(
            id: id, path: "/apps/org.example.Weather.desktop", name: "Weather", icon: "org.example.Weather",
            modes: ["fetch", "remote-notification", "location"], commandLine: ["weather"], execProblem: nil,
            hidden: false))
    }

    /// What D-Bus refuses in a string (valid UTF-8 though it is) becomes U+FFFD.
    @Test func noncharactersAreReplacedSoThatTheEntryCanGoOnTheBus() throws {
        func scalar(_ value: UInt32) -> String { String(Character(Unicode.Scalar(value)!)) }
        let entry = try #require(parse(
            "[Desktop Entry]\nType=Application\nName=Bad\(scalar(0xFFFE))Name\nIcon=i\(scalar(0xFDD0))\(scalar(0x10FFFF))\nExec=w\n"))
        #expect(entry.name == "Bad\u{FFFD}Name")
        #expect(entry.icon == "i\u{FFFD}\u{FFFD}")
        #expect(DesktopEntry.busSafe("plain é 😀") == "plain é 😀")
        // Modes too: a NUL in one made every GetApplications fail.
        let modes = try #require(parse("[Desktop Entry]\nType=Application\nName=M\nExec=w\nX-BgTaskd-Modes=fetch;x\u{0}y;z\(scalar(0xFFFF));\n"))
        #expect(modes.modes == ["fetch", "x\u{FFFD}y", "z\u{FFFD}"])
    }

    // MARK: Groups and lines

    /// `Path=`, the directory to start in, is kept when it is absolute.
    @Test func pathIsTheWorkingDirectoryWhenAbsolute() throws {
        func entry(_ path: String?) -> DesktopEntry? {
            let line = path.map { "Path=\($0)\n" } ?? ""
            return DesktopEntry.parse("[Desktop Entry]\nType=Application\nExec=./app\n\(line)", id: try! AppID(validating: "org.example.A"), path: "/x")
        }
        #expect(entry("/opt/app dir")?.workingDirectory == "/opt/app dir")
        #expect(entry(nil)?.workingDirectory == nil)
        #expect(entry("")?.workingDirectory == nil)
        #expect(entry("relative/dir")?.workingDirectory == nil)
    }

    @Test func notADesktopEntry() {
        #expect(parse("") == nil)
        #expect(parse("Type=Application\nName=Weather\n") == nil)
        #expect(parse("[Desktop Entry]\nName=Weather\nExec=weather\n") == nil, "Type is required")
    }

    @Test(arguments: ["Link", "Directory", "application", ""])
    func onlyApplicationsAreEntries(_ type: String) {
        #expect(parse("[Desktop Entry]\nType=\(type)\nName=Weather\nURL=https://example.org\n") == nil)
    }

    @Test func theFirstGroupMustBeDesktopEntry() {
        #expect(parse("[Other]\nName=X\n[Desktop Entry]\nType=Application\nName=Weather\n") == nil)
        #expect(parse("# comment\n\n[Desktop Entry]\nType=Application\nName=Weather\n")?.name == "Weather")
    }

    @Test func keysOfLaterGroupsAreIgnored() {
        let entry = parse("""
            [Desktop Entry]
            Type=Application
            Exec=weather
            [Desktop Action refresh]
            Exec=weather --refresh
            X-BgTaskd-Modes=fetch
            Hidden=true
            [Desktop Entry]
            Exec=evil
            """)
        #expect(entry?.commandLine == ["weather"])
        #expect(entry?.modes == [])
        #expect(entry?.hidden == false)
    }

    @Test func crlfCommentsBlanksAndSpacesAroundTheEqualsSign() {
        let entry = parse("\r\n# Generated\r\n  [Desktop Entry]  \r\nType = Application\r\n\tName\t=  Weather Now \r\n\r\nExec= weather --x\r\n")
        #expect(entry?.name == "Weather Now")
        #expect(entry?.commandLine == ["weather", "--x"])
    }

    @Test func malformedLinesAndKeysBeforeTheGroupAreSkipped() {
        let entry = parse("Exec=evil\n[Desktop Entry]\nType=Application\nthis line has no equals sign\nName=Weather\n")
        #expect(entry?.name == "Weather")
        #expect(entry?.commandLine == nil)
    }

    @Test func localizedKeysNeverReplaceThePlainOne() {
        let entry = parse("[Desktop Entry]\nType=Application\nName[de]=Wetter\nName=Weather\nName[fr]=Météo\nIcon[de]=wetter\n")
        #expect(entry?.name == "Weather")
        #expect(entry?.icon == nil)
    }

    @Test func aRepeatedKeyKeepsItsLastValueAsGLibDoes() {
        #expect(parse("[Desktop Entry]\nType=Application\nName=First\nName=Second\n")?.name == "Second")
    }

    @Test func emptyNameAndIconAreAbsent() {
        let entry = parse("[Desktop Entry]\nType=Application\nName=\nIcon=  \n")
        #expect(entry != nil)
        #expect(entry?.name == nil)
        #expect(entry?.icon == nil)
    }

    // MARK: Values

    @Test func escapeSequencesInStrings() {
        let entry = parse(#"""
            [Desktop Entry]
            Type=Application
            Name=\sTwo\tWords\nand\\a \rbackslash\q\s
            """#)
        #expect(entry?.name == " Two\tWords\nand\\a \rbackslash\\q ")
    }

    @Test func execIsUnescapedBeforeItsQuotingIsUndone() {
        // The spec's own example: a `$` in a quoted argument needs `\$`, and the file escapes that backslash.
        let entry = parse(#"""
            [Desktop Entry]
            Type=Application
            Exec=sh -c "echo \\$HOME\sis\\\\home" %f
            """#)
        #expect(entry?.commandLine == ["sh", "-c", #"echo $HOME is\home"#])
        #expect(entry?.execProblem == nil)
    }

    @Test func modesAreTrimmedDeduplicatedAndKeepTheirOrder() {
        let entry = parse("[Desktop Entry]\nType=Application\nX-BgTaskd-Modes= location ; fetch;;fetch; \\s;remote-notification\n")
        #expect(entry?.modes == ["location", "fetch", "remote-notification"])
    }

    @Test func anEscapedSemicolonStaysInsideAMode() {
        let entry = parse("[Desktop Entry]\nType=Application\nX-BgTaskd-Modes=odd\\;mode;fetch;\n")
        #expect(entry?.modes == ["odd;mode", "fetch"])
    }

    @Test func noModesDeclared() {
        #expect(parse("[Desktop Entry]\nType=Application\nExec=weather\n")?.modes == [])
    }

    // MARK: Command line

    @Test func backgroundExecWinsOverExec() {
        let entry = parse("[Desktop Entry]\nType=Application\nExec=weather %U\nX-BgTaskd-Exec=weather --background\n")
        #expect(entry?.commandLine == ["weather", "--background"])
    }

    @Test func noExecAtAllIsNoProblem() {
        let entry = parse("[Desktop Entry]\nType=Application\nDBusActivatable=true\n")
        #expect(entry != nil)
        #expect(entry?.commandLine == nil)
        #expect(entry?.execProblem == nil)
    }

    /// An app that declares a mode and has no command was counted "without a
    /// usable command line" but named nowhere until a launch of it failed.
    @Test func aDeclaringEntryWithNoExecSaysWhy() throws {
        let entry = try #require(parse("[Desktop Entry]\nType=Application\nName=Weather\nX-BgTaskd-Modes=fetch;\n"))
        #expect(entry.commandLine == nil)
        #expect(entry.execProblem == "no Exec= or X-BgTaskd-Exec= line")
    }

    @Test func aBadExecSaysWhy() throws {
        let entry = try #require(parse("[Desktop Entry]\nType=Application\nExec=sh -c 'cd ~ && weather'\n"))
        #expect(entry.commandLine == nil)
        let problem = try #require(entry.execProblem)
        #expect(problem.hasPrefix("Exec: "))
        #expect(problem.contains("'''"))
    }

    @Test func aBadBackgroundExecIsNotRescuedByExec() throws {
        let entry = try #require(parse("[Desktop Entry]\nType=Application\nExec=weather\nX-BgTaskd-Exec=weather %x\n"))
        #expect(entry.commandLine == nil)
        #expect(entry.execProblem?.hasPrefix("X-BgTaskd-Exec: unknown field code '%x'") == true)
    }

    // MARK: Hidden

    @Test(arguments: [("true", true), ("1", true), ("false", false), ("yes", false)])
    func hiddenDeletesTheEntry(_ value: String, _ hidden: Bool) {
        #expect(parse("[Desktop Entry]\nType=Application\nHidden=\(value)\n")?.hidden == hidden)
    }

    @Test func noDisplayDoesNotHide() {
        #expect(parse("[Desktop Entry]\nType=Application\nNoDisplay=true\n")?.hidden == false)
    }
}
