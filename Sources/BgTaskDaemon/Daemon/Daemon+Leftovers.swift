import Logging
import SDBus

extension Daemon {
    /// Thaws what a daemon killed while apps were frozen left so, when this
    /// start cannot go on because its database is refused: the journal beside
    /// it needs nothing from the database, and a frozen app must not wait
    /// for a damaged database to be mended (nor stay frozen for good when the
    /// state directory is moved away with its journal). Not when another
    /// daemon holds the database (`busy`): the journal is that daemon's.
    static func thawLeftovers(refusedWith error: StoreError, settings: Settings, logger: Logger) {
        guard error.code != .busy else { return }
        thawLeftovers(settings: settings, logger: logger)
    }

    /// The same for a start that stops after it opened its database (a
    /// full disk at its first write, no bus): it held the database, so what
    /// the journal and its launches' cgroups hold is its own.
    static func thawLeftovers(settings: Settings, logger: Logger) {
        // What another user could have put there is not acted on.
        guard StateStore.writableByOthers(settings.stateDirectory) == nil else { return }
        let database = StateStore.path(inDirectory: settings.stateDirectory)
        // The launches' own cgroups, whether or not the journal could be written.
        let thawedCgroups = AppLauncher.thawCgroupsOfEarlierRuns(group: cgroupGroup(forStateDirectory: database), logger: logger)
        let journal = FreezeJournal(path: database + ".frozen", logger: logger) { $0() }
        let leftovers = journal.takeLeftovers()
        guard !leftovers.isEmpty else {
            if thawedCgroups > 0 { logger.notice("thawed \(thawedCgroups) apps it launched left frozen by a daemon that stopped without thawing them, before giving up") }
            return
        }
        // Opened only for a unit, which the user manager thaws.
        var bus: Bus?
        for entry in leftovers {
            FreezeJournal.thaw(entry, logger: logger) { name in
                do throws(BusError) {
                    if bus == nil { bus = try Bus.open(settings.bus, description: "bgtaskd-thaw") }
                    try SystemdUserManager(bus: bus!).thawAndWait(unit: name)
                } catch {
                    logger.warning("cannot thaw unit \(name): \(error.message)")
                }
            }
        }
        logger.notice("thawed \(leftovers.count) apps left frozen by a daemon that stopped without thawing them, before giving up")
    }
}
