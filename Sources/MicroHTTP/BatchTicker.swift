internal import CMicroHTTPD

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Ends libmicrohttpd's wait after a full batch of 128 ready connections (see
/// `mhd_shim_batch_ticker_create`): a periodic timer, and at each of its ticks one event in
/// every daemon's epoll set, through that daemon's nudge (`mhd_shim_batch_nudge_create`).
/// The fallback, bounding that wait at 50 ms: this package's `epoll_wait` (full_batch.c) ends
/// it at once where the executable's definition is the one libmicrohttpd calls.
///
/// One thread at a time calls `tick()` when `timer` is readable: the acceptor's while it runs,
/// then the thread that stops the server, so that a stop's drain has the ticks too.
final class BatchTicker: Sendable {
    /// How long at most a full batch waits: 20 idle wake-ups a second of each daemon.
    static let milliseconds = 50

    /// Readable at each tick; poll it, then call `tick()`.
    let timer: Int32
    private let nudges: [Int32]

    /// Nil when the timer cannot be made, and a daemon whose nudge cannot be made goes without:
    /// best effort, as before there was a ticker (a full batch then waits for another event).
    convenience init?(daemons: [OpaquePointer]) {
        #if os(Linux)
        self.init(epollSets: daemons.map { mhd_shim_daemon_epoll_fd($0) })
        #else
        return nil
        #endif
    }

    /// Nudges in the given epoll sets (the daemons', or a test's).
    init?(epollSets: [Int32]) {
        #if os(Linux)
        timer = mhd_shim_batch_ticker_create(Self.milliseconds)
        guard timer >= 0 else { return nil }
        nudges = epollSets.map { mhd_shim_batch_nudge_create($0) }.filter { $0 >= 0 }
        #else
        return nil
        #endif
    }

    /// Nudges every daemon if the timer has ticked since the last call (reading it re-arms it);
    /// returns whether it had.
    @discardableResult
    func tick() -> Bool {
        var ticks: UInt64 = 0
        guard read(timer, &ticks, MemoryLayout<UInt64>.size) == MemoryLayout<UInt64>.size else { return false }
        var one: UInt64 = 1
        for nudge in nudges { _ = write(nudge, &one, MemoryLayout<UInt64>.size) }
        return true
    }

    /// Closes the descriptors: after MHD_stop_daemon, once nobody calls `tick()` any more.
    func release() {
        for fd in nudges { close(fd) }
        close(timer)
    }
}
