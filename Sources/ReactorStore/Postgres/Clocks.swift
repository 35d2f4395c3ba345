#if canImport(Glibc)
import Glibc
#endif

/// Seconds on the monotonic clock: lease deadlines and statement time limits.
func monotonicNow() -> Double {
    var time = timespec()
    clock_gettime(CLOCK_MONOTONIC, &time)
    return Double(time.tv_sec) + Double(time.tv_nsec) / 1e9
}

/// Seconds since 1970 on this node's clock: what other nodes compare with theirs.
func wallClockNow() -> Double {
    var time = timespec()
    clock_gettime(CLOCK_REALTIME, &time)
    return Double(time.tv_sec) + Double(time.tv_nsec) / 1e9
}
