import Examples
import Logging
import ReactorService
import ServiceLifecycle
import XCTest

/// A ReactorServer as a swift-service-lifecycle `Service`: it serves while its group runs and
/// stops, as `stop()` does, at the group's graceful shutdown; the group then returns.
final class ServiceLifecycleTests: XCTestCase {
    func testAServerInAServiceGroupServesAndStopsAtTheGroupsGracefulShutdown() async throws {
        var configuration = ServiceConfiguration()
        configuration.port = 0
        configuration.stopDeadline = .seconds(2)
        var logger = Logger(label: "reactord-test")
        logger.logLevel = .warning
        let server = ReactorServer(configuration: configuration, logger: logger)
        server.registerBundledReactors()
        let group = ServiceGroup(services: [server], logger: logger)
        let running = Task { try await group.run() }

        var port: UInt16 = 0
        for _ in 0..<500 where port == 0 {
            try await Task.sleep(nanoseconds: 10_000_000)
            port = server.port
        }
        XCTAssertNotEqual(port, 0, "started by the group")
        let client = HTTPClient(port: port)
        XCTAssertEqual(try client.request("POST", "/sessions", body: #"{"reactor":"counter"}"#).status, 201)
        XCTAssertEqual(try client.request("GET", "/healthz").status, 200)

        await group.triggerGracefulShutdown()
        try await running.value
        XCTAssertThrowsError(try HTTPClient(port: port).request("GET", "/healthz"), "stopped: nothing listens any more")
    }
}
