import BgTaskSimulator
import Testing

@Suite struct TraceTests {
    @Test func parsesEveryKind() throws {
        let text = """
            {"t":0,"kind":"register","app":"org.example.News","interval":0}

            {"t":1.5,"kind":"open","app":"org.example.News","extra":null}
            {"kind":"close","t":2,"app":"org.example.News"}
            {"t":3,"kind":"content","app":"org.example.A\\u00e9\\"x"}
            {"t":4,"kind":"sleep"}
            {"t":5,"kind":"push","app":"org.example.News","silent":false}
            {"t":6,"kind":"wake"}
            {"t":7,"kind":"push","app":"org.example.News"}
            {"t":8,"kind":"register","app":"org.example.News","interval":1e300}
            """
        let trace = try Trace(parsing: text)
        #expect(trace.events == [
            TraceEvent(t: 0, .register(app: "org.example.News", interval: 0)),
            TraceEvent(t: 1.5, .open(app: "org.example.News")),
            TraceEvent(t: 2, .close(app: "org.example.News")),
            TraceEvent(t: 3, .content(app: "org.example.Aé\"x")),
            TraceEvent(t: 4, .sleep),
            TraceEvent(t: 5, .push(app: "org.example.News", silent: false)),
            TraceEvent(t: 6, .wake),
            TraceEvent(t: 7, .push(app: "org.example.News", silent: true)),
            TraceEvent(t: 8, .register(app: "org.example.News", interval: 1e300)),
        ])
        #expect(trace.apps == ["org.example.News", "org.example.Aé\"x"])
        // Writing and reading gives the same trace.
        #expect(try Trace(parsing: trace.jsonLines) == trace)
        #expect(trace.events[1].jsonLine == #"{"t":1.5,"kind":"open","app":"org.example.News"}"#)
    }

    @Test(arguments: [
        (#"{"t":0,"kind":"open","app":"a"#, 1, "bad JSON"),
        (#"{"t":0,"kind":"open","app":"a"} x"#, 1, "after the object"),
        (#"[1,2]"#, 1, "JSON object"),
        (#"{"t":0,"kind":"fly","app":"a"}"#, 1, "unknown kind \"fly\""),
        (#"{"t":0,"kind":"open"}"#, 1, "open without \"app\""),
        (#"{"kind":"open","app":"a"}"#, 1, "missing \"t\""),
        (#"{"t":"0","kind":"open","app":"a"}"#, 1, "\"t\" is a string"),
        (#"{"t":-1,"kind":"sleep"}"#, 1, "not a time"),
        // A simulation's cost grows with its span: a two-line trace reaching 1e11 s ran for half an hour.
        (#"{"t":34560001,"kind":"sleep"}"#, 1, "more than 400 days"),
        (#"{"t":0,"kind":"register","app":"a"}"#, 1, "without \"interval\""),
        (#"{"t":0,"kind":"register","app":"a","interval":-5}"#, 1, "negative"),
        (#"{"t":0,"kind":"push","app":"a","silent":1}"#, 1, "true or false"),
        (#"{"t":0,"kind":"open","app":{"x":1}}"#, 1, "nested"),
        ("{\"t\":5,\"kind\":\"sleep\"}\n{\"t\":4,\"kind\":\"wake\"}", 2, "before t 5 on line 1"),
        ("{\"t\":0,\"kind\":\"open\",\"app\":\"a\"}\n\n{\"t\":1,\"kind\":\"close\",\"app\":\"b\"}", 3, "close of b without an open"),
        ("{\"t\":0,\"kind\":\"open\",\"app\":\"a\"}\n{\"t\":1,\"kind\":\"open\",\"app\":\"a\"}", 2, "already open (since line 1)"),
        ("{\"t\":0,\"kind\":\"sleep\"}\n{\"t\":1,\"kind\":\"open\",\"app\":\"a\"}", 2, "while the machine sleeps"),
        ("{\"t\":0,\"kind\":\"sleep\"}\n{\"t\":1,\"kind\":\"sleep\"}", 2, "already sleeps"),
        ("{\"t\":0,\"kind\":\"wake\"}", 1, "wake while the machine is awake"),
    ])
    func errorsNameTheLine(_ text: String, _ line: Int, _ message: String) {
        let error = #expect(throws: TraceError.self) { try Trace(parsing: text) }
        #expect(error?.line == line)
        #expect(error?.description.hasPrefix("line \(line): ") == true)
        #expect(error?.message.contains(message) == true, "\(error?.message ?? "")")
    }

    @Test func eventsAreCheckedToo() {
        let error = #expect(throws: TraceError.self) {
            try Trace(events: [TraceEvent(t: 0, .open(app: "a")), TraceEvent(t: 1, .open(app: "a"))])
        }
        #expect(error?.line == 2)
    }

    @Test func realtimeMapping() {
        // Trace second 0 is Monday 1970-01-05 00:00 UTC.
        #expect(Trace.realtime(0) == 345_600_000_000)
        #expect(Trace.realtime(1.5) == 345_601_500_000)
        #expect(Trace.seconds(345_601_500_000) == 1.5)
    }
}
