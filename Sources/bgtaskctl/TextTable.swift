import BgTaskProtocol

/// A plain-text table with a header row and aligned columns, for terminals.
///
/// Cells are made printable (control characters and bidirectional overrides
/// are shown escaped, so a task name cannot break the layout, send escape
/// sequences to the terminal or show the rest of its row reversed) and cut
/// to the column's maximum width with "…". Columns are separated by two
/// spaces; lines carry no trailing blanks.
struct TextTable {
    enum Alignment {
        case left, right
    }

    struct Column {
        var title: String
        var alignment: Alignment
        /// Longer cells are cut to this many characters; nil for no limit.
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
        let widths = columns.indices.map { index in all.map { $0[index].count }.max() ?? 0 }
        var text = ""
        for row in all {
            var line = ""
            for (index, cell) in row.enumerated() {
                let padding = String(repeating: " ", count: widths[index] - cell.count)
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

    /// `text` cut to `width` characters, the last being "…".
    static func fit(_ text: String, to width: Int?) -> String {
        guard let width, text.count > width, width > 0 else { return text }
        return String(text.prefix(width - 1)) + "…"
    }
}
