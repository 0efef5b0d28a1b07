public import BgTaskCore
import Foundation

/// Traces for judging a planner on habits it was not built for: each app is
/// of one class, named in its id (`org.example.Erratic2`), and every class
/// draws its opens, content and pushes its own way. Written apart from
/// ``TraceGenerator`` (whose habits are the ones the planner was tuned on),
/// so that a planner that learns only that generator's shape shows it here.
///
/// Classes:
/// - `Habit`: one to three daily habits, Gaussian jitter (σ 12 min), kept on
///   ~90 % of weekdays; at weekends 1.5 h later and kept on ~55 % of days.
/// - `Heavy`: habits whose jitter is heavy-tailed: usually σ 8 min, one open
///   in six anywhere within ±3 h.
/// - `Shift`: a habit that moves by 4 h from the second week.
/// - `Fleeting`: a habit that appears on day 4, and one that vanishes on day 9.
/// - `Erratic`: zero to four opens a day at random waking hours.
/// - `Rare`: opened on about a quarter of days, at a random waking hour.
/// - `Burst`: any open pattern of the above (a habit), content in bursts
///   (1–3 a day, 3–10 items within 10 min).
/// - `Periodic`: a habit, content on the hour every 1–6 hours.
/// - `Push`: a habit, content announced by a silent push.
///
/// The machine sleeps most nights (23:00–07:00, ±45 min), stays awake on
/// about one night in five, and is away for a weekend day now and then.
public struct FamilyTraceGenerator: Sendable {
    public enum AppClass: String, Sendable, CaseIterable {
        case habit = "Habit"
        case heavy = "Heavy"
        case shift = "Shift"
        case fleeting = "Fleeting"
        case erratic = "Erratic"
        case rare = "Rare"
        case burst = "Burst"
        case periodic = "Periodic"
        case push = "Push"
    }

    public var days = 14
    public var seed: UInt64 = 1
    /// How many apps of each class.
    public var mix: [(AppClass, Int)] = [
        (.habit, 5), (.heavy, 3), (.shift, 1), (.fleeting, 2), (.erratic, 3), (.rare, 3), (.burst, 2), (.periodic, 2),
        (.push, 2),
    ]

    public init() {}

    /// The class an app id of this generator names, if any.
    public static func appClass(of app: String) -> AppClass? {
        let name = app.split(separator: ".").last.map(String.init) ?? app
        return AppClass.allCases.first { name.hasPrefix($0.rawValue) && Int(name.dropFirst($0.rawValue.count)) != nil }
    }

    public func generate() -> Trace {
        var rng = SplitMix64(seed: seed &* 0x9E37_79B9 &+ 17)
        var events: [(t: Int, rank: Int, event: TraceEvent)] = []
        func add(_ t: Int, _ kind: TraceEvent.Kind) {
            let event = TraceEvent(t: Double(t), kind)
            events.append((t, event.rank, event))
        }
        let end = days * 86_400
        let sleeps = nights(&rng, end: end)
        for (start, stop) in sleeps {
            add(start, .sleep)
            if stop < end { add(stop, .wake) }
        }
        func asleep(_ from: Int, _ to: Int) -> Bool { sleeps.contains { from < $0.1 + 60 && to > $0.0 - 60 } }

        for (appClass, count) in mix {
            for number in 1...max(count, 1) where count > 0 {
                let app = "org.example.\(appClass.rawValue)\(number)"
                add(0, .register(app: app, interval: 0))
                var opens: [Int] = []
                switch appClass {
                case .habit, .burst, .periodic, .push:
                    opens = habitual(&rng, habits: rng.int(1...3), jitter: { $0.gaussian(sigma: 12 * 60) })
                case .heavy:
                    opens = habitual(&rng, habits: rng.int(1...3)) { rng in
                        rng.chance(1.0 / 6) ? rng.uniform(-3 * 3600...3 * 3600) : rng.gaussian(sigma: 8 * 60)
                    }
                case .shift:
                    opens = habitual(&rng, habits: 2, jitter: { $0.gaussian(sigma: 10 * 60) }, shiftFrom: 7, shiftBy: 4 * 3600)
                case .fleeting:
                    let appearing = habitual(&rng, habits: 1, jitter: { $0.gaussian(sigma: 10 * 60) }).filter { $0 >= 4 * 86_400 }
                    let vanishing = habitual(&rng, habits: 1, jitter: { $0.gaussian(sigma: 10 * 60) }).filter { $0 < 9 * 86_400 }
                    opens = appearing + vanishing
                case .erratic:
                    for day in 0..<days {
                        for _ in 0..<rng.int(0...4) { opens.append(day * 86_400 + rng.int(7 * 3600 + 1800...22 * 3600)) }
                    }
                case .rare:
                    for day in 0..<days where rng.chance(0.25) { opens.append(day * 86_400 + rng.int(8 * 3600...22 * 3600)) }
                }
                var lastClose = -1
                for open in opens.sorted() {
                    let close = open + rng.int(60...900)
                    guard open > lastClose + 60, open >= 60, close < end, !asleep(open, close) else { continue }
                    add(open, .open(app: app))
                    add(close, .close(app: app))
                    lastClose = close
                }
                content(&rng, appClass, end: end) { t in
                    add(t, .content(app: app))
                    if appClass == .push { add(t + 1, .push(app: app, silent: true)) }
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

    /// Opens of daily habits at waking hours: kept on most weekdays, later
    /// and less often at weekends; a shifted habit moves from `shiftFrom`.
    private func habitual(
        _ rng: inout SplitMix64, habits: Int, jitter: (inout SplitMix64) -> Double, shiftFrom: Int = .max, shiftBy: Int = 0
    ) -> [Int] {
        var times: [Int] = []
        while times.count < habits {
            let time = rng.int(8 * 3600...(shiftBy > 0 ? 17 : 21) * 3600)
            if times.allSatisfy({ abs($0 - time) >= 2 * 3600 }) { times.append(time) }
        }
        let weekdayKeep = rng.uniform(0.85...0.95), weekendKeep = rng.uniform(0.45...0.65)
        var opens: [Int] = []
        for day in 0..<days {
            let weekend = day % 7 >= 5
            for time in times {
                let kept = rng.chance(weekend ? weekendKeep : weekdayKeep)
                let offset = Int(jitter(&rng))
                guard kept else { continue }
                opens.append(day * 86_400 + time + (weekend ? 5400 : 0) + (day >= shiftFrom ? shiftBy : 0) + offset)
            }
        }
        return opens
    }

    private func content(_ rng: inout SplitMix64, _ appClass: AppClass, end: Int, _ emit: (Int) -> Void) {
        switch appClass {
        case .burst:
            for day in 0..<days {
                for _ in 0..<rng.int(1...3) {
                    let start = day * 86_400 + rng.int(6 * 3600...23 * 3600)
                    for _ in 0..<rng.int(3...10) {
                        let t = start + rng.int(0...600)
                        if t < end { emit(t) }
                    }
                }
            }
        case .periodic:
            let period = rng.int(1...6) * 3600
            var t = period
            while t < end {
                emit(t)
                t += period
            }
        default:
            let rate = exp(rng.uniform(log(1)...log(24)))
            var t = rng.exponential(mean: 86_400 / rate)
            while t < Double(end) {
                emit(Int(t))
                t += rng.exponential(mean: 86_400 / rate)
            }
        }
    }

    /// Nights asleep: most from about 23:00 to 07:00; about one in five
    /// awake throughout; now and then a weekend day away (asleep until the next morning).
    private func nights(_ rng: inout SplitMix64, end: Int) -> [(Int, Int)] {
        var periods: [(Int, Int)] = [(0, 7 * 3600 + Int(rng.gaussian(sigma: 45 * 60)))]
        var day = 0
        while day < days {
            let awakeAllNight = rng.chance(0.2)
            let away = day % 7 == 5 && rng.chance(0.2)
            let start = day * 86_400 + 23 * 3600 + Int(rng.gaussian(sigma: 45 * 60))
            let stop = (day + (away ? 2 : 1)) * 86_400 + 7 * 3600 + Int(rng.gaussian(sigma: 45 * 60))
            if !awakeAllNight, start < end, start > periods.last!.1 { periods.append((start, min(stop, end + 86_400))) }
            day += away ? 2 : 1
        }
        return periods
    }
}

extension SplitMix64 {
    /// A normal deviate of mean 0 (Box–Muller).
    mutating func gaussian(sigma: Double) -> Double {
        let u = max(unit(), 1e-12), v = unit()
        return (-2 * log(u)).squareRoot() * cos(2 * .pi * v) * sigma
    }
}
