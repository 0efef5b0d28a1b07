/// Turns the value of a desktop entry's `Exec=` (or `X-BgTaskd-Exec=`) key
/// into the argument vector the daemon starts an app with.
///
/// Implementation notes — the rules of the Desktop Entry Specification
/// ("The Exec key"), applied strictly:
///
/// - The value given here has already had the string escapes of the file
///   (`\s`, `\n`, `\t`, `\r`, `\\`) undone by ``DesktopEntry/parse(_:id:path:)``.
/// - Arguments are separated by spaces (runs of them count as one). An argument
///   may be quoted *as a whole* in double quotes; inside quotes `\"`, `` \` ``,
///   `\$` and `\\` stand for the character, any other backslash is an error, and
///   so are an unescaped `` ` `` or `$`. Outside quotes the reserved characters
///   (tab, newline, `'`, `\`, `<`, `>`, `~`, `|`, `&`, `;`, `$`, `*`, `?`, `#`,
///   `(`, `)`, `` ` ``, and a `"` that does not start an argument) are an
///   error: where a shell would have expanded something, bgtaskd refuses the
///   line rather than pass the text on literally. GLib is more lenient (it
///   parses like a shell); an app whose `Exec=` is refused can say what to run
///   in `X-BgTaskd-Exec=`.
/// - Quoting is undone before field codes are expanded. A background launch has
///   no files, URLs, icon or caption, so `%f %F %u %U %d %D %n %N %v %m %i %c %k`
///   expand to nothing, and an argument made only of them is dropped; `%%` is a
///   literal `%`; any other `%x` is an error.
/// - The result must name a program: an empty vector or an empty first
///   argument is an error, and so is a NUL anywhere.
enum ExecLine {
    /// The argument vector of `value` with field codes removed; throws
    /// ``ExecLineError`` saying what is wrong with the line.
    static func parse(_ value: String) throws(ExecLineError) -> [String] {
        let bytes = Array(value.utf8)
        var arguments: [String] = []
        for token in try tokenize(bytes, in: value) {
            if let argument = try expandFieldCodes(token, number: arguments.count + 1) {
                arguments.append(argument)
            }
        }
        guard let program = arguments.first else {
            throw ExecLineError(.empty, bytes.contains(UInt8(ascii: "%"))
                ? "the command line holds only field codes, no program"
                : "the command line is empty")
        }
        if program.isEmpty { throw ExecLineError(.empty, "the program name is empty") }
        return arguments
    }

    /// Whether `%<byte>` is a field code that expands to nothing in a background launch.
    private static func isRemovedFieldCode(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "f"), UInt8(ascii: "F"), UInt8(ascii: "u"), UInt8(ascii: "U"), UInt8(ascii: "d"),
            UInt8(ascii: "D"), UInt8(ascii: "n"), UInt8(ascii: "N"), UInt8(ascii: "v"), UInt8(ascii: "m"),
            UInt8(ascii: "i"), UInt8(ascii: "c"), UInt8(ascii: "k"):
            return true
        default:
            return false
        }
    }

    /// Whether `byte` must be quoted (the spec's list; `"` and space are handled apart).
    private static func isReserved(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "\t"), UInt8(ascii: "\n"), UInt8(ascii: "'"), UInt8(ascii: "\\"), UInt8(ascii: "<"),
            UInt8(ascii: ">"), UInt8(ascii: "~"), UInt8(ascii: "|"), UInt8(ascii: "&"), UInt8(ascii: ";"),
            UInt8(ascii: "$"), UInt8(ascii: "*"), UInt8(ascii: "?"), UInt8(ascii: "#"), UInt8(ascii: "("),
            UInt8(ascii: ")"), UInt8(ascii: "`"):
            return true
        default:
            return false
        }
    }

    /// Whether a backslash may escape `byte` inside double quotes.
    private static func isQuotedEscape(_ byte: UInt8) -> Bool {
        byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "`") || byte == UInt8(ascii: "$") || byte == UInt8(ascii: "\\")
    }

    private static let space = UInt8(ascii: " ")
    private static let quote = UInt8(ascii: "\"")
    private static let backslash = UInt8(ascii: "\\")

    /// One argument with its quoting undone, and where it started (for messages).
    private struct Token {
        var bytes: [UInt8]
        var start: Int
    }

    /// Splits the line into arguments and undoes their quoting.
    private static func tokenize(_ bytes: [UInt8], in value: String) throws(ExecLineError) -> [Token] {
        if let nul = bytes.firstIndex(of: 0) {
            throw ExecLineError(.invalidCharacter, "a NUL character at \(position(nul, in: bytes)) cannot be passed to a program")
        }
        var tokens: [Token] = []
        var index = 0
        while index < bytes.count {
            if bytes[index] == space {
                index += 1
                continue
            }
            let start = index
            var argument: [UInt8] = []
            if bytes[index] == quote {
                index += 1
                while true {
                    guard index < bytes.count else {
                        throw ExecLineError(.unterminatedQuote, "the quote opened at \(position(start, in: bytes)) is never closed")
                    }
                    let byte = bytes[index]
                    if byte == quote {
                        index += 1
                        break
                    }
                    if byte == backslash {
                        guard index + 1 < bytes.count, isQuotedEscape(bytes[index + 1]) else {
                            throw ExecLineError(.invalidEscape,
                                "a backslash inside quotes at \(position(index, in: bytes)) may only escape '\"', '`', '$' or '\\' (write '\\\\' for a backslash)")
                        }
                        argument.append(bytes[index + 1])
                        index += 2
                        continue
                    }
                    if byte == UInt8(ascii: "`") || byte == UInt8(ascii: "$") {
                        throw ExecLineError(.reservedCharacter,
                            "'\(Character(Unicode.Scalar(byte)))' inside quotes at \(position(index, in: bytes)) must be escaped as '\\\(Character(Unicode.Scalar(byte)))'")
                    }
                    argument.append(byte)
                    index += 1
                }
                if index < bytes.count, bytes[index] != space {
                    throw ExecLineError(.misplacedQuote,
                        "text follows the closing quote at \(position(index - 1, in: bytes)); an argument may only be quoted as a whole")
                }
            } else {
                while index < bytes.count, bytes[index] != space {
                    let byte = bytes[index]
                    if byte == quote {
                        throw ExecLineError(.misplacedQuote,
                            "a double quote inside an argument at \(position(index, in: bytes)); an argument may only be quoted as a whole")
                    }
                    if isReserved(byte) {
                        throw ExecLineError(.reservedCharacter,
                            "the reserved character \(describe(byte)) at \(position(index, in: bytes)) must be inside a quoted argument")
                    }
                    argument.append(byte)
                    index += 1
                }
            }
            tokens.append(Token(bytes: argument, start: start))
        }
        return tokens
    }

    /// The argument with its field codes expanded, or nil when it was made only of removed field codes.
    private static func expandFieldCodes(_ token: Token, number: Int) throws(ExecLineError) -> String? {
        let bytes = token.bytes
        guard bytes.contains(UInt8(ascii: "%")) else { return String(decoding: bytes, as: UTF8.self) }
        var expanded: [UInt8] = []
        var sawFieldCode = false
        var sawText = false
        var index = 0
        while index < bytes.count {
            let byte = bytes[index]
            guard byte == UInt8(ascii: "%") else {
                expanded.append(byte)
                sawText = true
                index += 1
                continue
            }
            guard index + 1 < bytes.count else {
                throw ExecLineError(.unknownFieldCode, "a lone '%' ends argument \(number); write '%%' for a percent sign")
            }
            let code = bytes[index + 1]
            if code == UInt8(ascii: "%") {
                expanded.append(code)
                sawText = true
            } else if isRemovedFieldCode(code) {
                sawFieldCode = true
            } else {
                let character = String(decoding: bytes[(index + 1)...].prefix(4), as: UTF8.self).first.map(String.init) ?? "?"
                throw ExecLineError(.unknownFieldCode, "unknown field code '%\(character)' in argument \(number); write '%%' for a percent sign")
            }
            index += 2
        }
        if sawFieldCode && !sawText { return nil }
        return String(decoding: expanded, as: UTF8.self)
    }

    /// "character N" (1-based, counting characters, not bytes).
    private static func position(_ byteOffset: Int, in bytes: [UInt8]) -> String {
        "character \(String(decoding: bytes[..<byteOffset], as: UTF8.self).count + 1)"
    }

    /// A reserved character as a message shows it.
    private static func describe(_ byte: UInt8) -> String {
        switch byte {
        case UInt8(ascii: "\t"): return "tab"
        case UInt8(ascii: "\n"): return "newline"
        default: return "'\(Character(Unicode.Scalar(byte)))'"
        }
    }
}

/// Why an `Exec=` line cannot be turned into a command line.
struct ExecLineError: Error, Equatable, CustomStringConvertible {
    /// The kind of mistake; extensible, so callers must not switch over it exhaustively.
    struct Code: Hashable, Sendable, CustomStringConvertible {
        /// The code's name, as logs show it.
        let rawValue: String

        /// No program is left to run.
        static let empty = Code(rawValue: "empty")
        /// A double quote that is never closed.
        static let unterminatedQuote = Code(rawValue: "unterminated-quote")
        /// A quote in the middle of an argument, or text right after a closing quote.
        static let misplacedQuote = Code(rawValue: "misplaced-quote")
        /// A reserved character outside quotes, or an unescaped `` ` `` / `$` inside them.
        static let reservedCharacter = Code(rawValue: "reserved-character")
        /// A backslash inside quotes before a character it may not escape.
        static let invalidEscape = Code(rawValue: "invalid-escape")
        /// `%x` that is not a field code of the spec, or a lone `%` at the end.
        static let unknownFieldCode = Code(rawValue: "unknown-field-code")
        /// A character no argument can hold (NUL).
        static let invalidCharacter = Code(rawValue: "invalid-character")

        /// The code's name.
        var description: String { rawValue }
    }

    /// What kind of mistake it is.
    let code: Code
    /// What was wrong, and where, in words.
    let message: String

    /// An error of kind `code` that says `message`.
    init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    /// The message: what was wrong, and where.
    var description: String { message }
}
