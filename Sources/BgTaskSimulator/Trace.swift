import BgTaskFetchCore
import BgTaskCore

/// A trace of what users, servers and the machine did (docs/DESIGN.md §8): JSON Lines
/// sorted by `t`, read and written here, and checked on the way in so the
/// simulator can trust it (sorted, every close after its open, no open while
/// the machine sleeps, sleep and wake alternating).
public struct Trace: Sendable, Equatable {
    /// Trace second 0 is this many seconds after the epoch: 1970-01-05 00:00
    /// UTC, a Monday, so weekdays in a trace are weekdays to the planners
    /// (which treat UTC as local time with `utcOffset` 0).
    public static let baseSeconds: UInt64 = 345_600

    /// The events, sorted by `t`.
    public private(set) var events: [TraceEvent]
    /// Every app the trace names, in the order it first does.
    public private(set) var apps: [String]

    /// A checked trace of `events`; an error names the 1-based index of the offending event as its line.
    public init(events: [TraceEvent]) throws(TraceError) {
        var checker = Checker()
        for (index, event) in events.enumerated() { try checker.check(event, line: index + 1) }
        self.events = events
        apps = checker.apps
    }

    /// Reads JSON Lines; blank lines are skipped. Unknown fields are ignored.
    public init(parsing text: String) throws(TraceError) {
        let bytes = Array(text.utf8)
        var checker = Checker()
        var events: [TraceEvent] = []
        events.reserveCapacity(bytes.count / 48)
        var line = 0
        var start = 0
        while start < bytes.count {
            line += 1
            var end = start
            while end < bytes.count, bytes[end] != UInt8(ascii: "\n") { end += 1 }
            defer { start = end + 1 }
            var last = end
            while last > start, bytes[last - 1] == 0x20 || bytes[last - 1] == 0x09 || bytes[last - 1] == 0x0D { last -= 1 }
            var first = start
            while first < last, bytes[first] == 0x20 || bytes[first] == 0x09 { first += 1 }
            if first == last { continue }
            let event = try Self.event(bytes, first..<last, line: line)
            try checker.check(event, line: line)
            events.append(event)
        }
        self.events = events
        apps = checker.apps
    }

    /// The trace as JSON Lines, one event per line, each ending in a newline.
    public var jsonLines: String {
        var text = ""
        text.reserveCapacity(events.count * 56)
        for event in events {
            text += event.jsonLine
            text += "\n"
        }
        return text
    }

    /// Seconds from the first to the last event's `t` (0 for an empty trace).
    public var duration: Double { events.last?.t ?? 0 }

    /// Trace seconds as realtime µs: `(base + t) · 10⁶`.
    public static func realtime(_ t: Double) -> UInt64 {
        UInt64(((Double(baseSeconds) + t) * 1_000_000).rounded())
    }

    /// Realtime µs as trace seconds.
    public static func seconds(_ realtime: UInt64) -> Double {
        Double(Int64(bitPattern: realtime &- baseSeconds * 1_000_000)) / 1_000_000
    }

    private static func event(_ bytes: [UInt8], _ range: Range<Int>, line: Int) throws(TraceError) -> TraceEvent {
        let object: FlatJSONObject
        do {
            object = try FlatJSONObject(bytes, range)
        } catch {
            throw TraceError(line: line, error.message)
        }
        guard let tValue = object["t"] else { throw TraceError(line: line, "missing \"t\" (seconds from the trace start)") }
        guard case .number(let t) = tValue else { throw TraceError(line: line, "\"t\" is \(tValue.typeName), expected a number of seconds") }
        guard let kindValue = object["kind"] else { throw TraceError(line: line, "missing \"kind\"") }
        guard case .string(let kind) = kindValue else { throw TraceError(line: line, "\"kind\" is \(kindValue.typeName), expected a string") }

        func app() throws(TraceError) -> String {
            guard let value = object["app"] else { throw TraceError(line: line, "\(kind) without \"app\"") }
            guard case .string(let app) = value else { throw TraceError(line: line, "\"app\" is \(value.typeName), expected a string") }
            return app
        }

        switch kind {
        case "register":
            guard let value = object["interval"] else {
                throw TraceError(line: line, "register without \"interval\" (seconds as SetMinimumFetchInterval: 0 is minimum)")
            }
            guard case .number(let interval) = value else { throw TraceError(line: line, "\"interval\" is \(value.typeName), expected a number") }
            return TraceEvent(t: t, .register(app: try app(), interval: interval))
        case "open": return TraceEvent(t: t, .open(app: try app()))
        case "close": return TraceEvent(t: t, .close(app: try app()))
        case "content": return TraceEvent(t: t, .content(app: try app()))
        case "sleep": return TraceEvent(t: t, .sleep)
        case "wake": return TraceEvent(t: t, .wake)
        case "push":
            var silent = true
            if let value = object["silent"] {
                guard case .bool(let flag) = value else { throw TraceError(line: line, "\"silent\" is \(value.typeName), expected true or false") }
                silent = flag
            }
            return TraceEvent(t: t, .push(app: try app(), silent: silent))
        default:
            throw TraceError(line: line, "unknown kind \"\(kind.prefix(40))\" (expected register, open, close, content, sleep, wake or push)")
        }
    }

    /// The checks every trace passes, event by event.
    private struct Checker {
        /// The latest time a trace may hold: 400 days.
        static let maximumT = 400.0 * 86_400
        var apps: [String] = []
        var known: Set<String> = []
        var lastT = 0.0
        var lastLine = 0
        /// Open apps and the line that opened them.
        var openSince: [String: Int] = [:]
        /// The line the machine went to sleep on, while it sleeps.
        var sleepingSince: Int?

        mutating func check(_ event: TraceEvent, line: Int) throws(TraceError) {
            let t = event.t
            guard t.isFinite, t >= 0 else { throw TraceError(line: line, "t \(t) is not a time (seconds ≥ 0)") }
            // A simulation's cost grows with its span: 1e11 s (3,000 years) took half an hour.
            guard t <= Self.maximumT else {
                throw TraceError(line: line, "t \(TraceEvent.number(t)) is more than 400 days (\(TraceEvent.number(Self.maximumT)) s) from the trace start")
            }
            guard t >= lastT else {
                throw TraceError(line: line, "t \(TraceEvent.number(t)) is before t \(TraceEvent.number(lastT)) on line \(lastLine): a trace is sorted by t")
            }
            lastT = t
            lastLine = line
            if let app = event.app {
                guard !app.isEmpty else { throw TraceError(line: line, "\"app\" is empty") }
                if known.insert(app).inserted { apps.append(app) }
            }
            switch event.kind {
            case .register(_, let interval):
                do {
                    _ = try FetchInterval(seconds: interval)
                } catch {
                    throw TraceError(line: line, error.message)
                }
            case .open(let app):
                if let since = openSince[app] { throw TraceError(line: line, "open of \(app), which is already open (since line \(since))") }
                if let since = sleepingSince { throw TraceError(line: line, "open of \(app) while the machine sleeps (since line \(since))") }
                openSince[app] = line
            case .close(let app):
                guard openSince.removeValue(forKey: app) != nil else { throw TraceError(line: line, "close of \(app) without an open") }
            case .sleep:
                if let since = sleepingSince { throw TraceError(line: line, "sleep while the machine already sleeps (since line \(since))") }
                sleepingSince = line
            case .wake:
                guard sleepingSince != nil else { throw TraceError(line: line, "wake while the machine is awake") }
                sleepingSince = nil
            case .content, .push:
                break
            }
        }
    }
}
