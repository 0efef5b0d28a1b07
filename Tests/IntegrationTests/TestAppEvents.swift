import BgTaskTestKit
import Foundation

/// Reads the JSON-lines events `bgtaskd-testapp` prints.
extension ChildProcess {
    /// Every event printed so far, decoded.
    var events: [[String: Any]] {
        lines.compactMap { line in
            guard let data = line.data(using: .utf8) else { return nil }
            return (try? JSONSerialization.jsonObject(with: data)) as? [String: Any]
        }
    }

    /// Names of the events printed so far, in order.
    var eventNames: [String] { events.compactMap { $0["event"] as? String } }

    /// Waits for the first event named `name`; nil on timeout.
    @discardableResult
    func waitForEvent(_ name: String, timeout: Duration = .seconds(15)) -> [String: Any]? {
        let needle = "\"event\":\"\(name)\""
        guard let line = waitForLine(timeout: timeout, where: { $0.replacingOccurrences(of: " ", with: "").contains(needle) }),
              let data = line.data(using: .utf8) else { return nil }
        return (try? JSONSerialization.jsonObject(with: data)) as? [String: Any]
    }

    /// The events named `name` printed so far, in order.
    func events(named name: String) -> [[String: Any]] {
        events.filter { $0["event"] as? String == name }
    }

    /// Waits until `count` events named `name` were printed; returns them
    /// (fewer on timeout).
    @discardableResult
    func waitForEvents(_ name: String, count: Int, timeout: Duration = .seconds(15)) -> [[String: Any]] {
        let deadline = ContinuousClock.now + timeout
        var found = events(named: name)
        while found.count < count && ContinuousClock.now < deadline {
            Thread.sleep(forTimeInterval: 0.02)
            found = events(named: name)
        }
        return found
    }
}

extension DaemonUnderTest {
    /// Polls the Tasks property until `predicate` holds (or the timeout passes).
    func waitForTasks(timeout: Duration = .seconds(10), _ predicate: (String) -> Bool) throws -> String {
        let deadline = ContinuousClock.now + timeout
        var value = try property("Tasks")
        while !predicate(value) && ContinuousClock.now < deadline {
            Thread.sleep(forTimeInterval: 0.02)
            value = try property("Tasks")
        }
        return value
    }
}
