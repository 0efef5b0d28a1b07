import BgTaskPluginKit
import Testing

/// The undo notes plugins keep so that a rolled-back batch leaves their memory as it was.
@Suite struct UndoLogTests {
    /// A plugin's memory in miniature.
    final class Owner {
        var undo = UndoLog()
        var values: [String: Int] = [:]
        var members: Set<String> = []

        func set(_ key: String, _ value: Int?) {
            undo.set(key, to: value, in: &values) { [unowned self] in $0(&self.values) }
        }

        func set(_ member: String, in contained: Bool) {
            undo.set(member, contained: contained, in: &members) { [unowned self] in $0(&self.members) }
        }
    }

    @Test func undoingPutsDictionaryEntriesBackAsTheyWere() {
        let owner = Owner()
        owner.values = ["kept": 1, "replaced": 2, "removed": 3]
        owner.set("replaced", 20)
        owner.set("removed", nil)
        owner.set("added", 4)
        owner.set("added", 5)
        #expect(owner.values == ["kept": 1, "replaced": 20, "added": 5])
        owner.undo.undoAll()
        #expect(owner.values == ["kept": 1, "replaced": 2, "removed": 3])
        #expect(owner.undo.isEmpty)
    }

    @Test func undoingPutsSetMembershipBackAndSkipsNoChange() {
        let owner = Owner()
        owner.members = ["in", "out"]
        owner.set("in", in: true)  // already in: nothing to note
        #expect(owner.undo.isEmpty)
        owner.set("out", in: false)
        owner.set("new", in: true)
        #expect(owner.members == ["in", "new"])
        owner.undo.undoAll()
        #expect(owner.members == ["in", "out"])
    }

    /// Several changes to one key or member in a batch, in either order,
    /// undo to what was there before the first.
    @Test func changesToOneKeyUndoToTheFirstState() {
        let owner = Owner()
        owner.values = ["k": 1]
        owner.set("k", nil)
        owner.set("k", 2)
        owner.set("fresh", 3)
        owner.set("fresh", nil)
        owner.members = ["m"]
        owner.set("m", in: false)
        owner.set("m", in: true)
        owner.set("n", in: true)
        owner.set("n", in: false)
        #expect(owner.values == ["k": 2] && owner.members == ["m"])
        owner.undo.undoAll()
        #expect(owner.values == ["k": 1])
        #expect(owner.members == ["m"])
    }

    @Test func clearedNotesUndoNothing() {
        let owner = Owner()
        owner.set("a", 1)
        owner.undo.clear()
        owner.undo.undoAll()
        #expect(owner.values == ["a": 1])
    }
}
