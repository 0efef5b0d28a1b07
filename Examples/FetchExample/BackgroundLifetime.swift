import Glibc
import Synchronization

/// Decides when an app that bgtaskd launched in the background leaves.
///
/// On iOS such an app is suspended once it has called the completion
/// handler of the fetch or push it was woken for. Here the app exits
/// instead: `stay` seconds after its last fetch or push was completed (and
/// the daemon took the answer), unless another one began meanwhile. An app
/// started by the user does not use this; it runs until it is told to stop.
final class BackgroundLifetime: Sendable {
    private struct State {
        /// Fetches and pushes handed to the app and not yet answered by the daemon.
        var inFlight = 0
        /// Bumped at every change, so that an older exit timer knows it is stale.
        var generation = 0
    }

    private let state = Mutex(State())
    private let stay: Double
    private let onExit: @Sendable () -> Void

    /// - Parameters:
    ///   - stay: Seconds to linger once idle.
    ///   - onExit: Runs right before the process exits (to say goodbye).
    init(stay: Double, onExit: @escaping @Sendable () -> Void) {
        self.stay = stay
        self.onExit = onExit
    }

    /// A fetch or a push began: do not exit while it runs.
    func wakeStarted() {
        state.withLock { state in
            state.inFlight += 1
            state.generation += 1
        }
    }

    /// A fetch or a push is over (the daemon answered CompleteFetch or
    /// CompleteNotification, or the call failed).
    func wakeFinished() {
        let idle = state.withLock { state -> Int? in
            state.inFlight = max(0, state.inFlight - 1)
            state.generation += 1
            return state.inFlight == 0 ? state.generation : nil
        }
        if let idle { exitLater(ifStill: idle) }
    }

    /// Nothing to do right now (no event was waiting at check-in): leave
    /// after `stay` seconds unless a fetch or a push arrives first.
    func idle() {
        let generation = state.withLock { state -> Int? in
            state.inFlight == 0 ? state.generation : nil
        }
        if let generation { exitLater(ifStill: generation) }
    }

    private func exitLater(ifStill generation: Int) {
        Task { [self] in
            let start = ContinuousClock.now
            try? await Task.sleep(for: .seconds(stay))
            // Woken far later than asked: bgtaskd suspended (froze) the app
            // meanwhile, and thawed it for a new event (which must not be
            // dropped by leaving now) or because it is stopping. Wait again.
            guard ContinuousClock.now - start < .seconds(stay) + .seconds(1) else { return exitLater(ifStill: generation) }
            let stillIdle = state.withLock { $0.generation == generation && $0.inFlight == 0 }
            guard stillIdle else { return }
            onExit()
            exit(0)
        }
    }
}
