/// A change of habit in a generated trace: from `fromDay` on (0-based trace
/// day), app number `app` is opened `hours` later than it used to be.
public struct HabitShift: Sendable, Equatable, CustomStringConvertible {
    /// 0-based index of the app in the generated trace.
    public var app: Int
    /// 0-based trace day of the first shifted opens.
    public var fromDay: Int
    /// How much later (negative: earlier) the opens come.
    public var hours: Double

    public init(app: Int, fromDay: Int, hours: Double) {
        self.app = app
        self.fromDay = fromDay
        self.hours = hours
    }

    /// Parses `APP:DAY:HOURS`, e.g. `0:7:4`.
    public init?(_ text: String) {
        let parts = text.split(separator: ":", omittingEmptySubsequences: false)
        guard parts.count == 3, let app = Int(parts[0]), app >= 0, let day = Int(parts[1]), day >= 0,
            let hours = Double(parts[2]), hours.isFinite, abs(hours) < 24
        else { return nil }
        self.init(app: app, fromDay: day, hours: hours)
    }

    public var description: String { "\(app):\(fromDay):\(TraceEvent.number(hours))" }
}
