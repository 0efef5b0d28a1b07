/// Tells which of an app's missed wakes count as offences: one per wake
/// budget. A plugin that hands each event a wake of its own (a push, a
/// location event) sees an app that missed them all at once miss each one:
/// sixteen pushes handed over together and not completed were sixteen
/// offences for one missed wake.
public struct OffenceWindow: Sendable {
    private var lastCounted: [String: UInt64] = [:]
    private let window: Double

    /// `wakeBudget`: the plugin's wake budget in seconds.
    public init(wakeBudget: Double) {
        window = wakeBudget * 1_000_000
    }

    /// Whether a wake of `app` that ran out at `now` (CLOCK_REALTIME µs)
    /// is an offence: none was counted within a wake budget before it.
    /// Notes it when it is, in `undo` too, so that a batch rolled back (a
    /// full disk) forgets it and its retry counts the offence; `owner`
    /// reaches the plugin's window, as for ``UndoLog/set(_:to:in:owner:)``.
    public mutating func counts(
        _ app: String, at now: UInt64, undo: inout UndoLog,
        owner: @escaping (_ change: (inout OffenceWindow) -> Void) -> Void
    ) -> Bool {
        if let last = lastCounted[app], now >= last, Double(now - last) < window { return false }
        let previous = lastCounted.updateValue(now, forKey: app)
        undo.record { owner { $0.lastCounted[app] = previous } }
        return true
    }
}
