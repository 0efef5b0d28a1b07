import BgTaskCore
import BgTaskProtocol
import CBgTaskShim
import Glibc
import SDBus

// Sleep and wake (docs/DESIGN.md §6). logind's PrepareForSleep and the
// Manager's SimulateSleep/SimulateWake take the same path: asleep, the engine
// suspends every background app (the freezer freezes them) and stops every
// clock; the state is made durable; only then is logind's delay lock
// released. Awake, the lock is taken again and the backlog drains in turns.

/// Why the machine sleeps.
enum SleepSource: String, Sendable {
    /// logind's PrepareForSleep(true).
    case logind
    /// A trusted caller's SimulateSleep.
    case simulated
}

extension Daemon {
    /// How long the daemon lets freezes complete before it releases logind's
    /// lock anyway: well inside logind's wait (InhibitDelayMaxUSec).
    var sleepSettleTimeout: UInt64 { min(1_000_000, logind.delayMax / 4) }

    /// The machine goes to sleep: suspend background apps, make the state
    /// durable, then `done` (with how long it took, µs, and true). Asked again
    /// while asleep, `done` runs when the sleep under way is ready (at once if
    /// it is). A wake that comes first answers every waiter at once, with
    /// false: the machine is awake (see ``leaveSleep(_:cause:)``).
    func enterSleep(_ source: SleepSource, done: @escaping (_ elapsed: UInt64, _ asleep: Bool) -> Void = { _, _ in }) {
        if let current = sleepSource {
            guard sleepWaiters.isEmpty else {
                logger.notice("asked to sleep (\(source.rawValue)) while already going to sleep (\(current.rawValue)): answered when that is ready")
                return sleepWaiters.append(done)
            }
            // Ready, but what was written since (pushes stored while a
            // simulated sleep held) must be on disk too: this may be the real one.
            logger.notice("asked to sleep (\(source.rawValue)) while already asleep (\(current.rawValue)): apps stay frozen; writing the state to disk again")
            do {
                try store.checkpoint()
            } catch {
                logger.warning("cannot make the state durable before sleep: \(error)")
            }
            return done(0, true)
        }
        let started = bgt_monotonic_usec()
        sleepSource = source
        sleepGeneration &+= 1
        let generation = sleepGeneration
        sleepWaiters = [done]
        logger.info("going to sleep (\(source == .logind ? "logind: PrepareForSleep(true)" : "SimulateSleep")): freezing background apps, stopping their clocks")
        perform(engine.setSleeping(true))
        freezer.whenSettled(timeout: sleepSettleTimeout) { [weak self] complete in
            // A wake came first: its waiters were answered then.
            guard let self, generation == self.sleepGeneration, self.sleepSource != nil else { return }
            // What must survive the sleep (a battery that runs out) is on disk before the machine sleeps.
            do {
                try self.store.checkpoint()
            } catch {
                self.logger.warning("cannot make the state durable before sleep: \(error)")
            }
            let elapsed = bgt_monotonic_usec() - started
            let unfinished = complete ? "" : " (some freezes had not completed)"
            self.logger.info(
                "ready to sleep in \(elapsed / 1000).\(elapsed % 1000 / 100) ms: \(self.freezer.frozenCount) app instances frozen\(unfinished)")
            let waiters = self.sleepWaiters
            self.sleepWaiters.removeAll()
            for waiter in waiters { waiter(elapsed, true) }
        }
    }

    /// The machine woke: clocks run again and the backlog drains in turns.
    /// `cause` says what ended the sleep when it is not the source's own word.
    func leaveSleep(_ source: SleepSource, cause: String? = nil) {
        guard let current = sleepSource else {
            logger.notice("told of a wake (\(source.rawValue)) while awake: nothing to do")
            return
        }
        sleepSource = nil
        // A sleep that was not ready yet: its waiters hear of it now (awake, logind's lock is kept).
        let waiters = sleepWaiters
        sleepWaiters.removeAll()
        if !waiters.isEmpty { logger.notice("woken before the sleep was ready") }
        for waiter in waiters { waiter(0, false) }
        let most = settings.configuration.maxConcurrentWakes
        // What woke it, not what put it to sleep: logind's resume also ends a simulated sleep.
        let why = cause ?? (source == .simulated ? "SimulateWake"
            : current == .simulated ? "logind: PrepareForSleep(false), which ends the simulated sleep too" : "logind: PrepareForSleep(false)")
        logger.info("awake (\(why))")
        perform(engine.setSleeping(false))
        // Only when something is left to drain (it said so after every wake).
        let backlog = engine.backlog
        if !backlog.running.isEmpty || !backlog.waiting.isEmpty {
            let count = backlog.running.count + backlog.waiting.count
            logger.info("""
                draining the backlog of \(count) \(count == 1 ? "app" : "apps") in turns of at most \(most) \
                \(most == 1 ? "app" : "apps"), \(settings.configuration.chunkSec) s each
                """)
        }
    }

    // MARK: logind

    func logindPrepareForSleep(_ sleeping: Bool) {
        if sleeping {
            if sleepSource == .simulated {
                logger.notice("logind: PrepareForSleep(true) during a simulated sleep: the sleep is logind's now")
                sleepSource = .logind
            }
            enterSleep(.logind) { [weak self] elapsed, _ in
                // Woken before the sleep was ready: the lock is kept (the machine is awake).
                guard let self, self.sleepSource != nil else { return }
                guard self.logind.releaseInhibitor() else { return }
                let limit = self.logind.delayMax
                let text = "released logind's sleep delay lock \(elapsed / 1000) ms after PrepareForSleep(true) (logind waits up to \(limit / 1000) ms)"
                if elapsed > limit { self.logger.warning("\(text): too late, logind went on without waiting") } else { self.logger.info("\(text)") }
            }
        } else {
            logind.takeInhibitor()
            if sleepSource == nil {
                logger.notice("logind: PrepareForSleep(false) without a sleep: nothing to drain")
                return
            }
            leaveSleep(.logind)
        }
    }

    /// logind went away: a sleep it announced has no end coming from it.
    func logindVanished() {
        if sleepSource == .logind {
            logger.notice("logind left the bus while the machine was asleep by its word: counting that as a wake")
            leaveSleep(.logind, cause: "logind left the bus")
        }
    }

    // MARK: The backlog

    func logDrain() {
        let (running, waiting) = engine.backlog
        if !engine.isDraining, sleepSource != nil {
            logger.info("the backlog's turns stop for the sleep: the next wake drains what is left")
        } else if !engine.isDraining {
            logger.info("backlog drained: background apps run as usual")
        } else {
            logger.info("draining the backlog: running \(running.map(\.description).joined(separator: ", ")); waiting \(waiting.count)")
        }
    }

    /// The Backlog property: apps having their turn, then those waiting.
    func getBacklog(_ reply: Message) throws(BusError) {
        let (running, waiting) = engine.backlog
        try reply.container("a", "s") { () throws(BusError) in
            for key in running + waiting { try reply.append(key.description) }
        }
    }
}
