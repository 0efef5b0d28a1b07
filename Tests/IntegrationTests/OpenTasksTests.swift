@testable import BackgroundTasks
import Testing

/// The SDK's record of the app's open tasks across daemon restarts, alone.
@Suite struct OpenTasksTests {
    @Test func aTaskBegunAgainKeepsTheAppsIDAndEndsUnderTheDaemons() {
        var open = OpenTasks()
        _ = open.began(3, name: "upload", expirationHandler: nil)
        open.detachAll()
        #expect(open.detached.map(\.id) == [3])
        let reattached = open.reattach(3, as: 65537)
        #expect(reattached)
        #expect(open.appID(for: 65537) == 3)
        let ended = open.end(3)
        #expect(ended == 65537)
        #expect(open.appID(for: 65537) == 65537, "forgotten once ended")
    }

    @Test func aTaskEndedWhileNoDaemonHoldsItNeedsNoCallAndItsNewIDIsEnded() {
        var open = OpenTasks()
        _ = open.began(3, name: "upload", expirationHandler: nil)
        open.detachAll()
        let whileDetached = open.end(3)
        #expect(whileDetached == nil, "no daemon holds it: nothing to call")
        let reattached = open.reattach(3, as: 65537)
        #expect(!reattached, "the new daemon's task is to be ended")
        let unknown = open.end(3)
        #expect(unknown == 3, "unknown now: the daemon answers for it")
    }

    @Test func theHandlerRunsOnceAndAnExpiryForgetsTheTask() {
        var open = OpenTasks()
        _ = open.began(3, name: "upload", expirationHandler: {})
        open.detachAll()
        _ = open.reattach(3, as: 65537)
        let first = open.takeExpirationHandler(daemonID: 65537)
        #expect(first.id == 3 && first.handler != nil)
        let second = open.takeExpirationHandler(daemonID: 65537)
        #expect(second.handler == nil)
        let expired = open.expired(daemonID: 65537)
        #expect(expired == 3)
        #expect(open.tasks.isEmpty)
    }

    @Test func aTaskTheNewDaemonRefusesIsLostWithItsHandler() {
        var open = OpenTasks()
        _ = open.began(3, name: "upload", expirationHandler: {})
        _ = open.began(4, name: "save", expirationHandler: nil)
        open.detachAll()
        #expect(open.detached.map(\.name) == ["upload", "save"])
        let upload = open.lost(3), save = open.lost(4)
        #expect(upload != nil && save == nil && open.tasks.isEmpty)
    }

    /// A new daemon may hand out an id the app still holds for a task of an
    /// earlier one (its ids start again when they run out, or its state was
    /// lost): the new task took the old one's place, and ending the old
    /// ended the new. It gets another id of the app's now.
    @Test func aNewDaemonsIDTheAppHoldsAlreadyIsGivenAnother() {
        var open = OpenTasks()
        _ = open.began(1, name: "old", expirationHandler: nil)
        open.detachAll()
        let id = open.began(1, name: "new", expirationHandler: nil)
        #expect(id == 2)
        #expect(open.detached.map(\.name) == ["old"], "only the old one is to be asked for again")
        let reattached = open.reattach(1, as: 7)
        #expect(reattached)
        #expect(open.appID(for: 1) == 2 && open.appID(for: 7) == 1)
        let ended = open.end(2)
        #expect(ended == 1, "the new task is the daemon's 1")
        // A warning for a daemon id the app does not hold runs no other task's handler.
        let handler = open.takeExpirationHandler(daemonID: 2).handler
        #expect(handler == nil)
        // One that names another task of the app's (held by no daemon) is not that task's.
        open.detachAll()
        let stray = open.takeExpirationHandler(daemonID: 1)
        let strayExpiry = open.expired(daemonID: 1)
        #expect(stray.id == nil && strayExpiry == nil && open.tasks.count == 1)
    }
}
