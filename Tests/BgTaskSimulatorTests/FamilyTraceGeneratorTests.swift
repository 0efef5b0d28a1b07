import BgTaskSimulator
import Testing

/// The trace families: deterministic, every class present and named, and
/// each class keeping its shape.
struct FamilyTraceGeneratorTests {
    func trace(seed: UInt64) -> Trace {
        var generator = FamilyTraceGenerator()
        generator.seed = seed
        return generator.generate()
    }

    @Test func theSameSeedGivesTheSameTrace() {
        #expect(trace(seed: 5).events == trace(seed: 5).events)
        #expect(trace(seed: 5).events != trace(seed: 6).events)
    }

    @Test func everyAppIsOfANamedClass() {
        let apps = trace(seed: 1).apps
        #expect(apps.count == 23)
        #expect(Set(apps.compactMap(FamilyTraceGenerator.appClass(of:))) == Set(FamilyTraceGenerator.AppClass.allCases))
        #expect(FamilyTraceGenerator.appClass(of: "org.example.Weather") == nil)
        #expect(FamilyTraceGenerator.appClass(of: "org.example.Rare12") == .rare)
    }

    @Test func classesKeepTheirShapes() {
        var rareDays = 0, habitDays = 0, pushes = 0, contents = 0
        for seed in 1...10 as ClosedRange<UInt64> {
            let events = trace(seed: seed).events
            rareDays += Set(events.compactMap { event -> Int? in
                guard case .open(let app) = event.kind, app == "org.example.Rare1" else { return nil }
                return Int(event.t) / 86_400
            }).count
            habitDays += Set(events.compactMap { event -> Int? in
                guard case .open(let app) = event.kind, app == "org.example.Habit1" else { return nil }
                return Int(event.t) / 86_400
            }).count
            for event in events {
                if case .push(let app, true) = event.kind, app == "org.example.Push1" { pushes += 1 }
                if case .content(let app) = event.kind, app == "org.example.Push1" { contents += 1 }
            }
        }
        // Over 10 traces of 14 days: a rare app on about a quarter of days (less the nights it would be asleep).
        #expect((15...50).contains(rareDays), "\(rareDays)")
        #expect(habitDays > 80, "\(habitDays)")
        #expect(pushes == contents && pushes > 0, "pushed content is announced")
    }
}
