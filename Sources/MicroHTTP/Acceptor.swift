internal import CMicroHTTPD
internal import ConcurrencyPrimitives

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Accepts connections on the listening socket on a thread of its own and hands each to one
/// of the server's libmicrohttpd daemons (MHD_add_connection), so that a stop takes the socket
/// back by closing it.
///
/// libmicrohttpd 0.9.75 can only give back a listening socket it polls through
/// MHD_quiesce_daemon, which races its own epoll threads over removing the socket from their
/// epoll sets; the loser aborts the process ("Failed to remove listen FD from epoll set").
///
/// Each daemon is one epoll thread (`threads` daemons, not libmicrohttpd's thread pool, whose
/// workers' epoll sets are out of reach). Connections go to them in turn; the `EdgeGuard`
/// counts them per address first (and starts their head deadlines).
///
/// While the gate has no room the socket is not polled, so new connections wait in the listen
/// backlog; `roomFreed()` wakes the thread to look again.
///
/// The thread also keeps the server's `BatchTicker` going while it runs, and at each tick has
/// the guard cut the connections past their head deadline.
// why: hands sockets to libmicrohttpd daemons (C handles) on its one thread; `stopping` is under `lock`.
final class Acceptor: @unchecked Sendable {
    private let listener: Int32
    private let daemons: [OpaquePointer]
    private let edge: EdgeGuard
    private var nextDaemon = 0  // the acceptor thread's own
    private let gate: any AcceptorGate
    private let lock = Mutex()
    private var stopping = false  // guarded by `lock`
    #if os(Linux)
    private let wakeup: Int32
    private let ticker: BatchTicker?
    private var thread: PlatformThread?
    #endif

    /// Starts accepting on `listener` (non-blocking, listening) for `daemons`. Nil when the
    /// thread cannot be started; the caller still owns `listener` then.
    init?(
        listener: Int32, daemons: [OpaquePointer], edge: EdgeGuard, ticker: BatchTicker?,
        gate: any AcceptorGate
    ) {
        self.listener = listener
        self.daemons = daemons
        self.edge = edge
        self.gate = gate
        #if os(Linux)
        self.ticker = ticker
        wakeup = mhd_shim_wakeup_create()
        guard wakeup >= 0 else { return nil }
        do {
            thread = try PlatformThread.joinable { [self] in run() }  // holds self until it ends
        } catch {
            close(wakeup)
            return nil
        }
        #else
        return nil
        #endif
    }

    /// A connection closed: if the thread had stopped accepting for want of room, it looks again.
    func roomFreed() {
        lock.withLock { if !stopping { wake() } }
    }

    /// Ends the thread, then closes the listening socket: connects from now on, and those still
    /// waiting in the backlog, are refused. After this nothing is added to the daemons.
    func stop() {
        let first = lock.withLock { () -> Bool in
            if stopping { return false }
            stopping = true
            wake()
            return true
        }
        guard first else { return }
        #if os(Linux)
        thread?.join()
        close(wakeup)  // roomFreed() writes only before `stopping`, which it reads under the lock
        #endif
        close(listener)
    }

    private func wake() {
        #if os(Linux)
        var one: UInt64 = 1
        _ = write(wakeup, &one, MemoryLayout<UInt64>.size)
        #endif
    }

    #if os(Linux)
    private func run() {
        var watched = [
            pollfd(fd: listener, events: Int16(POLLIN), revents: 0),
            pollfd(fd: wakeup, events: Int16(POLLIN), revents: 0),
            pollfd(fd: ticker?.timer ?? -1, events: Int16(POLLIN), revents: 0),
        ]
        while !lock.withLock({ stopping }) {
            let room = gate.hasRoom()
            watched[0].fd = room ? listener : -1  // poll skips a negative descriptor
            watched[0].revents = 0
            watched[1].revents = 0
            watched[2].revents = 0
            // Without a ticker, head deadlines are still swept, every 100 ms.
            if poll(&watched, 3, ticker == nil && edge.isTracking ? 100 : -1) < 0 {
                if errno == EINTR { continue }
                return
            }
            if watched[1].revents != 0 {
                var count: UInt64 = 0
                _ = read(wakeup, &count, MemoryLayout<UInt64>.size)
            }
            if watched[2].revents != 0 { ticker?.tick() }
            if ticker == nil || watched[2].revents != 0 { edge.sweep() }
            if room && watched[0].revents != 0 { acceptWaiting() }
        }
    }

    /// Accepts until the backlog is empty or there is no room left.
    private func acceptWaiting() {
        while gate.hasRoom() {
            var address = sockaddr_storage()
            var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
            let socket = withUnsafeMutablePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { mhd_shim_accept(listener, $0, &length) }
            }
            guard socket >= 0 else {
                switch errno {
                case EINTR, ECONNABORTED, EPROTO: continue
                case EMFILE, ENFILE, ENOBUFS, ENOMEM:
                    usleep(10_000)  // out of descriptors or memory: try again soon, without spinning
                    return
                default: return  // EAGAIN: the backlog is empty
                }
            }
            let admission = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { edge.admit(socket, address: $0) }
            }
            if admission == .drop {
                close(socket)  // far past its address's limit: not even a 429
                continue
            }
            // libmicrohttpd closes the socket itself when it refuses it.
            gate.handingOver()
            let daemon = takeNextDaemon()
            let added = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { MHD_add_connection(daemon, socket, $0, length) }
            }
            if added != .YES {
                gate.handOverFailed()
                edge.handOverFailed(socket)  // before another accept can reuse the descriptor
            }
        }
    }

    private func takeNextDaemon() -> OpaquePointer {
        guard daemons.count > 1 else { return daemons[0] }
        defer { nextDaemon = (nextDaemon + 1) % daemons.count }
        return daemons[nextDaemon]
    }
    #endif
}

/// Who counts the connections the acceptor may still hand over.
protocol AcceptorGate: AnyObject, Sendable {
    /// Whether another connection fits (called before each accept).
    func hasRoom() -> Bool
    /// A connection is about to be handed over; it counts from now on.
    func handingOver()
    /// libmicrohttpd refused it at once (and closed it).
    func handOverFailed()
}
