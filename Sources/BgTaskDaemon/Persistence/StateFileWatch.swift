import CBgTaskShim
import Glibc
import Logging
import SDBus

/// Tells when the state database is deleted or replaced under the running
/// daemon: every write from then on would go into a file the next start
/// cannot see. inotify on the state directory, so nothing polls (an idle
/// daemon wakes for nothing); each change there is checked against the file
/// the store opened (``StateStore/isStillInPlace``).
final class StateFileWatch {
    private let descriptor: Int32
    private var source: EventSource?

    /// Watches `store`'s directory; `gone` runs on the loop, once, when the
    /// file is no longer the one opened. Nil (logged) when inotify cannot be had.
    init?(store: StateStore, loop: EventLoop, logger: Logger, gone: @escaping () -> Void) {
        let directory = String(store.path[..<(store.path.lastIndex(of: "/") ?? store.path.startIndex)])
        descriptor = inotify_init1(Int32(IN_NONBLOCK | IN_CLOEXEC))
        let mask = UInt32(IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO | IN_CREATE | IN_DELETE_SELF | IN_MOVE_SELF)
        guard descriptor >= 0, inotify_add_watch(descriptor, directory.isEmpty ? "/" : directory, mask) >= 0 else {
            logger.notice("cannot watch the state directory (\(String(cString: strerror(errno)))); a database deleted under bgtaskd is noticed only at its next start")
            if descriptor >= 0 { close(descriptor) }
            return nil
        }
        var told = false
        do {
            source = try loop.watch(fd: descriptor, events: UInt32(EPOLLIN.rawValue)) { [descriptor] _ in
                var buffer = [UInt8](repeating: 0, count: 4096)
                while read(descriptor, &buffer, buffer.count) > 0 {}
                guard !told, !store.isStillInPlace else { return }
                told = true
                gone()
            }
        } catch {
            logger.notice("cannot watch the state directory (\(error)); a database deleted under bgtaskd is noticed only at its next start")
            close(descriptor)
            return nil
        }
    }

    deinit {
        source?.cancel()
        close(descriptor)
    }
}
