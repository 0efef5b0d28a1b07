import Glibc

/// posix_spawn attributes for a process the benchmark starts: no signal
/// blocked, and `signals` back at their default action whatever this process
/// does with them.
final class SpawnAttributes {
    var attributes = posix_spawnattr_t()

    init(defaulting signals: [Int32]) {
        posix_spawnattr_init(&attributes)
        var noSignals = sigset_t()
        sigemptyset(&noSignals)
        posix_spawnattr_setsigmask(&attributes, &noSignals)
        var defaults = sigset_t()
        sigemptyset(&defaults)
        for signal in signals { sigaddset(&defaults, signal) }
        posix_spawnattr_setsigdefault(&attributes, &defaults)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))
    }

    deinit {
        posix_spawnattr_destroy(&attributes)
    }
}
