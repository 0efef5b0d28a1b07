import Glibc
import Synchronization

/// Ends a process bgtaskd launched in the background once it has nothing
/// left to do, as iOS suspends an app woken for a region event once the
/// event is handled.
///
/// Every event handed to the app is counted until the daemon has
/// acknowledged its completion; when none is left, the process exits after
/// a short grace period (another event may follow: several crossings are
/// often delivered together), unless an event arrived meanwhile.
final class IdleExit: Sendable {
    private struct Counts {
        var open = 0
        /// Changes with every event begun or finished: a grace period that
        /// sees another number knows something happened meanwhile.
        var epoch = 0
    }

    private let counts = Mutex(Counts())
    private let grace: Double
    private let farewell: @Sendable () -> Void

    /// - Parameters:
    ///   - grace: Seconds to wait, idle, before exiting.
    ///   - farewell: Runs just before the process exits.
    init(grace: Double, farewell: @escaping @Sendable () -> Void) {
        self.grace = grace
        self.farewell = farewell
    }

    /// An event was handed to the app.
    func began() {
        counts.withLock { counts in
            counts.open += 1
            counts.epoch += 1
        }
    }

    /// The daemon took (or refused) an event's completion.
    func finished() {
        let epoch = counts.withLock { counts -> Int? in
            counts.open = max(0, counts.open - 1)
            counts.epoch += 1
            return counts.open == 0 ? counts.epoch : nil
        }
        if let epoch { scheduleExit(at: epoch) }
    }

    /// The app has nothing to do now (no event waited at check-in).
    func nothingToDo() {
        let epoch = counts.withLock { $0.open == 0 ? $0.epoch : nil }
        if let epoch { scheduleExit(at: epoch) }
    }

    private func scheduleExit(at epoch: Int) {
        Task {
            let start = ContinuousClock.now
            try? await Task.sleep(for: .seconds(grace))
            // Woken far later than asked: bgtaskd suspended (froze) the app
            // meanwhile, and thawed it for a new event (which must not be
            // dropped by leaving now) or because it is stopping. Wait again.
            guard ContinuousClock.now - start < .seconds(grace) + .seconds(1) else { return scheduleExit(at: epoch) }
            guard counts.withLock({ $0.open == 0 && $0.epoch == epoch }) else { return }
            farewell()
            exit(0)
        }
    }
}
