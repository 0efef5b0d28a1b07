/// What undoing a batch takes, change by change: a plugin notes, before each
/// change of its memory in a call or an event, how to put it back, and runs
/// the notes backwards if the host rolls the batch back (see
/// ``ModePlugin/rollBack()``). Its cost is the size of what changed, never
/// the size of everything the plugin holds.
public struct UndoLog {
    @usableFromInline var steps: [() -> Void] = []

    @inlinable public init() {}

    /// Whether anything was noted since ``clear()``.
    @inlinable public var isEmpty: Bool { steps.isEmpty }

    /// Notes how to undo the change about to be made.
    @inlinable public mutating func record(_ undo: @escaping () -> Void) {
        steps.append(undo)
    }

    /// Forgets the notes: a new batch begins.
    @inlinable public mutating func clear() {
        steps.removeAll(keepingCapacity: true)
    }

    /// Undoes everything noted, the last change first, and forgets the notes.
    @inlinable public mutating func undoAll() {
        let undo = steps
        steps.removeAll(keepingCapacity: true)
        for step in undo.reversed() { step() }
    }
}

extension UndoLog {
    /// Sets `owner[keyPath: dictionary][key]` to `value`, noting how to put
    /// back what was there.
    @inlinable public mutating func set<Owner: AnyObject, Key: Hashable, Value>(
        _ dictionary: ReferenceWritableKeyPath<Owner, [Key: Value]>, of owner: Owner, _ key: Key, to value: Value?
    ) {
        let old = owner[keyPath: dictionary][key]
        record { [unowned owner] in owner[keyPath: dictionary][key] = old }
        owner[keyPath: dictionary][key] = value
    }

    /// Puts `element` in `owner[keyPath: set]` or takes it out, noting how to
    /// undo that; nothing when it is already so.
    @inlinable public mutating func set<Owner: AnyObject, Element: Hashable>(
        _ set: ReferenceWritableKeyPath<Owner, Set<Element>>, of owner: Owner, _ element: Element, contains: Bool
    ) {
        guard owner[keyPath: set].contains(element) != contains else { return }
        record { [unowned owner] in
            if contains { owner[keyPath: set].remove(element) } else { owner[keyPath: set].insert(element) }
        }
        if contains { owner[keyPath: set].insert(element) } else { owner[keyPath: set].remove(element) }
    }
}
