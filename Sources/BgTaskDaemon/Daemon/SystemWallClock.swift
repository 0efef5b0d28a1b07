import BgTaskCore
import Glibc

/// CLOCK_REALTIME, read live.
struct SystemWallClock: WallClock {
    var now: RealtimeInstant {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        return RealtimeInstant(microseconds: UInt64(now.tv_sec) * 1_000_000 + UInt64(now.tv_nsec) / 1000)
    }
}
