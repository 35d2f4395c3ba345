import XCTest

@testable import MicroHTTP

/// Behaviour 7: more than 1,024 concurrent connections (epoll, not select; RLIMIT_NOFILE raised).
final class ConnectionScaleTests: XCTestCase {
    func testFifteenHundredConcurrentConnections() throws {
        let registry = StreamRegistry()
        let server = try startServer({ $0.heartbeatInterval = 60 }) { router in
            router.add(.GET, "/events") { _ in .eventStream(headers: HTTPHeaders()) { registry.add($0) } }
            router.add(.GET, "/ping") { _ in .response(.text("pong")) }
        }
        defer { server.stop() }
        let fleet = try StreamFleet(port: server.port, count: 1500, path: "/events")
        XCTAssertTrue(waitUntil(timeout: 20) { server.openStreamCount == 1500 }, "\(server.openStreamCount)")
        // Both ends live in this process: well past select()'s 1,024 descriptors.
        XCTAssertGreaterThan(ProcessStats.openDescriptors(), 3000)

        registry.send(Frame("data: to all\n\n"))
        let all = fleet.pump(timeout: 20) { fleet in fleet.members.allSatisfy { $0.events == ["to all"] } }
        XCTAssertTrue(all, "not every one of 1,500 connections got the event")
        XCTAssertTrue(fleet.members.allSatisfy { $0.parser.status == 200 })

        // A new connection (descriptor > 3,000) is still served.
        let client = try TestClient(port: server.port)
        XCTAssertGreaterThan(client.fd, 1024)
        XCTAssertEqual(client.request("GET", "/ping")?.bodyText, "pong")
    }
}
