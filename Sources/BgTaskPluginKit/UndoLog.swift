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
    /// Sets `dictionary[key]` to `value`, noting how to put back what was
    /// there. `dictionary` is the owner's property, passed `inout`; `owner`
    /// gives the undo note the same property back:
    /// `undo.set(id, to: event, in: &events) { [unowned self] in $0(&self.events) }`.
    ///
    /// Key paths would read more simply, but each use of one cost about a
    /// microsecond on the path of every event.
    @inlinable public mutating func set<Key: Hashable, Value>(
        _ key: Key, to value: Value?, in dictionary: inout [Key: Value],
        owner: @escaping (_ change: (inout [Key: Value]) -> Void) -> Void
    ) {
        let old = if let value { dictionary.updateValue(value, forKey: key) } else { dictionary.removeValue(forKey: key) }
        record { owner { $0[key] = old } }
    }

    /// Puts `element` in `set` or takes it out, noting how to undo that;
    /// nothing when it is already so. `owner` as for dictionaries.
    @inlinable public mutating func set<Element: Hashable>(
        _ element: Element, contained contains: Bool, in set: inout Set<Element>,
        owner: @escaping (_ change: (inout Set<Element>) -> Void) -> Void
    ) {
        let changed = contains ? set.insert(element).inserted : set.remove(element) != nil
        guard changed else { return }
        record {
            owner { set in
                if contains { set.remove(element) } else { set.insert(element) }
            }
        }
    }
}
