import BgTaskCore

/// What the daemon needs to undo a plugin's batch whose commit failed: how
/// to undo each wake and completion it asked the engine for (one app's state
/// each, not the whole engine's), how many events each plugin had waiting,
/// and the launches the batch asked for, which start only once it has committed.
struct BatchCheckpoint {
    var undo: [WakeUndo] = []
    var queued: [Int]
    var launches: [(AppID, String)] = []
}
