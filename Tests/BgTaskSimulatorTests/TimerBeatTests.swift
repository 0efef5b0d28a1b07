import BgTaskCore
import BgTaskSimulator
import Testing

/// At the opens the adaptive planner expects, an app is never staler than
/// under one plain interval timer per app (the naive policy): it fetches on
/// that timer's beats there, and learns on them.
@Suite struct TimerBeatTests {
    @Test func atUsualOpensAdaptiveIsNeverStalerThanTheTimer() {
        var generator = TraceGenerator()
        generator.seed = 7
        generator.apps = 6
        generator.days = 10
        // Every habit kept every day, with little jitter: every open is a usual one.
        generator.openProbability = 1...1
        generator.jitterMinutes = 10
        generator.contentPerDay = 24...72
        let trace = generator.generate()
        let adaptive = SimulationPolicy.adaptive.run(trace, floor: 900)
        let naive = SimulationPolicy.naive.run(trace, floor: 900)

        var staleUnderTimer = 0
        for (app, days) in naive.staleness {
            let ours = adaptive.staleness[app] ?? []
            #expect(ours.map(\.count) == days.map(\.count), "the same opens")
            for (day, ages) in days.enumerated() where day < ours.count {
                for (index, age) in ages.enumerated() where index < ours[day].count {
                    if age > 0 { staleUnderTimer += 1 }
                    #expect(ours[day][index] <= age, "\(app), day \(day), open \(index + 1): \(ours[day][index]) s vs \(age) s")
                }
            }
        }
        #expect(staleUnderTimer >= 10, "the timer left some opens stale, so the comparison can fail")
        // With this much news it is fetched often away from opens too, but still less.
        #expect(adaptive.metrics.fetchWakes < naive.metrics.fetchWakes)
    }
}
