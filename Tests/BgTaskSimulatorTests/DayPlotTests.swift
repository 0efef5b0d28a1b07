import BgTaskSimulator
import Testing

@Suite struct DayPlotTests {
    @Test func oneRowPerApp() {
        let trace = SimulatorTests.trace
        let result = SimulationPolicy.naive.run(trace, floor: 900)
        let svg = DayPlot(trace: trace, result: result, day: DayPlot.firstDayWithOpens(in: trace), caption: "naive <test>").svg()
        #expect(svg.hasPrefix("<svg xmlns=\"http://www.w3.org/2000/svg\""))
        #expect(svg.hasSuffix("</svg>\n"))
        #expect(svg.components(separatedBy: "<g class=\"app\"").count - 1 == 2)
        #expect(svg.contains("data-app=\"org.example.A\"") && svg.contains("data-app=\"org.example.B\""))
        #expect(svg.components(separatedBy: "<g").count == svg.components(separatedBy: "</g>").count)
        #expect(svg.contains("naive &lt;test&gt;"))
        // The night's sleep is shaded, and the legend names every mark.
        #expect(svg.contains("class=\"sleep\""))
        for label in ["open (until close)", "new content", "fetch: newData", "fetch: noData", "push wake", "machine asleep"] {
            #expect(svg.contains(">\(label)</text>"))
        }
    }

    @Test func generatedTracePlots() {
        var g = TraceGenerator()
        g.apps = 5
        g.days = 2
        let trace = g.generate()
        let svg = DayPlot(trace: trace, result: SimulationPolicy.oracle.run(trace, floor: 900), day: 1, caption: "oracle").svg()
        #expect(svg.components(separatedBy: "<g class=\"app\"").count - 1 == 5)
    }

    /// An app named with a control character made an SVG that no XML parser
    /// reads (XML 1.0 has no escape for it): it is replaced.
    @Test func controlCharactersInNamesKeepTheSVGWellFormed() throws {
        let trace = try Trace(parsing: """
            {"t":0,"kind":"register","app":"a\\u0001b","interval":0}
            {"t":36000,"kind":"open","app":"a\\u0001b"}
            {"t":36060,"kind":"close","app":"a\\u0001b"}
            """)
        let svg = DayPlot(trace: trace, result: SimulationPolicy.naive.run(trace, floor: 900), day: 0, caption: "x\u{1B}y").svg()
        #expect(!svg.unicodeScalars.contains { $0.value < 0x20 && $0 != "\n" }, "\(svg.prefix(400))")
        #expect(svg.contains("a\u{FFFD}b") && svg.contains("x\u{FFFD}y"))
    }
}
