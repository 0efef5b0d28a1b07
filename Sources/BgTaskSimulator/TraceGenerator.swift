// Implementation notes
//
// Daily habits: each app gets 1–4 habitual open times (at least 90 min apart,
// while the machine is awake), opened on most days (85–95 % per habit) with a
// triangular jitter of ±20 min and a stay of 1–15 min; at weekends the same
// habits come up to 90 min later. A habit shift moves one app's habits from
// a given day on. Opens that would touch the machine's sleep, or overlap the
// app's previous open, are dropped.
//
// Content is a Poisson process per app, its rate drawn log-uniformly from
// `contentPerDay`; a share of the apps ("bursty") get most of theirs on
// weekdays 09:00–18:00 (8× the rate of other hours, by thinning). The machine
// sleeps every night from `sleepFrom` to `sleepUntil` (±10 min). An app can
// be given a steady rate of its own (`contentPerDayOf`). All apps
// register at t = 0 with interval 0 ("minimum"). Times are whole seconds.
//
// Everything comes from one SplitMix64 seeded with `seed`, drawn in a fixed
// order: the same options give the same trace, byte for byte.

import BgTaskCore

/// Makes synthetic traces with daily habits for `bgtaskd-sim`.
public struct TraceGenerator: Sendable {
    public var apps = 30
    public var days = 14
    public var seed: UInt64 = 1
    /// Habitual open times per app per day.
    public var habitsPerDay: ClosedRange<Int> = 1...4
    /// The chance, per app, that a habit is kept on a given day.
    public var openProbability: ClosedRange<Double> = 0.85...0.95
    /// Half-width of the triangular jitter of an open around its habit, minutes.
    public var jitterMinutes = 20.0
    /// How long an open lasts, minutes.
    public var openMinutes: ClosedRange<Double> = 1...15
    /// Content items per day, per app (drawn log-uniformly).
    public var contentPerDay: ClosedRange<Double> = 0.5...24
    /// The share of apps whose content comes mostly in working hours.
    public var burstyShare = 0.3
    /// Silent pushes per app per day (Poisson); 0 for none.
    public var pushesPerDay = 0.0
    /// The machine goes to sleep at this time of day (seconds after midnight)…
    public var sleepFrom = 23 * 3600 + 30 * 60
    /// …and wakes at this one; equal to `sleepFrom` for a machine that never sleeps.
    public var sleepUntil = 7 * 3600
    /// Habit shifts to apply.
    public var shifts: [HabitShift] = []
    /// Content items per day for some apps (by index), steady all day: overrides the drawn rate.
    public var contentPerDayOf: [Int: Double] = [:]

    public init() {}

    private static let names = [
        "News", "Mail", "Weather", "Podcasts", "Chat", "Calendar", "Stocks", "Photos", "Notes", "Reader",
        "Sports", "Music", "Maps", "Tasks", "Social", "Forum", "Feeds", "Video", "Books", "Bank",
        "Travel", "Recipes", "Fitness", "Wiki", "Radio", "Comics", "Jobs", "Shop", "Games", "Radar",
    ]

    /// The app id of app number `index`.
    public static func appName(_ index: Int) -> String {
        let name = names[index % names.count]
        return "org.example." + (index < names.count ? name : name + String(index / names.count + 1))
    }

    private struct Habits {
        var weekday: [Int]  // seconds after midnight
        var weekendDelay: Int
        var keep: Double
        var contentRate: Double  // per day
        var bursty: Bool
    }

    /// Generates the trace.
    public func generate() -> Trace {
        var rng = SplitMix64(seed: seed)
        var events: [(t: Int, rank: Int, event: TraceEvent)] = []
        func add(_ t: Int, _ kind: TraceEvent.Kind) {
            let event = TraceEvent(t: Double(t), kind)
            events.append((t, event.rank, event))
        }

        let end = days * 86_400
        let sleeps = sleepPeriods(&rng, end: end)
        for (start, stop) in sleeps {
            add(start, .sleep)
            if stop < end { add(stop, .wake) }
        }
        // The awake part of the day habits are drawn from, with room for jitter and stay.
        let margin = Int(jitterMinutes * 60) + Int(openMinutes.upperBound * 60) + 600
        let (awakeFrom, awakeTo): (Int, Int) = sleepFrom == sleepUntil
            ? (margin, 86_400 - margin)
            : sleepUntil < sleepFrom ? (sleepUntil + margin, sleepFrom - margin) : (sleepUntil + margin, sleepFrom - margin + 86_400)

        for index in 0..<apps {
            let app = Self.appName(index)
            add(0, .register(app: app, interval: 0))
            let shift = shifts.last { $0.app == index }
            var habits = drawHabits(&rng, from: awakeFrom, to: awakeTo, shift: shift.map { Int($0.hours * 3600) } ?? 0)
            if let rate = contentPerDayOf[index] {
                habits.contentRate = rate
                habits.bursty = false
            }

            var lastClose = -1
            for day in 0..<days {
                let weekend = day % 7 >= 5  // trace day 0 is a Monday
                let delta = (weekend ? habits.weekendDelay : 0) + (shift.map { day >= $0.fromDay ? Int($0.hours * 3600) : 0 } ?? 0)
                for habit in habits.weekday {
                    // Draw every number whether or not the open is kept, so one open's fate does not move the rest.
                    let kept = rng.chance(habits.keep)
                    let jitter = Int(rng.triangular(halfWidth: jitterMinutes * 60))
                    let stay = Int(rng.uniform(openMinutes.lowerBound * 60...openMinutes.upperBound * 60))
                    let open = day * 86_400 + habit + delta + jitter
                    let close = open + max(stay, 1)
                    guard kept, open > lastClose + 60, open >= 0, close < end,
                        !sleeps.contains(where: { open < $0.1 + 60 && close > $0.0 - 60 })
                    else { continue }
                    add(open, .open(app: app))
                    add(close, .close(app: app))
                    lastClose = close
                }
            }

            // Content: a Poisson process, thinned for bursty apps.
            let working = 8.0, other = 1.0
            let peak = habits.bursty ? habits.contentRate * working / ((9 * working + 15 * other) / 24) : habits.contentRate
            var t = peak > 0 ? rng.exponential(mean: 86_400 / peak) : .infinity
            while t < Double(end) {
                let second = Int(t)
                var accept = true
                if habits.bursty {
                    let hour = second % 86_400 / 3600
                    let busy = (second / 86_400) % 7 < 5 && hour >= 9 && hour < 18
                    accept = rng.chance(busy ? 1 : other / working)
                }
                if accept { add(second, .content(app: app)) }
                t += rng.exponential(mean: 86_400 / peak)
            }
            if pushesPerDay > 0 {
                var p = rng.exponential(mean: 86_400 / pushesPerDay)
                while p < Double(end) {
                    add(Int(p), .push(app: app, silent: true))
                    p += rng.exponential(mean: 86_400 / pushesPerDay)
                }
            }
        }

        events.sort { ($0.t, $0.rank) < ($1.t, $1.rank) }
        do {
            return try Trace(events: events.map(\.event))
        } catch {
            preconditionFailure("generated an invalid trace: \(error)")
        }
    }

    /// The machine's nights: [start, end) in trace seconds, the first from t = 0 if it sleeps at midnight.
    private func sleepPeriods(_ rng: inout SplitMix64, end: Int) -> [(Int, Int)] {
        guard sleepFrom != sleepUntil else { return [] }
        let jitter = 600.0
        var periods: [(Int, Int)] = []
        if sleepUntil < sleepFrom {
            // Across midnight: asleep at the start, then from each evening to the next morning.
            periods.append((0, sleepUntil + Int(rng.triangular(halfWidth: jitter))))
            for day in 0..<days {
                let start = day * 86_400 + sleepFrom + Int(rng.triangular(halfWidth: jitter))
                let stop = (day + 1) * 86_400 + sleepUntil + Int(rng.triangular(halfWidth: jitter))
                if start < end { periods.append((start, stop)) }
            }
        } else {
            for day in 0..<days {
                let start = day * 86_400 + sleepFrom + Int(rng.triangular(halfWidth: jitter))
                let stop = day * 86_400 + sleepUntil + Int(rng.triangular(halfWidth: jitter))
                if start < end { periods.append((max(start, 0), stop)) }
            }
        }
        return periods
    }

    private func drawHabits(_ rng: inout SplitMix64, from: Int, to: Int, shift: Int) -> Habits {
        // A shifted app's habits are drawn where both the old and the new times are awake.
        let low = max(from, from - shift), high = max(low, min(to, to - shift))
        let count = rng.int(habitsPerDay)
        var times: [Int] = []
        var attempts = 0
        while times.count < count, attempts < 200 {
            attempts += 1
            let time = rng.int(low...high)
            if times.allSatisfy({ abs($0 - time) >= 90 * 60 }) { times.append(time) }
        }
        times.sort()
        let weekendDelay = rng.int(0...90) * 60
        let keep = rng.uniform(openProbability)
        let lowRate = log(max(contentPerDay.lowerBound, 1e-6)), highRate = log(max(contentPerDay.upperBound, 1e-6))
        let contentRate = exp(rng.uniform(lowRate...highRate))
        let bursty = rng.chance(burstyShare)
        return Habits(weekday: times, weekendDelay: weekendDelay, keep: keep, contentRate: contentRate, bursty: bursty)
    }
}

import Foundation
