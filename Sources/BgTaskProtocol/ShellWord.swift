/// Quotes text as one word of a POSIX shell command line, so that a command
/// printed for the user to paste (a fix in an error message, a line that
/// reproduces a failure) means what it says whatever a path contains.
public enum ShellWord {
    /// `word` bare when every character is safe, else in single quotes, or in
    /// `$'…'` with escapes when it holds control characters (which single
    /// quotes would paste as they are, line breaks included).
    public static func quoted(_ word: String) -> String {
        // A leading "=" is zsh's =command expansion.
        if !word.isEmpty, !word.hasPrefix("="), word.unicodeScalars.allSatisfy(isSafe) { return word }
        if !word.unicodeScalars.contains(where: isControl) {
            return "'" + word.replacing("'", with: "'\\''") + "'"
        }
        var out = "$'"
        for scalar in word.unicodeScalars {
            switch scalar {
            case "\n": out += "\\n"
            case "\t": out += "\\t"
            case "\r": out += "\\r"
            case "'": out += "\\'"
            case "\\": out += "\\\\"
            case _ where isControl(scalar):
                out += "\\x" + (scalar.value < 16 ? "0" : "") + String(scalar.value, radix: 16)
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out + "'"
    }

    /// Characters no shell gives a meaning to in the middle of a word.
    private static func isSafe(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar {
        case "a"..."z", "A"..."Z", "0"..."9", "_", ".", "/", ":", "=", ",", "@", "+", "-", "%": true
        default: false
        }
    }

    private static func isControl(_ scalar: Unicode.Scalar) -> Bool {
        scalar.value < 0x20 || scalar.value == 0x7F
    }
}
