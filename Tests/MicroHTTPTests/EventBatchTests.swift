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

    private func checkAFullBatchIsServed(threads: Int, heldDaemon: Int = 0) throws {
        let blocked = DispatchSemaphore(value: 0), release = DispatchSemaphore(value: 0)
        let server = try startServer({ $0.connectionTimeout = 120; $0.threads = threads }) { router in
            router.add(.GET, "/block") { _ in
                blocked.signal()
                release.wait()   // holds a daemon's one thread while the batch gathers
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
        let clients = try (0..<128 * threads).map { _ in try TestClient(port: server.port, receiveTimeout: 5) }
        for client in clients { client.send("GET /ok HTTP/1.1\r\nHost: test\r\n\r\n") }
        usleep(300_000)
        release.signal()
        XCTAssertEqual(holder.readResponse()?.status, 200)

        let start = monotonicNow()
        let answered = clients.filter { $0.readResponse()?.status == 200 }.count
        XCTAssertEqual(answered, 128 * threads, "served within \(monotonicNow() - start) s")
    }
}
