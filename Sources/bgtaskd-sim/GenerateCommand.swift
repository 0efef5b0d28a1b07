import ArgumentParser
import BgTaskSimulator
import BgTaskProtocol
import Foundation

/// Writes a synthetic trace with daily habits.
struct GenerateCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "generate",
        abstract: "Write a synthetic trace: apps with daily habits, Poisson content, a machine that sleeps at night.",
        discussion: """
            Each app has a few habitual open times a day (kept on most days, jittered, later at weekends) and \
            content arriving at its own rate (some apps mostly in working hours). All apps register at t=0 with \
            interval 0. The same options and seed give the same trace, byte for byte.
            """
    )

    @Option(help: "Number of apps.") var apps = 30
    @Option(help: "Number of days (day 0 is a Monday).") var days = 14
    @Option(help: "PRNG seed.") var seed: UInt64 = 1
    @Option(name: .shortAndLong, help: ArgumentHelp("Write here instead of standard output.", valueName: "file")) var output: String?

    @Option(name: .customLong("habits-per-day"), help: ArgumentHelp("Habitual open times per app per day, A-B.", valueName: "range"))
    var habitsPerDay = "1-4"
    @Option(name: .customLong("open-probability"), help: ArgumentHelp("Chance a habit is kept on a day (drawn per app), A-B.", valueName: "range"))
    var openProbability = "0.85-0.95"
    @Option(name: .customLong("jitter-minutes"), help: "Half-width of the jitter of an open around its habit, minutes.")
    var jitterMinutes = 20.0
    @Option(name: .customLong("open-minutes"), help: ArgumentHelp("How long an open lasts, minutes, A-B.", valueName: "range"))
    var openMinutes = "1-15"
    @Option(name: .customLong("content-per-day"), help: ArgumentHelp("Content items per app per day (drawn log-uniformly per app), A-B.", valueName: "range"))
    var contentPerDay = "0.5-24"
    @Option(name: .customLong("bursty-share"), help: "Share of apps whose content comes mostly on weekdays 09:00-18:00.")
    var burstyShare = 0.3
    @Option(name: .customLong("pushes-per-day"), help: "Silent pushes per app per day.")
    var pushesPerDay = 0.0
    @Option(name: .customLong("sleep-from"), help: ArgumentHelp("The machine sleeps every night from HH:MM…", valueName: "HH:MM"))
    var sleepFrom = "23:30"
    @Option(name: .customLong("sleep-until"), help: ArgumentHelp("…until HH:MM (the same time as --sleep-from: never).", valueName: "HH:MM"))
    var sleepUntil = "07:00"
    @Option(name: .customLong("shift"), help: ArgumentHelp("From 0-based DAY on, open app APP_INDEX HOURS later (repeatable).", valueName: "APP_INDEX:DAY:HOURS"))
    var shifts: [String] = []
    @Flag(name: .customLong("family"), help: "Write the trace `evaluate` judges on for --seed (apps of every class, named by class; --days holds, the other shape options do not).")
    var family = false
    @Option(name: .customLong("app-content"), help: ArgumentHelp("Give app APP_INDEX a steady PER_DAY content items a day (repeatable).", valueName: "APP_INDEX:PER_DAY"))
    var appContent: [String] = []

    /// "APP_INDEX:PER_DAY".
    static func appRate(_ text: String) -> (Int, Double)? {
        let parts = text.split(separator: ":")
        guard parts.count == 2, let app = Int(parts[0]), app >= 0, let rate = Double(parts[1]), rate.isFinite, rate >= 0 else { return nil }
        return (app, rate)
    }

    func validate() throws {
        try Arguments.checkSize(apps: apps, days: days)
        guard let habits = Arguments.range(habitsPerDay), habits.lowerBound >= 0, habits.upperBound <= 12 else {
            throw ValidationError("--habits-per-day must be A-B with 0 ≤ A ≤ B ≤ 12")
        }
        guard let p = Arguments.range(openProbability), p.upperBound <= 1 else { throw ValidationError("--open-probability must be A-B within 0-1") }
        guard Arguments.range(openMinutes).map({ $0.upperBound <= 120 }) ?? false else { throw ValidationError("--open-minutes must be A-B, at most 120") }
        guard let content = Arguments.range(contentPerDay), content.upperBound <= Arguments.maximumPerDay else {
            throw ValidationError("--content-per-day must be A-B, at most \(Int(Arguments.maximumPerDay)) (one a minute)")
        }
        guard (0...1).contains(burstyShare) else { throw ValidationError("--bursty-share must be within 0-1") }
        guard (0...Arguments.maximumPerDay).contains(pushesPerDay) else {
            throw ValidationError("--pushes-per-day must be from 0 to \(Int(Arguments.maximumPerDay)) (one a minute)")
        }
        guard jitterMinutes >= 0, jitterMinutes <= 180 else { throw ValidationError("--jitter-minutes must be within 0-180") }
        guard Arguments.clock(sleepFrom) != nil, Arguments.clock(sleepUntil) != nil else { throw ValidationError("--sleep-from and --sleep-until take HH:MM") }
        for shift in shifts {
            guard let parsed = HabitShift(shift) else { throw ValidationError("--shift takes APP_INDEX:DAY:HOURS, e.g. 0:7:4 (got '\(shift)')") }
            guard parsed.app < apps else { throw ValidationError("--shift \(shift): there are only \(apps) apps") }
        }
        for rate in appContent {
            guard let (app, perDay) = Self.appRate(rate), perDay <= Arguments.maximumPerDay else {
                throw ValidationError("--app-content takes APP_INDEX:PER_DAY with PER_DAY at most \(Int(Arguments.maximumPerDay)), e.g. 0:24 (got '\(rate)')")
            }
            guard app < apps else { throw ValidationError("--app-content \(rate): there are only \(apps) apps") }
        }
    }

    /// The generator these options describe (validated).
    var generator: TraceGenerator {
        var g = TraceGenerator()
        g.apps = apps
        g.days = days
        g.seed = seed
        let habits = Arguments.range(habitsPerDay)!
        g.habitsPerDay = Int(habits.lowerBound)...Int(habits.upperBound)
        g.openProbability = Arguments.range(openProbability)!
        g.jitterMinutes = jitterMinutes
        g.openMinutes = Arguments.range(openMinutes)!
        g.contentPerDay = Arguments.range(contentPerDay)!
        g.burstyShare = burstyShare
        g.pushesPerDay = pushesPerDay
        g.sleepFrom = Arguments.clock(sleepFrom)!
        g.sleepUntil = Arguments.clock(sleepUntil)!
        g.shifts = shifts.compactMap(HabitShift.init)
        for rate in appContent { if let (app, perDay) = Self.appRate(rate) { g.contentPerDayOf[app] = perDay } }
        return g
    }

    func run() throws {
        var familyGenerator = FamilyTraceGenerator()
        (familyGenerator.seed, familyGenerator.days) = (seed, days)
        let text = (family ? familyGenerator.generate() : generator.generate()).jsonLines
        if let output {
            do {
                try OutputFile.write(text, to: output)
            } catch {
                throw SimError("cannot write \(output): \(error)")
            }
        } else {
            do {
                try OutputFile.write(text, toDescriptor: STDOUT_FILENO)
            } catch {
                throw SimError("cannot write standard output: \(error)")
            }
        }
    }
}
