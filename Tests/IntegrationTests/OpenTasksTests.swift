@testable import BackgroundTasks
import Testing

/// The SDK's record of the app's open tasks across daemon restarts, alone.
@Suite struct OpenTasksTests {
    @Test func aTaskBegunAgainKeepsTheAppsIDAndEndsUnderTheDaemons() {
        var open = OpenTasks()
        open.began(3, name: "upload", expirationHandler: nil)
        let detached = open.detachAll()
        #expect(detached.map(\.id) == [3])
        let reattached = open.reattach(3, as: 65537)
        #expect(reattached)
        #expect(open.appID(for: 65537) == 3)
        let ended = open.end(3)
        #expect(ended == 65537)
        #expect(open.appID(for: 65537) == 65537, "forgotten once ended")
    }

    @Test func aTaskEndedWhileNoDaemonHoldsItNeedsNoCallAndItsNewIDIsEnded() {
        var open = OpenTasks()
        open.began(3, name: "upload", expirationHandler: nil)
        _ = open.detachAll()
        let whileDetached = open.end(3)
        #expect(whileDetached == nil, "no daemon holds it: nothing to call")
        let reattached = open.reattach(3, as: 65537)
        #expect(!reattached, "the new daemon's task is to be ended")
        let unknown = open.end(3)
        #expect(unknown == 3, "unknown now: the daemon answers for it")
    }

    @Test func theHandlerRunsOnceAndAnExpiryForgetsTheTask() {
        var open = OpenTasks()
        open.began(3, name: "upload", expirationHandler: {})
        _ = open.detachAll()
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
        open.began(3, name: "upload", expirationHandler: {})
        open.began(4, name: "save", expirationHandler: nil)
        let detached = open.detachAll()
        #expect(detached.map(\.name) == ["upload", "save"])
        let upload = open.lost(3), save = open.lost(4)
        #expect(upload != nil && save == nil && open.tasks.isEmpty)
    }
}
