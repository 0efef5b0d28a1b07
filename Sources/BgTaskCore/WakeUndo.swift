/// How to undo one wake the engine was asked for, or one completion (see
/// ``BackgroundEngine/undoPoint(token:app:)``). Taken when a plugin's batch of
/// writes asks for the change, applied if that batch's commit fails, so the
/// engine keeps no trace of a wake whose event was never sent. It holds only
/// what those two changes touch — the wake, its place among the app's, the
/// app's launch — so taking it costs the same however much the engine holds.
public struct WakeUndo: Sendable {
    let key: AppKey
    let token: String
    /// Whether the app had a record (a wake for an app not known creates one).
    let appExisted: Bool
    let launch: LaunchRecord?
    let wake: WakeRecord?
    /// Where the token was among the app's wakes.
    let wakeIndex: Int?
}
