import BgTaskProtocol

/// A plain-text table with a header row and aligned columns, for terminals.
///
/// Cells are made printable (control characters and bidirectional overrides
/// are shown escaped, so a task name cannot break the layout, send escape
/// sequences to the terminal or show the rest of its row reversed) and cut
/// to the column's maximum width with "…". Widths are the terminal's
/// columns (``displayWidth(of:)``): a wide character takes two, a zero-width
/// one none. Columns are separated by two spaces; lines carry no trailing blanks.
struct TextTable {
    enum Alignment {
        case left, right
    }

    struct Column {
        var title: String
        var alignment: Alignment
        /// Longer cells are cut to this many terminal columns; nil for no limit.
        var maxWidth: Int?

        init(_ title: String, alignment: Alignment = .left, maxWidth: Int? = nil) {
            self.title = title
            self.alignment = alignment
            self.maxWidth = maxWidth
        }
    }

    let columns: [Column]
    private(set) var rows: [[String]] = []

    init(_ columns: [Column]) {
        self.columns = columns
    }

    /// Adds a row; it must have one cell per column.
    mutating func append(_ cells: [String]) {
        precondition(cells.count == columns.count, "a row needs \(columns.count) cells")
        rows.append(zip(cells, columns).map { cell, column in Self.fit(LogText.escaped(cell), to: column.maxWidth) })
    }

    /// The table as lines joined by newlines, with a final newline.
    func render() -> String {
        let all = [columns.map(\.title)] + rows
        let widths = columns.indices.map { index in all.map { Self.displayWidth(of: $0[index]) }.max() ?? 0 }
        var text = ""
        for row in all {
            var line = ""
            for (index, cell) in row.enumerated() {
                let padding = String(repeating: " ", count: widths[index] - Self.displayWidth(of: cell))
                if index > 0 { line += "  " }
                switch columns[index].alignment {
                case .left: line += cell + padding
                case .right: line += padding + cell
                }
            }
            while line.last == " " { line.removeLast() }
            text += line + "\n"
        }
        return text
    }

    /// `text` cut to `width` terminal columns, the last being "…".
    static func fit(_ text: String, to width: Int?) -> String {
        guard let width, width > 0, displayWidth(of: text) > width else { return text }
        var cut = ""
        var used = 0
        for character in text {
            let columns = displayWidth(of: character)
            guard used + columns <= width - 1 else { break }
            cut.append(character)
            used += columns
        }
        return cut + "…"
    }

    /// The terminal columns `text` takes: per character, its widest scalar
    /// (East Asian wide and fullwidth characters and emoji 2, combining
    /// marks and format characters such as zero-width spaces 0, others 1).
    /// Padding by characters shifted a column right by one per wide character.
    static func displayWidth(of text: String) -> Int {
        text.reduce(0) { $0 + displayWidth(of: $1) }
    }

    private static func displayWidth(of character: Character) -> Int {
        // ASCII, most of what a table holds: one column, without looking further.
        if character.isASCII { return 1 }
        return character.unicodeScalars.reduce(0) { max($0, columns(of: $1)) }
    }

    private static func columns(of scalar: Unicode.Scalar) -> Int {
        switch scalar.properties.generalCategory {
        case .nonspacingMark, .enclosingMark, .format: return 0
        default: break
        }
        if scalar.properties.isEmojiPresentation { return 2 }
        switch scalar.value {
        case 0x1100...0x115F, 0x2E80...0x303E, 0x3041...0x33FF, 0x3400...0x4DBF, 0x4E00...0x9FFF, 0xA000...0xA4CF,
             0xAC00...0xD7A3, 0xF900...0xFAFF, 0xFE30...0xFE4F, 0xFF00...0xFF60, 0xFFE0...0xFFE6, 0x20000...0x3FFFD:
            return 2
        default:
            return 1
        }
    }
}
