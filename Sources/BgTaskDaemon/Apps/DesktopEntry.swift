import BgTaskCore
import Glibc

/// What bgtaskd needs from an application's desktop entry (docs/DESIGN.md §3): the
/// background modes it declares and the command line to wake it with.
///
/// Implementation notes — the Desktop Entry Specification, read the way GLib
/// reads it where the spec leaves room:
///
/// - Lines end in LF or CRLF; blank lines and lines starting with `#` are
///   comments; blanks around a line, around the key and before the value are
///   ignored, and so are blanks at the end of the value (write `\s` for a
///   significant one).
/// - The first group must be `[Desktop Entry]`, else the file is not an
///   entry; keys of every later group (a repeated `[Desktop Entry]` too) are
///   ignored. A key given twice keeps its last value, as in GLib.
///   Lines that are neither a group, a key nor a comment, and keys before
///   the first group, are skipped (GLib refuses such a file; the intent of
///   the rest of it is still clear).
/// - Only plain keys are read: `Name[de]=` never replaces `Name=`.
/// - String values have `\s \n \t \r \\` undone; any other backslash is kept
///   as written. Lists (`X-BgTaskd-Modes=`) are split at `;`, with `\;` a
///   literal semicolon.
/// - `Type=` must be `Application`. `Hidden=true` (or `1`) means the entry is
///   deleted: it still masks entries of the same id in later directories but
///   is never used itself. `NoDisplay=` only hides an app from menus and does
///   not matter here.
struct DesktopEntry: Sendable, Equatable {
    /// The desktop-file id.
    let id: AppID
    /// The file the entry was read from.
    let path: String
    /// `Name=`, nil when absent or empty.
    let name: String?
    /// `Icon=`, nil when absent or empty.
    let icon: String?
    /// `X-BgTaskd-Modes=`: trimmed, without empty items or repeats, in the file's order.
    let modes: [String]
    /// The argument vector of `X-BgTaskd-Exec=` if present, else of `Exec=`,
    /// with field codes removed; nil when neither key exists or the line is refused.
    let commandLine: [String]?
    /// Why the command line could not be parsed, naming the key; nil when it could or there is none.
    let execProblem: String?
    /// `Hidden=true`: the entry is deleted and the app counts as absent.
    let hidden: Bool
    /// `Path=`: the directory the app is started in, when it is an absolute
    /// path; else (absent, empty or relative) the user's home directory.
    var workingDirectory: String? = nil

    /// Reads the `[Desktop Entry]` group of `text`; nil when the first group is
    /// not `[Desktop Entry]` or `Type` is not `Application`.
    static func parse(_ text: String, id: AppID, path: String) -> DesktopEntry? {
        var text = text
        // One pass over the bytes: the registry parses every entry on each reload.
        return text.withUTF8 { Parser(bytes: $0).entry(id: id, path: path) }
    }

    /// `text` with what D-Bus refuses in a string (NUL, and the Unicode
    /// noncharacters U+FDD0…U+FDEF and U+xFFFE/U+xFFFF, which are valid UTF-8)
    /// replaced by U+FFFD: one entry's odd name must not fail every reply
    /// that lists the apps.
    static func busSafe(_ text: String) -> String {
        func refused(_ scalar: Unicode.Scalar) -> Bool {
            scalar.value == 0 || (0xFDD0...0xFDEF).contains(scalar.value) || scalar.value & 0xFFFE == 0xFFFE
        }
        guard text.unicodeScalars.contains(where: refused) else { return text }
        var safe = String.UnicodeScalarView()
        for scalar in text.unicodeScalars { safe.append(refused(scalar) ? "\u{FFFD}" : scalar) }
        return String(safe)
    }

    /// The key the daemon prefers over `Exec=` for a background launch.
    static let backgroundExecKey = "X-BgTaskd-Exec"

    /// A desktop entry file as UTF-8 bytes, read in one pass.
    private struct Parser {
        let bytes: UnsafeBufferPointer<UInt8>

        /// Where the values of the keys bgtaskd reads are, blanks trimmed, escapes still in.
        private var type: Range<Int>?
        private var name: Range<Int>?
        private var icon: Range<Int>?
        private var exec: Range<Int>?
        private var backgroundExec: Range<Int>?
        private var modes: Range<Int>?
        private var hidden: Range<Int>?
        private var workingDirectory: Range<Int>?

        init(bytes: UnsafeBufferPointer<UInt8>) {
            self.bytes = bytes
        }

        /// The entry the bytes describe, or nil when they describe none.
        consuming func entry(id: AppID, path: String) -> DesktopEntry? {
            guard readMainGroup(), let type, string(type) == "Application" else { return nil }
            var commandLine: [String]?
            var execProblem: String?
            let execSource = backgroundExec.map { (key: DesktopEntry.backgroundExecKey, value: $0) } ?? exec.map { (key: "Exec", value: $0) }
            let declared = modes.map(modeList) ?? []
            if let execSource {
                do {
                    commandLine = try ExecLine.parse(string(execSource.value))
                } catch {
                    execProblem = "\(execSource.key): \(error)"
                }
            } else if !declared.isEmpty {
                // Nothing to launch it with: said when the entry is read, not at its first failed launch.
                execProblem = "no Exec= or X-BgTaskd-Exec= line"
            }
            let hiddenValue = hidden.map(string)
            return DesktopEntry(
                id: id,
                path: path,
                name: name.map(string).flatMap { $0.isEmpty ? nil : $0 },
                icon: icon.map(string).flatMap { $0.isEmpty ? nil : $0 },
                modes: declared,
                commandLine: commandLine,
                execProblem: execProblem,
                hidden: hiddenValue == "true" || hiddenValue == "1",
                workingDirectory: workingDirectory.map(string).flatMap { $0.hasPrefix("/") ? $0 : nil })
        }

        /// Records the keys of the first group; false when that group is not `[Desktop Entry]`.
        private mutating func readMainGroup() -> Bool {
            var sawGroup = false
            var lineStart = 0
            while lineStart < bytes.count {
                let lineEnd = memchr(bytes.baseAddress! + lineStart, Int32(UInt8(ascii: "\n")), bytes.count - lineStart)
                    .map { UnsafePointer($0.assumingMemoryBound(to: UInt8.self)) - bytes.baseAddress! } ?? bytes.count
                let line = trimmed(lineStart..<lineEnd)
                lineStart = lineEnd + 1
                guard let first = line.first.map({ bytes[$0] }), first != UInt8(ascii: "#") else { continue }
                if first == UInt8(ascii: "[") {
                    // Keys of every later group are ignored, so the first group is all there is to read.
                    if sawGroup { return true }
                    guard equals(line, "[Desktop Entry]") else { return false }
                    sawGroup = true
                    continue
                }
                guard sawGroup, let equalsSign = line.first(where: { bytes[$0] == UInt8(ascii: "=") }) else { continue }
                record(key: trimmed(line.lowerBound..<equalsSign), value: trimmed((equalsSign + 1)..<line.upperBound))
            }
            return sawGroup
        }

        private mutating func record(key: Range<Int>, value: Range<Int>) {
            if equals(key, "Type") {
                type = value
            } else if equals(key, "Name") {
                name = value
            } else if equals(key, "Icon") {
                icon = value
            } else if equals(key, "Exec") {
                exec = value
            } else if equals(key, "X-BgTaskd-Exec") {
                backgroundExec = value
            } else if equals(key, "X-BgTaskd-Modes") {
                modes = value
            } else if equals(key, "Hidden") {
                hidden = value
            } else if equals(key, "Path") {
                workingDirectory = value
            }
        }

        /// `range` without blanks (space, tab, CR) at either end.
        private func trimmed(_ range: Range<Int>) -> Range<Int> {
            var lower = range.lowerBound
            var upper = range.upperBound
            while lower < upper, isBlank(bytes[lower]) { lower += 1 }
            while upper > lower, isBlank(bytes[upper - 1]) { upper -= 1 }
            return lower..<upper
        }

        private func isBlank(_ byte: UInt8) -> Bool {
            byte == UInt8(ascii: " ") || byte == UInt8(ascii: "\t") || byte == UInt8(ascii: "\r")
        }

        private func equals(_ range: Range<Int>, _ literal: StaticString) -> Bool {
            guard range.count == literal.utf8CodeUnitCount else { return false }
            return memcmp(bytes.baseAddress! + range.lowerBound, literal.utf8Start, range.count) == 0
        }

        /// A string value with its escape sequences undone.
        private func string(_ range: Range<Int>) -> String {
            DesktopEntry.busSafe(DesktopEntry.unescape(UnsafeBufferPointer(rebasing: bytes[range]), splittingList: false)[0])
        }

        /// The modes of a `X-BgTaskd-Modes=` value: trimmed, without empty items or
        /// repeats, and bus-safe like every other value (a NUL in one failed every
        /// `GetApplications`).
        private func modeList(_ range: Range<Int>) -> [String] {
            var modes: [String] = []
            for item in DesktopEntry.unescape(UnsafeBufferPointer(rebasing: bytes[range]), splittingList: true) {
                let mode = DesktopEntry.busSafe(item.trimmingBlanks())
                if !mode.isEmpty, !modes.contains(mode) { modes.append(mode) }
            }
            return modes
        }
    }

    /// A value with `\s \n \t \r \\` undone (any other backslash is kept as
    /// written): one string, or for a list value the items between the `;`s
    /// that are not escaped as `\;` (a last item left empty is dropped).
    static func unescape(_ value: UnsafeBufferPointer<UInt8>, splittingList: Bool) -> [String] {
        guard splittingList || value.contains(UInt8(ascii: "\\")) else { return [String(decoding: value, as: UTF8.self)] }
        var items: [String] = []
        var bytes: [UInt8] = []
        bytes.reserveCapacity(value.count)
        var index = 0
        while index < value.count {
            let byte = value[index]
            index += 1
            if splittingList, byte == UInt8(ascii: ";") {
                items.append(String(decoding: bytes, as: UTF8.self))
                bytes.removeAll(keepingCapacity: true)
                continue
            }
            guard byte == UInt8(ascii: "\\"), index < value.count else {
                bytes.append(byte)
                continue
            }
            let next = value[index]
            index += 1
            switch next {
            case UInt8(ascii: "s"): bytes.append(UInt8(ascii: " "))
            case UInt8(ascii: "n"): bytes.append(UInt8(ascii: "\n"))
            case UInt8(ascii: "t"): bytes.append(UInt8(ascii: "\t"))
            case UInt8(ascii: "r"): bytes.append(UInt8(ascii: "\r"))
            case UInt8(ascii: "\\"): bytes.append(UInt8(ascii: "\\"))
            case UInt8(ascii: ";") where splittingList: bytes.append(next)
            default: bytes.append(contentsOf: [byte, next])
            }
        }
        if !splittingList || !bytes.isEmpty { items.append(String(decoding: bytes, as: UTF8.self)) }
        return items
    }
}

private extension String {
    /// The string without spaces and tabs at either end.
    func trimmingBlanks() -> String {
        let utf8 = self.utf8
        guard let first = utf8.firstIndex(where: { $0 != UInt8(ascii: " ") && $0 != UInt8(ascii: "\t") }) else { return "" }
        let last = utf8.lastIndex(where: { $0 != UInt8(ascii: " ") && $0 != UInt8(ascii: "\t") })!
        return String(Substring(utf8[first...last]))
    }
}
