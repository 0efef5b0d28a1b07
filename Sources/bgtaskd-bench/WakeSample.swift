/// One wake through the daemon, timed on CLOCK_MONOTONIC in µs: from the
/// call that starts it to the signal reaching the app, to the call's reply,
/// and the app's completion call (`CompleteFetch`, `CompleteNotification`).
struct WakeSample {
    var signal: Double
    var reply: Double
    var complete: Double
}
