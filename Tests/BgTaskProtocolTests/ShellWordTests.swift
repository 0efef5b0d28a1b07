import BgTaskProtocol
import Testing

/// A command printed for the user to paste means what it says.
struct ShellWordTests {
    @Test func safeWordsStayBare() {
        #expect(ShellWord.quoted("/tmp/bgtaskd-1/state.d") == "/tmp/bgtaskd-1/state.d")
        #expect(ShellWord.quoted("--set=Tasks.BudgetSec=5") == "--set=Tasks.BudgetSec=5")
    }

    @Test(arguments: ["", "=ls", "a b", "$HOME", "a;b", "`x`", "a*", "~", "{a,b}", "(x)", "a\"b", "a\\b", "ünï"])
    func anythingElseIsSingleQuoted(_ word: String) {
        #expect(ShellWord.quoted(word) == "'" + word + "'")
    }

    @Test func aSingleQuoteIsClosedEscapedAndReopened() {
        #expect(ShellWord.quoted("it's") == #"'it'\''s'"#)
    }

    /// Pasted from single quotes a line break would end the command in a terminal.
    @Test func controlCharactersAreEscapedInDollarQuotes() {
        #expect(ShellWord.quoted("a\nb") == #"$'a\nb'"#)
        #expect(ShellWord.quoted("it's\t\u{1b}") == #"$'it\'s\t\x1b'"#)
    }
}
