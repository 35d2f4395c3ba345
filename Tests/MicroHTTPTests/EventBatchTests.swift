import CMicroHTTPD
import XCTest

@testable import MicroHTTP

/// libmicrohttpd 0.9.75 reads epoll events 128 at a time and, after a full batch, waits for more
/// with the same timeout before it serves any: when exactly 128 connections are ready at once it
/// serves none of them until another event comes (a connection's timeout, 30 s by default).
final class EventBatchTests: XCTestCase {
    func testAFullBatchOfReadyConnectionsIsServedAtOnce() throws {
        try checkAFullBatchIsServed(threads: 1)
    }

    /// With two threads (two daemons, connections handed over in turn) the held one gets every
    /// other connection: 128 of 256. Either daemon may be the one held.
    func testAFullBatchOnOneOfSeveralThreadsIsServedAtOnce() throws {
        try checkAFullBatchIsServed(threads: 2, heldDaemon: 0)
        try checkAFullBatchIsServed(threads: 2, heldDaemon: 1)
    }

    /// Without the ticker's nudges, only this package's `epoll_wait` (full_batch.c) ends the
    /// wait after a full batch: without it the batch waits out the 120 s connection timeout.
    func testAFullBatchIsServedWithoutTheTicker() throws {
        try checkAFullBatchIsServed(threads: 1, ticker: false)
    }

    #if os(Linux)
    /// Each tick is one event in every nudged epoll set, though the ticking thread reads the
    /// timer as soon as it fires. The timer itself in the sets, read by that thread, lost about
    /// 40 % of them (10 and 11 of 20 here): epoll drops an event whose descriptor is no longer
    /// ready when collected. Two ticks can merge into one event only if a waiter is held up
    /// for a whole period, hence the margin.
    func testEveryTickReachesEveryEpollSet() throws {
        // Two epoll sets with an eventfd each, to end their waits (both carry token 0, as the nudges do).
        var wakeups: [Int32] = [-1, -1]
        let sets = [mhd_shim_watch_create(&wakeups[0]), mhd_shim_watch_create(&wakeups[1])]
        XCTAssertFalse(sets.contains(-1))
        defer { for fd in sets + wakeups { close(fd) } }
        let ticker = try XCTUnwrap(BatchTicker(epollSets: sets))
        defer { ticker.release() }
        let counts = Locked([0, 0])
        let done = Locked(false)
        let waiters = DispatchGroup()
        defer {  // on every way out, before the descriptors close: end the waiters
            done.update { $0 = true }
            var one: UInt64 = 1
            for wakeup in wakeups { _ = write(wakeup, &one, MemoryLayout<UInt64>.size) }
            XCTAssertEqual(waiters.wait(timeout: .now() + 5), .success)
        }
        for (index, set) in sets.enumerated() {
            waiters.enter()
            Thread.detachNewThread {
                defer { waiters.leave() }
                var tokens = [UInt64](repeating: 0, count: 4)
                while true {
                    let events = mhd_shim_watch_wait(set, &tokens, 4)
                    if done.value || events < 0 { return }
                    counts.update { $0[index] += Int(events) }
                }
            }
        }
        // This thread plays the acceptor's: it reads the timer as soon as it fires.
        var ticks = 0
        var timer = pollfd(fd: ticker.timer, events: Int16(POLLIN), revents: 0)
        while ticks < 20 {  // about a second
            guard poll(&timer, 1, 1_000) == 1 else { return XCTFail("the timer did not fire") }
            if ticker.tick() { ticks += 1 }
        }
        usleep(100_000)
        for seen in counts.value { XCTAssertGreaterThanOrEqual(seen, ticks * 3 / 4, "events seen of \(ticks) ticks") }
    }
    #endif

    private func checkAFullBatchIsServed(threads: Int, heldDaemon: Int = 0, ticker: Bool = true) throws {
        let blocked = DispatchSemaphore(value: 0)
        let release = DispatchSemaphore(value: 0)
        let server = try startServer({
            $0.connectionTimeout = 120
            $0.threads = threads
            $0.batchTicker = ticker
        }) { router in
            router.add(.GET, "/block") { _ in
                blocked.signal()
                release.wait()  // holds a daemon's one thread while the batch gathers
                return .response(.text("released"))
            }
            router.add(.GET, "/ok") { _ in .response(.text("fine")) }
        }
        defer { server.stop() }
        // Connections go to the daemons in turn: these put the holder on daemon `heldDaemon`.
        let before = try (0..<heldDaemon).map { _ in try TestClient(port: server.port) }
        for client in before { XCTAssertEqual(client.request("GET", "/ok")?.status, 200) }
        let holder = try TestClient(port: server.port, receiveTimeout: 10)
        holder.send("GET /block HTTP/1.1\r\nHost: test\r\n\r\n")
        XCTAssertEqual(blocked.wait(timeout: .now() + 5), .success)

        // 128 connections per thread, each with its request sent, handed over while one thread is held.
        let clients = try (0..<128 * threads).map { _ in try TestClient(port: server.port) }
        for client in clients { client.send("GET /ok HTTP/1.1\r\nHost: test\r\n\r\n") }
        usleep(300_000)
        release.signal()
        XCTAssertEqual(holder.readResponse()?.status, 200)

        // One deadline for all (far below the 120 s a stuck batch waits), not one per client.
        let start = monotonicNow()
        let answered = clients.filter { client in
            client.socket.setTimeout(max(0.01, start + 20 - monotonicNow()))
            return client.readResponse()?.status == 200
        }.count
        XCTAssertEqual(answered, 128 * threads, "served within \(monotonicNow() - start) s")
    }
}
