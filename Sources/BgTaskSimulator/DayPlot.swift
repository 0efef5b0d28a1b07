/// One day of a simulation as a standalone SVG: a row per app on a 24 h time
/// line with its opens (spans), content arrivals, fetches (newData and noData
/// apart) and push wakes, the machine's sleep shaded, a strip of the wake
/// events on top and a legend below.
public struct DayPlot: Sendable {
    public var trace: Trace
    public var result: SimulationResult
    /// 0-based trace day.
    public var day: Int
    /// A caption, e.g. the policy's name.
    public var caption: String

    public init(trace: Trace, result: SimulationResult, day: Int, caption: String) {
        self.trace = trace
        self.result = result
        self.day = day
        self.caption = caption
    }

    /// The first day with an open (0 if none): a sensible day to look at.
    public static func firstDayWithOpens(in trace: Trace) -> Int {
        for event in trace.events { if case .open = event.kind { return Int(event.t / 86_400) } }
        return 0
    }

    static let width = 1200.0, labelWidth = 190.0, rightPad = 20.0, rowHeight = 22.0, top = 64.0
    static let colors = (
        open: "#4a90d9", content: "#f5a623", newData: "#2e9e44", noData: "#d0021b", push: "#9013fe", sleep: "#8895a7"
    )

    private var dayStart: Double { Double(day) * 86_400 }

    private func x(_ t: Double) -> Double {
        Self.labelWidth + (min(max(t - dayStart, 0), 86_400) / 86_400) * (Self.width - Self.labelWidth - Self.rightPad)
    }

    private func inDay(_ t: Double) -> Bool { t >= dayStart && t < dayStart + 86_400 }

    /// The SVG document.
    public func svg() -> String {
        let apps = trace.apps
        let rowOf = Dictionary(apps.enumerated().map { ($1, $0) }, uniquingKeysWith: { first, _ in first })
        // Row 0 is the wake-event strip; apps follow.
        func rowTop(_ row: Int) -> Double { Self.top + Double(row) * Self.rowHeight }
        let rowsBottom = rowTop(apps.count + 1)
        let legendY = rowsBottom + 30
        let height = legendY + 30
        let weekday = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"][day % 7]

        var out = """
            <svg xmlns="http://www.w3.org/2000/svg" width="\(f(Self.width))" height="\(f(height))" \
            viewBox="0 0 \(f(Self.width)) \(f(height))" font-family="sans-serif" font-size="11">

            """
        out += "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
        let dayRuns = result.runs.filter { inDay(Trace.seconds($0.at)) }
        let wakes = Set(dayRuns.map(\.at)).count
        let fetches = dayRuns.filter { $0.kind == .fetch }
        out += text(8, 22, "bgtaskd-sim — \(caption) — day \(day) (\(weekday))", size: 15, weight: "bold")
        out += text(8, 40, "\(wakes) wake events, \(fetches.count) fetches (\(fetches.filter { $0.result == .noData }.count) noData), "
            + "\(dayRuns.count - fetches.count) push wakes", size: 11)

        // Rows and hour grid.
        for row in 0...apps.count where row % 2 == 1 {
            out += "<rect x=\"0\" y=\"\(f(rowTop(row)))\" width=\"\(f(Self.width))\" height=\"\(f(Self.rowHeight))\" fill=\"#f4f6f8\"/>\n"
        }
        for hour in 0...24 {
            let hx = x(dayStart + Double(hour) * 3600)
            out += "<line x1=\"\(f(hx))\" y1=\"\(f(Self.top - 4))\" x2=\"\(f(hx))\" y2=\"\(f(rowsBottom))\" stroke=\"#dde2e8\" stroke-width=\"\(hour % 6 == 0 ? 1.2 : 0.6)\"/>\n"
            if hour % 2 == 0 {
                out += text(hx, Self.top - 8, (hour < 10 ? "0" : "") + "\(hour):00", size: 10, anchor: "middle", fill: "#555")
            }
        }

        // The machine's sleep, across all rows.
        var asleepSince: Double?
        for event in trace.events {
            switch event.kind {
            case .sleep: asleepSince = event.t
            case .wake:
                if let since = asleepSince { out += sleepRect(since, event.t, top: Self.top, bottom: rowsBottom) }
                asleepSince = nil
            default: break
            }
        }
        if let since = asleepSince { out += sleepRect(since, max(since, trace.duration, dayStart + 86_400), top: Self.top, bottom: rowsBottom) }

        // Wake events.
        out += "<g class=\"wakes\">\n" + text(8, rowTop(0) + 15, "wake events", size: 11, fill: "#555", style: "italic")
        for at in Set(dayRuns.map(\.at)).sorted() {
            let wx = x(Trace.seconds(at))
            out += "<line x1=\"\(f(wx))\" y1=\"\(f(rowTop(0) + 4))\" x2=\"\(f(wx))\" y2=\"\(f(rowTop(0) + Self.rowHeight - 4))\" stroke=\"#333\" stroke-width=\"1\"/>\n"
        }
        out += "</g>\n"

        // Per app: opens, content, fetches, pushes.
        var rows = [String](repeating: "", count: apps.count)
        var openSince: [String: Double] = [:]
        for event in trace.events {
            guard let app = event.app, let row = rowOf[app] else { continue }
            let y = rowTop(row + 1)
            switch event.kind {
            case .open: openSince[app] = event.t
            case .close:
                if let since = openSince.removeValue(forKey: app), since < dayStart + 86_400, event.t >= dayStart {
                    let x0 = x(since), x1 = max(x(event.t), x0 + 1.5)
                    rows[row] += "<rect x=\"\(f(x0))\" y=\"\(f(y + 4))\" width=\"\(f(x1 - x0))\" height=\"\(f(Self.rowHeight - 8))\" fill=\"\(Self.colors.open)\" opacity=\"0.8\"/>\n"
                }
            case .content where inDay(event.t):
                rows[row] += "<circle cx=\"\(f(x(event.t)))\" cy=\"\(f(y + 5))\" r=\"2.2\" fill=\"\(Self.colors.content)\"/>\n"
            default: break
            }
        }
        for (app, since) in openSince where since < dayStart + 86_400 {
            guard let row = rowOf[app] else { continue }
            let x0 = x(since), x1 = max(x(dayStart + 86_400), x0 + 1.5)
            rows[row] += "<rect x=\"\(f(x0))\" y=\"\(f(rowTop(row + 1) + 4))\" width=\"\(f(x1 - x0))\" height=\"\(f(Self.rowHeight - 8))\" fill=\"\(Self.colors.open)\" opacity=\"0.8\"/>\n"
        }
        for run in dayRuns {
            guard let row = rowOf[run.app] else { continue }
            let cx = x(Trace.seconds(run.at)), cy = rowTop(row + 1) + Self.rowHeight / 2 + 2
            rows[row] += mark(run.kind == .push ? "push" : run.result == .newData ? "newData" : "noData", cx, cy)
        }
        for (row, app) in apps.enumerated() {
            out += "<g class=\"app\" data-app=\"\(escape(app))\">\n"
            out += text(8, rowTop(row + 1) + 15, app, size: 11)
            out += rows[row]
            out += "</g>\n"
        }

        // Legend.
        var lx = 8.0
        func legend(_ symbol: String, _ label: String) {
            out += symbol + text(lx + 14, legendY + 4, label, size: 11)
            lx += 14 + Double(label.count) * 6.2 + 24
        }
        legend("<rect x=\"\(f(lx))\" y=\"\(f(legendY - 5))\" width=\"10\" height=\"10\" fill=\"\(Self.colors.open)\" opacity=\"0.8\"/>", "open (until close)")
        legend("<circle cx=\"\(f(lx + 5))\" cy=\"\(f(legendY))\" r=\"2.5\" fill=\"\(Self.colors.content)\"/>", "new content")
        legend(mark("newData", lx + 5, legendY), "fetch: newData")
        legend(mark("noData", lx + 5, legendY), "fetch: noData")
        legend(mark("push", lx + 5, legendY), "push wake")
        legend("<rect x=\"\(f(lx))\" y=\"\(f(legendY - 5))\" width=\"10\" height=\"10\" fill=\"\(Self.colors.sleep)\" opacity=\"0.3\"/>", "machine asleep")
        legend("<line x1=\"\(f(lx + 5))\" y1=\"\(f(legendY - 6))\" x2=\"\(f(lx + 5))\" y2=\"\(f(legendY + 6))\" stroke=\"#333\"/>", "wake event")
        out += "</svg>\n"
        return out
    }

    private func mark(_ kind: String, _ cx: Double, _ cy: Double) -> String {
        switch kind {
        case "newData":
            return "<circle cx=\"\(f(cx))\" cy=\"\(f(cy))\" r=\"3.5\" fill=\"\(Self.colors.newData)\"/>\n"
        case "noData":
            return "<circle cx=\"\(f(cx))\" cy=\"\(f(cy))\" r=\"3\" fill=\"white\" stroke=\"\(Self.colors.noData)\" stroke-width=\"1.3\"/>\n"
        default:
            let points = [(cx, cy - 4.5), (cx + 4.5, cy), (cx, cy + 4.5), (cx - 4.5, cy)].map { "\(f($0.0)),\(f($0.1))" }
            return "<polygon points=\"\(points.joined(separator: " "))\" fill=\"\(Self.colors.push)\"/>\n"
        }
    }

    private func sleepRect(_ from: Double, _ to: Double, top: Double, bottom: Double) -> String {
        guard to > dayStart, from < dayStart + 86_400 else { return "" }
        let x0 = x(from), x1 = x(to)
        return "<rect class=\"sleep\" x=\"\(f(x0))\" y=\"\(f(top))\" width=\"\(f(x1 - x0))\" height=\"\(f(bottom - top))\" fill=\"\(Self.colors.sleep)\" opacity=\"0.3\"/>\n"
    }

    private func text(
        _ x: Double, _ y: Double, _ content: String, size: Double, anchor: String = "start", fill: String = "#222",
        weight: String = "normal", style: String = "normal"
    ) -> String {
        "<text x=\"\(f(x))\" y=\"\(f(y))\" font-size=\"\(f(size))\" text-anchor=\"\(anchor)\" fill=\"\(fill)\" "
            + "font-weight=\"\(weight)\" font-style=\"\(style)\">\(escape(content))</text>\n"
    }

    /// A coordinate with at most one decimal.
    private func f(_ value: Double) -> String { TraceEvent.number((value * 10).rounded() / 10) }

    private func escape(_ text: String) -> String {
        var out = ""
        for c in text {
            switch c {
            case "&": out += "&amp;"
            case "<": out += "&lt;"
            case ">": out += "&gt;"
            case "\"": out += "&quot;"
            // XML 1.0 has no place for other control characters, even escaped: the SVG would not parse.
            case _ where c.unicodeScalars.contains(where: { $0.value < 0x20 || (0x7F...0x9F).contains($0.value) }): out += "\u{FFFD}"
            default: out.append(c)
            }
        }
        return out
    }
}
