@testable import BgTaskDaemon
import Testing

/// The spec's Exec quoting rules and field codes, as a background launch applies them.
@Suite struct ExecLineTests {
    // MARK: Splitting and quoting

    @Test func argumentsAreSeparatedBySpaces() throws {
        #expect(try ExecLine.parse("weather --background  --verbose ") == ["weather", "--background", "--verbose"])
    }

    @Test func quotedArgumentsKeepTheirSpacesAndReservedCharacters() throws {
        #expect(try ExecLine.parse(#""/opt/My App/bin/app" --title "a;b|c~ (x) * ? # & < > ' \#t""#)
            == ["/opt/My App/bin/app", "--title", "a;b|c~ (x) * ? # & < > ' \t"])
    }

    @Test func escapesInsideQuotes() throws {
        #expect(try ExecLine.parse(#"sh -c "echo \"hi\" \$HOME \`date\` \\""#)
            == ["sh", "-c", #"echo "hi" $HOME `date` \"#])
    }

    @Test func anEmptyQuotedArgumentIsKept() throws {
        #expect(try ExecLine.parse(#"app "" last"#) == ["app", "", "last"])
    }

    @Test func nonASCIIArgumentsPassThrough() throws {
        #expect(try ExecLine.parse(#"/opt/Ünïcødé/app "日本 語" ü"#) == ["/opt/Ünïcødé/app", "日本 語", "ü"])
    }

    // MARK: Field codes

    @Test(arguments: Array("fFuUdDnNvmick"))
    func fieldCodeAsAWholeArgumentRemovesIt(_ code: Character) throws {
        #expect(try ExecLine.parse("app %\(code) --flag") == ["app", "--flag"])
    }

    @Test func fieldCodeInsideAnArgumentIsRemovedFromIt() throws {
        #expect(try ExecLine.parse("app --file=%f --url=%u!") == ["app", "--file=", "--url=!"])
    }

    @Test func anArgumentOfOnlyFieldCodesIsDropped() throws {
        #expect(try ExecLine.parse("app %f%u %i") == ["app"])
    }

    @Test func aQuotedFieldCodeIsRemovedToo() throws {
        // Quoting is undone before field codes are expanded.
        #expect(try ExecLine.parse(#"app "%U""#) == ["app"])
    }

    @Test func doublePercentIsAPercentSign() throws {
        #expect(try ExecLine.parse("printf 100%% %%U") == ["printf", "100%", "%U"])
    }

    @Test func anArgumentOfOnlyPercentSignsIsKept() throws {
        #expect(try ExecLine.parse("app %%") == ["app", "%"])
    }

    @Test func unknownFieldCodeIsAnError() {
        let error = #expect(throws: ExecLineError.self) { try ExecLine.parse("app %z") }
        #expect(error?.code == .unknownFieldCode)
        #expect(error?.description.contains("'%z'") == true)
        #expect(error?.description.contains("argument 2") == true)
    }

    @Test func aLonePercentAtTheEndIsAnError() {
        let error = #expect(throws: ExecLineError.self) { try ExecLine.parse("app 100%") }
        #expect(error?.code == .unknownFieldCode)
        #expect(error?.description.contains("%%") == true)
    }

    // MARK: Refused lines

    @Test(arguments: [
        "app ~/file", "app a|b", "app a;b", "app $HOME", "sh -c 'x'", #"app a\b"#, "app a\tb", "app a*", "app (x)",
        "app a#b", "app a&", "app <in", "app >out", "app `x`", "app a?", "app a\nb",
    ])
    func reservedCharacterOutsideQuotesIsAnError(_ line: String) {
        let error = #expect(throws: ExecLineError.self) { try ExecLine.parse(line) }
        #expect(error?.code == .reservedCharacter)
    }

    @Test func errorsSayWhereInCharacters() {
        let error = #expect(throws: ExecLineError.self) { try ExecLine.parse("é ~") }
        #expect(error?.description.contains("'~'") == true)
        #expect(error?.description.contains("character 3") == true)
    }

    @Test func unterminatedQuoteIsAnError() {
        let error = #expect(throws: ExecLineError.self) { try ExecLine.parse(#"app "open"#) }
        #expect(error?.code == .unterminatedQuote)
    }

    @Test func aQuoteInsideAnArgumentIsAnError() {
        let error = #expect(throws: ExecLineError.self) { try ExecLine.parse(#"app --name="x y""#) }
        #expect(error?.code == .misplacedQuote)
    }

    @Test func textAfterAClosingQuoteIsAnError() {
        let error = #expect(throws: ExecLineError.self) { try ExecLine.parse(#"app "x"y"#) }
        #expect(error?.code == .misplacedQuote)
    }

    @Test(arguments: [#"sh -c "echo $HOME""#, #"sh -c "echo `date`""#])
    func unescapedDollarOrBacktickInsideQuotesIsAnError(_ line: String) {
        let error = #expect(throws: ExecLineError.self) { try ExecLine.parse(line) }
        #expect(error?.code == .reservedCharacter)
    }

    @Test(arguments: [#"app "a\nb""#, #"app "trailing\"#])
    func aBackslashInsideQuotesMayOnlyEscapeFourCharacters(_ line: String) {
        let error = #expect(throws: ExecLineError.self) { try ExecLine.parse(line) }
        #expect(error?.code == .invalidEscape)
    }

    @Test(arguments: ["", "   ", "%U", "%f %U"])
    func aLineWithoutAProgramIsAnError(_ line: String) {
        let error = #expect(throws: ExecLineError.self) { try ExecLine.parse(line) }
        #expect(error?.code == .empty)
    }

    @Test func anEmptyProgramIsAnError() {
        let error = #expect(throws: ExecLineError.self) { try ExecLine.parse(#""" --flag"#) }
        #expect(error?.code == .empty)
        #expect(error?.description == "the program name is empty")
    }

    @Test func aNulCharacterIsAnError() {
        let error = #expect(throws: ExecLineError.self) { try ExecLine.parse("app \u{0}x") }
        #expect(error?.code == .invalidCharacter)
    }
}
