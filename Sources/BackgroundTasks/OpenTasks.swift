/// The app's open background tasks as the SDK keeps them, so that a daemon
/// that restarted (and knows none of them) can be asked for them again.
///
/// The app keeps the id the daemon first handed out for a task. A task begun
/// again in a restarted daemon gets a new id there; the daemon's signals name
/// that id, and this maps it back to the app's.
struct OpenTasks: Sendable {
    struct Task: Sendable {
        var name: String
        /// Its id in the daemon that holds it; nil while it is asked for again.
        var daemonID: UInt32?
        /// Runs at most once: cleared when it runs.
        var expirationHandler: (@Sendable () -> Void)?
    }

    /// By the app's id.
    private(set) var tasks: [UInt32: Task] = [:]
    /// The app's id of each daemon id that differs from it.
    private var renamed: [UInt32: UInt32] = [:]

    /// The daemon answered BeginBackgroundTask with `daemonID`; returns the
    /// id the app gets: the daemon's, unless the app holds that id already
    /// for a task of an earlier daemon (a new daemon may hand out the same
    /// ids again), then the next free one, mapped to the daemon's.
    mutating func began(_ daemonID: UInt32, name: String, expirationHandler: (@Sendable () -> Void)?) -> UInt32 {
        var id = daemonID
        while tasks[id] != nil || id == 0 { id &+= 1 }
        tasks[id] = Task(name: name, daemonID: daemonID, expirationHandler: expirationHandler)
        if id != daemonID { renamed[daemonID] = id }
        return id
    }

    /// The app ends its task `id`: forgets it and returns the id to end in
    /// the daemon, or nil when no daemon holds it (it is being asked for
    /// again: the answer ends it then). An id this does not know goes to the
    /// daemon as it is, which answers for it.
    mutating func end(_ id: UInt32) -> UInt32? {
        guard let task = tasks.removeValue(forKey: id) else { return id }
        guard let daemonID = task.daemonID else { return nil }
        renamed[daemonID] = nil
        return daemonID
    }

    /// The app's id for the daemon's `daemonID`.
    func appID(for daemonID: UInt32) -> UInt32 {
        renamed[daemonID] ?? daemonID
    }

    /// The expiration handler of the task the daemon calls `daemonID`, taken
    /// out so that it runs once; with the app's id, nil when that id is of
    /// another task of the app's (one no daemon holds, or another's).
    mutating func takeExpirationHandler(daemonID: UInt32) -> (id: UInt32?, handler: (@Sendable () -> Void)?) {
        let id = appID(for: daemonID)
        guard let task = tasks[id] else { return (id, nil) }
        guard task.daemonID == daemonID else { return (nil, nil) }
        let handler = tasks[id]?.expirationHandler
        tasks[id]?.expirationHandler = nil
        return (id, handler)
    }

    /// The daemon closed the task it calls `daemonID` (it expired): forgotten;
    /// returns the app's id, nil when that id is of another task of the app's.
    mutating func expired(daemonID: UInt32) -> UInt32? {
        let id = appID(for: daemonID)
        renamed[daemonID] = nil
        guard let task = tasks[id] else { return id }
        guard task.daemonID == daemonID else { return nil }
        tasks[id] = nil
        return id
    }

    /// The daemon went away: no daemon holds any task now.
    mutating func detachAll() {
        renamed.removeAll()
        for id in tasks.keys { tasks[id]?.daemonID = nil }
    }

    /// The tasks no daemon holds, to ask the present one for, by the app's
    /// id in the order begun (not those begun in it already).
    var detached: [(id: UInt32, name: String)] {
        tasks.keys.sorted().compactMap { id in tasks[id]!.daemonID == nil ? (id, tasks[id]!.name) : nil }
    }

    /// A restarted daemon began the app's task `id` again as `daemonID`.
    /// False when the app ended it meanwhile (or the daemon went again and
    /// it is asked for anew): then `daemonID` is to be ended.
    mutating func reattach(_ id: UInt32, as daemonID: UInt32) -> Bool {
        guard tasks[id] != nil, tasks[id]?.daemonID == nil else { return false }
        tasks[id]?.daemonID = daemonID
        if daemonID != id { renamed[daemonID] = id }
        return true
    }

    /// A restarted daemon refused to begin the task again: it is gone.
    /// Returns its expiration handler, if it had not run.
    mutating func lost(_ id: UInt32) -> (@Sendable () -> Void)? {
        guard let task = tasks[id], task.daemonID == nil else { return nil }
        tasks[id] = nil
        return task.expirationHandler
    }
}
