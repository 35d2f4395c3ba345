import XCTest

@testable import MicroHTTP

#if canImport(Glibc)
import Glibc
#endif

/// Issue 25 item 7: one client cannot shut everyone out. The server listens on 127.0.0.1;
/// 127.0.0.1 and 127.0.0.2 are two client addresses (a socket bound to 127.0.0.2 first).
final class EdgeGuardTests: XCTestCase {
    private func pingServer(_ configure: (inout HTTPServerConfiguration) -> Void) throws -> HTTPServer {
        try startServer(configure) { router in
            router.add(.GET, "/ping") { _ in .response(.text("pong")) }
            router.add(.GET, "/client") { request in
                .response(.text("\(request.client ?? "-") via \(request.peer ?? "-")"))
            }
            router.add(.GET, "/events") { _ in .eventStream(headers: HTTPHeaders()) { _ in } }
            router.add(.GET, "/slow") { _ in
                .deferred { responder in
                    DispatchQueue.global().asyncAfter(deadline: .now() + 1.6) { responder.respond(.text("late")) }
                }
            }
        }
    }

    /// A head that trickles in a byte at a time (each byte resets libmicrohttpd's idle timeout)
    /// is cut at its deadline, unanswered; one that completes in time is served.
    func testAHeadTricklingPastItsDeadlineIsCutAndOneInTimeIsServed() throws {
        let server = try pingServer {
            $0.headTimeout = 1
            $0.connectionTimeout = 30
        }
        defer { server.stop() }

        let slow = try TestClient(port: server.port, receiveTimeout: 5)
        let start = monotonicNow()
        var cutAt: Double?
        for byte in "GET /ping HTTP/1.1\r\nHost: test\r\nX-Padding: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa".utf8 {
            slow.send([byte])
            if slow.socket.peerHasClosed {
                cutAt = monotonicNow() - start
                break
            }
            usleep(100_000)
            if monotonicNow() - start > 4 { break }
        }
        let cut = try XCTUnwrap(cutAt, "a head trickled for 4 s with a 1 s deadline is still open")
        XCTAssertGreaterThan(cut, 0.9)
        XCTAssertLessThan(cut, 2)

        // 0.7 s for the head, within the deadline: served, and so is the next on the connection.
        let steady = try TestClient(port: server.port, receiveTimeout: 5)
        for piece in ["GET /pi", "ng HTTP/1.1\r\n", "Host: te", "st\r\n"] {
            steady.send(piece)
            usleep(175_000)
        }
        steady.send("\r\n")
        XCTAssertEqual(steady.readResponse()?.bodyText, "pong")
        XCTAssertEqual(steady.request("GET", "/ping")?.bodyText, "pong")
    }

    /// Once a head is in, the deadline is off: an event stream, a deferred reply slower than the
    /// deadline, and a body that takes longer are not cut by it.
    func testTheDeadlineNeverCutsWhatFollowsAHead() throws {
        let server = try pingServer {
            $0.headTimeout = 1
            $0.heartbeatInterval = 60
        }
        defer { server.stop() }
        let stream = try TestClient(port: server.port, receiveTimeout: 5)
        stream.send("GET /events HTTP/1.1\r\nHost: test\r\n\r\n")
        XCTAssertEqual(stream.readResponse(headOnly: true)?.status, 200)
        let deferred = try TestClient(port: server.port, receiveTimeout: 5)
        XCTAssertEqual(deferred.request("GET", "/slow")?.bodyText, "late")  // 1.6 s
        XCTAssertFalse(stream.socket.peerHasClosed, "a stream open past the head deadline was cut")
        XCTAssertEqual(server.openStreamCount, 1)
    }

    /// A keep-alive connection's next head may start as late as the idle timeout allows, then
    /// has the head deadline; trickled past that, it is cut.
    func testAKeepAliveConnectionsNextHeadHasADeadlineToo() throws {
        let server = try pingServer {
            $0.headTimeout = 1
            $0.connectionTimeout = 2
        }
        defer { server.stop() }
        let client = try TestClient(port: server.port, receiveTimeout: 5)
        XCTAssertEqual(client.request("GET", "/ping")?.bodyText, "pong")
        usleep(1_500_000)  // idle past the head deadline, within the idle timeout
        XCTAssertEqual(client.request("GET", "/ping")?.bodyText, "pong", "an idle keep-alive connection was cut")
        let start = monotonicNow()
        var cut = false
        for byte in "GET /ping HTTP/1.1\r\nHost: test\r\nX-Padding: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
            .utf8
        {
            client.send([byte])
            if client.socket.peerHasClosed {
                cut = true
                break
            }
            usleep(100_000)
            if monotonicNow() - start > 5 { break }
        }
        XCTAssertTrue(cut, "a second head trickled for 5 s (idle timeout 2 + head deadline 1) is still open")
        XCTAssertLessThan(monotonicNow() - start, 4)
    }

    /// Past `connectionsPerIP`, an address's next connections are answered 429 with Retry-After,
    /// then closed at once; another address is served meanwhile, and a freed place is usable.
    /// (Waits are generous: under TSan on a loaded machine, 2 s ran out.)
    func testAnAddressPastItsLimitIsRefusedAndAnotherIsServed() throws {
        let server = try pingServer {
            $0.connectionsPerIP = 3
            $0.connectionLimit = 100
        }
        defer { server.stop() }
        var held = try (0..<3).map { _ in try TestClient(port: server.port, receiveTimeout: 5) }
        for client in held { XCTAssertEqual(client.request("GET", "/ping")?.bodyText, "pong") }
        let over = try TestClient(port: server.port, receiveTimeout: 5)
        let refusal = over.request("GET", "/ping")
        XCTAssertEqual(refusal?.status, 429)
        XCTAssertEqual(refusal?.header("Retry-After"), "1")
        XCTAssertTrue(refusal?.bodyText.contains("at most 3") ?? false, refusal?.bodyText ?? "")
        XCTAssertTrue(over.isClosedByPeer(timeout: 5))
        // The server counts it out a moment after the client sees the close: counted still, it
        // would take a refusal slot's place and let `dropped` below have one.
        XCTAssertTrue(waitUntil(timeout: 5) { server.edge.connections(from: "127.0.0.1") == 3 })

        // Past the refusal slots: closed at once, unanswered.
        var waiting = try (0..<EdgeGuard.refusalSlots).map { _ in try TestClient(port: server.port, receiveTimeout: 5) }
        XCTAssertTrue(
            waitUntil(timeout: 5) { server.edge.connections(from: "127.0.0.1") == 3 + EdgeGuard.refusalSlots })
        let dropped = try TestClient(port: server.port, receiveTimeout: 5)
        XCTAssertTrue(dropped.isClosedByPeer(timeout: 5), "a connection past the refusal slots is closed")

        let other = try TestClient(port: server.port, receiveTimeout: 5, from: "127.0.0.2")
        XCTAssertEqual(other.request("GET", "/ping")?.bodyText, "pong")
        XCTAssertEqual(server.edge.connections(from: "127.0.0.2"), 1)

        // Those waiting for their 429 count too: once they and one of the first have gone, a
        // new connection is served.
        waiting.removeAll()
        held.removeFirst()
        XCTAssertTrue(
            waitUntil(timeout: 8) {
                (try? TestClient(port: server.port, receiveTimeout: 1).request("GET", "/ping")?.bodyText) == "pong"
            }, "a place freed is served again")
    }

    /// A trusted proxy's connections are not limited per address, and the address it forwards
    /// for is `Request.client`; an untrusted peer's forwarding headers are ignored.
    func testTrustedProxiesAreNotLimitedAndOnlyTheyNameTheClient() throws {
        let server = try pingServer {
            $0.connectionsPerIP = 2
            $0.trustedProxies = try! AddressRanges(parsing: ["127.0.0.2", "10.0.0.0/8"])
        }
        defer { server.stop() }
        let proxied = try (0..<6).map { _ in try TestClient(port: server.port, receiveTimeout: 2, from: "127.0.0.2") }
        for client in proxied { XCTAssertEqual(client.request("GET", "/ping")?.bodyText, "pong") }

        let proxy = proxied[0]
        XCTAssertEqual(
            proxy.request("GET", "/client", headers: ["X-Forwarded-For: 203.0.113.9"])?.bodyText,
            "203.0.113.9 via 127.0.0.2")
        // Read from the right: the first hop that is not a trusted proxy; what the client wrote
        // left of it counts for nothing.
        XCTAssertEqual(
            proxy.request("GET", "/client", headers: ["X-Forwarded-For: 1.1.1.1, 198.51.100.7, 10.1.2.3"])?.bodyText,
            "198.51.100.7 via 127.0.0.2")
        XCTAssertEqual(
            proxy.request(
                "GET", "/client", headers: ["Forwarded: for=\"[2001:db8::17]:4711\";proto=http, for=10.0.0.1"])?
                .bodyText,
            "2001:db8::17 via 127.0.0.2")
        XCTAssertEqual(
            proxy.request("GET", "/client", headers: ["Forwarded: for=unknown"])?.bodyText,
            "127.0.0.2 via 127.0.0.2")
        XCTAssertEqual(proxy.request("GET", "/client")?.bodyText, "127.0.0.2 via 127.0.0.2")

        let direct = try TestClient(port: server.port, receiveTimeout: 2)
        XCTAssertEqual(
            direct.request(
                "GET", "/client",
                headers: [
                    "X-Forwarded-For: 203.0.113.9",
                    "Forwarded: for=203.0.113.10",
                ])?.bodyText,
            "127.0.0.1 via 127.0.0.1")
        let second = try TestClient(port: server.port, receiveTimeout: 2)
        XCTAssertEqual(second.request("GET", "/ping")?.bodyText, "pong")
        XCTAssertEqual(
            try TestClient(port: server.port, receiveTimeout: 2).request("GET", "/ping")?.status, 429,
            "an untrusted address is limited")
    }

    /// A bounded slowloris from 127.0.0.1 (five times the connection limit, a byte now and then
    /// on each) leaves 127.0.0.2 answered within 100 ms, every time.
    func testSlowlorisFromOneAddressLeavesAnotherServed() throws {
        let server = try pingServer {
            $0.connectionLimit = 100
            $0.connectionsPerIP = 10
            $0.headTimeout = 2
        }
        defer { server.stop() }
        let attack = SlowlorisAttack(port: server.port, connections: 500)
        defer { attack.stop() }
        XCTAssertTrue(waitUntil(timeout: 10) { attack.opened >= 500 }, "\(attack.opened) attacking connections")
        XCTAssertGreaterThanOrEqual(server.edge.connections(from: "127.0.0.1"), 10)
        for _ in 0..<20 {
            let start = monotonicNow()
            let client = try TestClient(port: server.port, receiveTimeout: 2, from: "127.0.0.2")
            XCTAssertEqual(client.request("GET", "/ping")?.bodyText, "pong")
            XCTAssertLessThan(monotonicNow() - start, 0.1)
            usleep(100_000)
        }
    }

    func testAddressRangesParseAndMatch() throws {
        let ranges = try AddressRanges(parsing: ["10.0.0.0/8", "192.0.2.7", "fd00::/8", "::1"])
        for inside in ["10.255.0.1", "192.0.2.7", "fd12::1", "::1", "::ffff:10.0.0.1"] {
            XCTAssertTrue(ranges.contains(inside), inside)
        }
        for outside in ["11.0.0.1", "192.0.2.8", "fe80::1", "::2", "", "example.com"] {
            XCTAssertFalse(ranges.contains(outside), outside)
        }
        for bad in ["10.0.0.0/33", "10.0.0/8", "host", "::1/129", "1.2.3.4/", "1.2.3.4/-1"] {
            XCTAssertThrowsError(try AddressRanges(parsing: [bad]), bad)
        }
    }
}
