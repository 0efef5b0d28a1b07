import BgTaskCore

/// What the daemon needs to undo a plugin's batch whose commit failed: the
/// engine as it was (a value: keeping it costs nothing until the batch
/// changes it), how many events each plugin had waiting, and the launches
/// the batch asked for, which start only once it has committed.
struct BatchCheckpoint {
    var engine: BackgroundEngine<SystemMonotonicClock>
    var queued: [Int]
    var launches: [(AppID, String)] = []
}
