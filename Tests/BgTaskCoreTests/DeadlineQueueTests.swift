import BgTaskCore
import Testing

/// The indexed heap behind every deadline: checked against a plain sorted list
/// over many random operations.
@Suite struct DeadlineQueueTests {

    @Test func matchesASortedModelUnderRandomOperations() {
        var queue = DeadlineQueue<Int, UInt64>()
        var model: [Int: (at: UInt64, order: Int)] = [:]
        var order = 0
        var rng = SplitMix64(seed: 42)
        var now: UInt64 = 0
        for _ in 0..<20_000 {
            let target = Int.random(in: 0..<200, using: &rng)
            switch Int.random(in: 0..<10, using: &rng) {
            case 0..<5:
                let at = now + UInt64.random(in: 0..<1000, using: &rng)
                if model[target]?.at != at {
                    order += 1
                    model[target] = (at, order)
                }
                queue.schedule(target, at: at)
            case 5..<7:
                model[target] = nil
                queue.cancel(target)
            default:
                now += UInt64.random(in: 0..<50, using: &rng)
                let expected = model.filter { $0.value.at <= now }
                    .sorted { ($0.value.at, $0.value.order) < ($1.value.at, $1.value.order) }.map(\.key)
                var popped: [Int] = []
                while let next = queue.popDue(at: now) { popped.append(next) }
                #expect(popped == expected)
                for key in popped { model[key] = nil }
            }
            #expect(queue.count == model.count)
            #expect(queue.earliest() == model.values.map(\.at).min())
            #expect(queue.deadline(of: target) == model[target]?.at)
        }
    }

    @Test func tiesComeOutInScheduleOrder() {
        var queue = DeadlineQueue<String, Int>()
        for name in ["c", "a", "b"] { queue.schedule(name, at: 5) }
        queue.schedule("a", at: 4)
        queue.schedule("a", at: 5)  // rescheduled: now after c and b
        #expect([queue.popDue(at: 5), queue.popDue(at: 5), queue.popDue(at: 5)] == ["c", "b", "a"])
        #expect(queue.popDue(at: 5) == nil)
    }
}
