import BgTaskPluginABI

/// Hands work from a plugin's own threads (an HTTP client's) back to the
/// daemon's loop (ABI 1.7 `post`). The one piece of ``PluginHost`` that may
/// be used from any thread: keep it, not the host, in code that runs elsewhere.
///
/// ```swift
/// let poster = host.poster
/// client.onProgress { bytes in poster.post { [weak self] in self?.progressed(bytes) } }
/// ```
public struct PluginPoster: @unchecked Sendable {
    // Both stay valid while the plugin runs; `post` is safe on any thread by the ABI's word.
    private let api: UnsafePointer<bgt_host_api>
    private let handle: OpaquePointer

    private let hostHasPost: Bool

    init(api: UnsafePointer<bgt_host_api>, handle: OpaquePointer, hostHasPost: Bool) {
        self.api = api
        self.handle = handle
        self.hostHasPost = hostHasPost
    }

    /// A job in flight: retained until the loop runs it.
    private final class Job {
        let body: @Sendable () -> Void
        init(_ body: @escaping @Sendable () -> Void) { self.body = body }
    }

    /// Runs `job` on the loop thread, soon, as one batch; jobs run in the
    /// order posted. False when the host cannot (an older daemon, or no loop):
    /// `job` then never runs. Jobs still queued when the plugin stops are dropped.
    @discardableResult
    public func post(_ job: @escaping @Sendable () -> Void) -> Bool {
        guard hostHasPost, let post = api.pointee.post else { return false }
        let box = Unmanaged.passRetained(Job(job)).toOpaque()
        let result = post(handle, { userdata in
            guard let userdata else { return }
            Unmanaged<Job>.fromOpaque(userdata).takeRetainedValue().body()
        }, box)
        if result < 0 {
            Unmanaged<Job>.fromOpaque(box).release()
            return false
        }
        return true
    }
}
