import BgTaskCore
import BgTaskSimulator
import Testing

@Suite struct GeneratorTests {
    static func generator(seed: UInt64, shifts: [HabitShift] = []) -> TraceGenerator {
        var g = TraceGenerator()
        g.apps = 8
        g.days = 10
        g.seed = seed
        g.shifts = shifts
        return g
    }

    @Test func sameSeedSameBytes() {
        let one = Self.generator(seed: 42).generate().jsonLines
        #expect(one == Self.generator(seed: 42).generate().jsonLines)
        #expect(one != Self.generator(seed: 43).generate().jsonLines)
    }

    @Test func roundTrips() throws {
        let trace = Self.generator(seed: 7).generate()
        #expect(try Trace(parsing: trace.jsonLines) == trace)
        #expect(trace.apps.count == 8)
        // All apps register at t = 0 with interval 0; times are whole seconds, sorted.
        let registers = trace.events.filter { if case .register = $0.kind { true } else { false } }
        #expect(registers.count == 8 && registers.allSatisfy { $0.t == 0 && $0.kind == .register(app: $0.app!, interval: 0) })
        #expect(trace.events.allSatisfy { $0.t == $0.t.rounded() })
        #expect(zip(trace.events, trace.events.dropFirst()).allSatisfy { $0.t <= $1.t })
        // The machine sleeps every night.
        #expect(trace.events.filter { $0.kind == .sleep }.count == 11)
        #expect(trace.events.contains { $0.kind == .open(app: TraceGenerator.appName(0)) })
        #expect(trace.events.contains { $0.kind == .content(app: TraceGenerator.appName(0)) })
    }

    @Test func aShiftMovesTheOpens() {
        let app = TraceGenerator.appName(0)
        let trace = Self.generator(seed: 3, shifts: [HabitShift(app: 0, fromDay: 7, hours: 4)]).generate()
        let opens = trace.events.filter { $0.kind == .open(app: app) }
        // Weekdays before (days 1–4) and after (7–9) the shift; trace day 0 is a Monday.
        func meanTimeOfDay(_ days: ClosedRange<Int>) -> Double {
            let times = opens.filter { days.contains(Int($0.t / 86_400)) }.map { $0.t.truncatingRemainder(dividingBy: 86_400) }
            return times.reduce(0, +) / Double(times.count)
        }
        let moved = (meanTimeOfDay(7...9) - meanTimeOfDay(1...4)) / 3600
        #expect(abs(moved - 4) < 0.75, "moved \(moved) h")
        #expect(HabitShift("0:7:4") == HabitShift(app: 0, fromDay: 7, hours: 4))
        #expect(HabitShift("0:7") == nil)
    }

    @Test func splitMixIsTheReferenceSequence() {
        // SplitMix64 seeded with 0: the first outputs of the reference implementation.
        var rng = SplitMix64(seed: 0)
        #expect(rng.next() == 0xE220_A839_7B1D_CDAF)
        #expect(rng.next() == 0x6E78_9E6A_A1B9_65F4)
    }
}
