import CBgTaskShim
import CSystemd

/// Work the loop runs once after the current callback each time it is
/// ``schedule()``d: one sd-event defer source made once and re-enabled,
/// where ``EventLoop/later(_:)`` makes and frees a source per job. For
/// something asked for on every event (a plugin's flush).
public final class DeferredJob {
    private let source: EventSource

    init(source: EventSource) {
        self.source = source
    }

    /// Runs the job once after the current callback; asking again before it ran changes nothing.
    public func schedule() {
        guard let handle = source.handle else { return }
        sd_event_source_set_enabled(handle, bgt_event_oneshot)
    }
}
