import BgTaskCore

/// What the daemon needs to undo a plugin's batch whose commit failed: the
/// engine as it was before the batch first changed it (a value, kept only
/// then: a batch that leaves the engine alone copies nothing), how many
/// events each plugin had waiting, and the launches the batch asked for,
/// which start only once it has committed.
struct BatchCheckpoint {
    var engine: BackgroundEngine<SystemMonotonicClock>?
    var queued: [Int]
    var launches: [(AppID, String)] = []
}
