internal import CMicroHTTPD
internal import ConcurrencyPrimitives

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Notices event-stream clients that are gone when the kernel says so, not at the next write.
///
/// libmicrohttpd 0.9.75 takes a suspended connection out of its epoll set, so a subscriber that
/// disconnects while its stream waits for events goes unnoticed until a write fails — and a
/// write to a peer that sent FIN succeeds once (the peer answers RST), so it took two heartbeats.
/// Meanwhile the dead connection counts against the connection limit: a mass disconnect left
/// thousands of slots taken and new connections waiting in the listen backlog for up to 30 s
/// (BENCHMARKS.md, "The mass-disconnect stall").
///
/// One thread, one epoll set of its own: every stream's socket is added once, when the stream
/// opens, for EPOLLRDHUP (the peer's FIN, i.e. a read of 0), EPOLLHUP and EPOLLERR (RST),
/// one-shot, and never for EPOLLIN, so it does not wake for anything else and never touches
/// libmicrohttpd's reading or writing. On an event the stream is aborted with `.clientGone`:
/// resumed (batched) so that libmicrohttpd's thread ends the connection. The watcher's lock
/// only guards its token table; it is never held while a stream is touched.
///
/// A client that half-closes (FIN after its request) but goes on reading is treated as gone:
/// an event stream has nothing more to receive from its client (nginx ends such a streaming
/// request too).
final class DisconnectWatcher: Sendable {
    private struct Table {
        var streams: [UInt64: EventStream] = [:]
        var nextToken: UInt64 = 1  // 0 is the wake-up eventfd
        var stopping = false
    }

    private let table = Locked(Table())

    #if os(Linux)
    private let epoll: Int32
    private let wakeup: Int32
    /// Set once the thread runs; taken by `stop()`, which joins it.
    private let thread = Locked<PlatformThread?>(nil)
    #endif

    /// Nil where the platform has no epoll or it cannot be set up: the heartbeat still finds
    /// dead clients then, only later.
    init?() {
        #if os(Linux)
        var wakeupFD: Int32 = -1
        epoll = mhd_shim_watch_create(&wakeupFD)
        guard epoll >= 0 else { return nil }
        wakeup = wakeupFD
        do {
            let started = try PlatformThread.joinable { [self] in run() }  // holds self until it ends
            thread.withLock { $0 = started }
        } catch {
            close(wakeup)
            close(epoll)
            return nil
        }
        #else
        return nil
        #endif
    }

    /// Starts watching `stream`'s socket; returns the token to `unwatch` it with (0: not watched).
    /// On the connection's libmicrohttpd thread, when the stream opens.
    func watch(_ stream: EventStream, socket: Int32) -> UInt64 {
        #if os(Linux)
        guard socket >= 0 else { return 0 }
        return table.withLock { table in
            if table.stopping { return 0 }
            let token = table.nextToken
            table.nextToken += 1
            guard mhd_shim_watch_add(epoll, socket, token) == 0 else { return 0 }
            table.streams[token] = stream
            return token
        }
        #else
        return 0
        #endif
    }

    /// Stops watching, from the completion callback: libmicrohttpd calls it before it closes the
    /// socket, so the descriptor is still this connection's (not a new one's that reused it).
    func unwatch(_ token: UInt64, socket: Int32) {
        #if os(Linux)
        guard token != 0 else { return }
        table.withLock { table in
            guard table.streams.removeValue(forKey: token) != nil, !table.stopping else { return }
            _ = mhd_shim_watch_remove(epoll, socket)
        }
        #endif
    }

    /// Ends the thread and waits for it. After this no stream is aborted by the watcher.
    func stop() {
        #if os(Linux)
        guard
            let running = thread.withLock({ running in
                defer { running = nil }
                return running
            })
        else { return }
        table.withLock { $0.stopping = true }
        var one: UInt64 = 1
        _ = write(wakeup, &one, MemoryLayout<UInt64>.size)
        running.join()
        table.withLock { $0.streams.removeAll() }
        close(wakeup)
        close(epoll)
        #endif
    }

    #if os(Linux)
    private func run() {
        let capacity = 256
        let tokens = UnsafeMutablePointer<UInt64>.allocate(capacity: capacity)
        defer { tokens.deallocate() }
        var gone: [EventStream] = []
        gone.reserveCapacity(capacity)
        while true {
            let count = mhd_shim_watch_wait(epoll, tokens, Int32(capacity))
            if count < 0 { return }
            let stopping = table.withLock { table in
                if table.stopping { return true }
                for index in 0..<Int(count) {
                    let token = tokens[index]
                    if token == 0 { continue }
                    if let stream = table.streams.removeValue(forKey: token) { gone.append(stream) }
                }
                return false
            }
            if stopping { return }
            if gone.isEmpty { continue }
            // Resumed together at the batch's end: libmicrohttpd's thread walks its list of
            // suspended connections once per wake-up, not once per few resumes (EventStream).
            EventStream.batchingResumes {
                for stream in gone { stream.abort(.clientGone) }
            }
            gone.removeAll(keepingCapacity: true)
        }
    }
    #endif
}
