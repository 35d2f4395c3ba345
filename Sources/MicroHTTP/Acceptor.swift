import CMicroHTTPD
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Accepts connections on the listening socket on a thread of its own and hands each to
/// libmicrohttpd (MHD_add_connection), so that a stop takes the socket back by closing it.
///
/// libmicrohttpd 0.9.75 can only give back a listening socket it polls through
/// MHD_quiesce_daemon, which races its own epoll threads over removing the socket from their
/// epoll sets; the loser aborts the process ("Failed to remove listen FD from epoll set").
///
/// While the gate has no room the socket is not polled, so new connections wait in the listen
/// backlog; `roomFreed()` wakes the thread to look again.
///
/// The thread also keeps the daemon's batch ticker (`mhd_shim_add_batch_ticker`): it reads
/// the timer at each tick, since a timerfd re-arms only when read and libmicrohttpd never
/// reads it.
final class Acceptor: @unchecked Sendable {
    private let listener: Int32
    private let daemon: OpaquePointer
    private let gate: any AcceptorGate
    private let lock = Lock()
    private var stopping = false    // guarded by `lock`
    #if os(Linux)
    private let wakeup: Int32
    private let ticker: Int32       // -1: the daemon has no epoll set of its own (a thread pool)
    private var thread = pthread_t()
    #endif

    /// How long at most a full batch of ready connections waits: 20 idle wake-ups a second.
    static let batchTickerMilliseconds = 50

    /// Starts accepting on `listener` (non-blocking, listening) for `daemon`. Nil when the thread
    /// cannot be started; the caller still owns `listener` then.
    init?(listener: Int32, daemon: OpaquePointer, gate: any AcceptorGate) {
        self.listener = listener
        self.daemon = daemon
        self.gate = gate
        #if os(Linux)
        wakeup = mhd_shim_wakeup_create()
        guard wakeup >= 0 else { return nil }
        ticker = mhd_shim_add_batch_ticker(daemon, Self.batchTickerMilliseconds)
        let me = Unmanaged.passRetained(self).toOpaque()  // released by the thread when it ends
        guard pthread_create(&thread, nil, { raw in
            Unmanaged<Acceptor>.fromOpaque(raw!).takeRetainedValue().run()
            return nil
        }, me) == 0 else {
            Unmanaged<Acceptor>.fromOpaque(me).release()
            close(wakeup)
            if ticker >= 0 { close(ticker) }
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
    /// waiting in the backlog, are refused. After this nothing is added to the daemon.
    func stop() {
        let first = lock.withLock { () -> Bool in
            if stopping { return false }
            stopping = true
            wake()
            return true
        }
        guard first else { return }
        #if os(Linux)
        pthread_join(thread, nil)
        close(wakeup)   // roomFreed() writes only before `stopping`, which it reads under the lock
        if ticker >= 0 { close(ticker) }   // (closing it takes it out of the daemon's epoll set)
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
        var watched = [pollfd(fd: listener, events: Int16(POLLIN), revents: 0),
                       pollfd(fd: wakeup, events: Int16(POLLIN), revents: 0),
                       pollfd(fd: ticker, events: Int16(POLLIN), revents: 0)]
        while !lock.withLock({ stopping }) {
            let room = gate.hasRoom()
            watched[0].fd = room ? listener : -1   // poll skips a negative descriptor
            watched[0].revents = 0
            watched[1].revents = 0
            watched[2].revents = 0
            if poll(&watched, 3, -1) < 0 {
                if errno == EINTR { continue }
                return
            }
            if watched[1].revents != 0 {
                var count: UInt64 = 0
                _ = read(wakeup, &count, MemoryLayout<UInt64>.size)
            }
            if watched[2].revents != 0 {
                var ticks: UInt64 = 0
                _ = read(ticker, &ticks, MemoryLayout<UInt64>.size)
            }
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
                    usleep(10_000)   // out of descriptors or memory: try again soon, without spinning
                    return
                default: return      // EAGAIN: the backlog is empty
                }
            }
            // libmicrohttpd closes the socket itself when it refuses it (the per-address limit).
            gate.handingOver()
            let added = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { MHD_add_connection(daemon, socket, $0, length) }
            }
            if added != .YES { gate.handOverFailed() }
        }
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
