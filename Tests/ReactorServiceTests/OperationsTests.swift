import Foundation
import XCTest

final class OperationsTests: XCTestCase {
    func testHealthMetricsAndSpec() throws {
        let fixture = try ServerFixture()
        defer { fixture.stop() }
        let session = try fixture.createSession()
        let events = try fixture.subscribe(session)
        XCTAssertNotNil(events.next())
        try fixture.send(session, #"{"type":"increase"}"#)
        XCTAssertNotNil(events.next())

        let health = try fixture.client.request("GET", "/healthz")
        XCTAssertEqual(health.status, 200)
        XCTAssertEqual(health.object["status"] as? String, "ok")

        let metrics = try fixture.client.request("GET", "/metrics")
        XCTAssertEqual(metrics.status, 200)
        XCTAssertTrue(metrics.header("Content-Type")?.hasPrefix("text/plain") ?? false)
        let text = metrics.text
        XCTAssertTrue(text.contains("reactord_sessions 1"), text)
        XCTAssertTrue(text.contains("reactord_subscribers 1"), text)
        XCTAssertTrue(text.contains(#"reactord_actions_total{reactor="counter",outcome="applied"} 1"#), text)
        XCTAssertTrue(text.contains("reactord_events_delivered_total"), text)
        XCTAssertTrue(text.contains("reactord_http_request_duration_seconds_bucket"), text)
        XCTAssertTrue(text.contains(#"reactord_reactor_subscribers{reactor="counter"} 1"#), text)
        XCTAssertFalse(text.contains(session), "metrics leak no session id")
        XCTAssertFalse(text.contains(ServerFixture.token), "metrics leak no token")

        let spec = try fixture.client.request("GET", "/openapi.yaml")
        XCTAssertEqual(spec.status, 200)
        let onDisk = try Data(
            contentsOf: URL(fileURLWithPath: #filePath)
                .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
                .appendingPathComponent("openapi.yaml"))
        XCTAssertEqual(spec.body, Array(onDisk), "the server serves the repository's openapi.yaml")
    }

    /// Browsers ask every server for /favicon.ico: a real icon, not a 404 in their console.
    func testTheFaviconIsAnIcon() throws {
        let fixture = try ServerFixture()
        defer { fixture.stop() }
        let icon = try fixture.client.request("GET", "/favicon.ico")
        XCTAssertEqual(icon.status, 200)
        XCTAssertEqual(icon.header("Content-Type"), "image/x-icon")
        let bytes = icon.body
        XCTAssertEqual(Array(bytes.prefix(6)), [0, 0, 1, 0, 1, 0], "an ICO header with one image")
        XCTAssertEqual(Array(bytes[6..<8]), [16, 16])
        let size = bytes[14..<18].reversed().reduce(0) { $0 << 8 | Int($1) }
        let offset = bytes[18..<22].reversed().reduce(0) { $0 << 8 | Int($1) }
        XCTAssertEqual(offset + size, bytes.count, "the directory entry describes the whole image")
        XCTAssertEqual(Array(bytes[offset..<offset + 4]), [40, 0, 0, 0], "a BITMAPINFOHEADER")
    }

    func testHealthIs503WhileStopping() throws {
        let fixture = try ServerFixture()
        let client = HTTPClient(port: fixture.port)
        XCTAssertEqual(try client.request("GET", "/healthz").status, 200)
        fixture.stop()
        // After stop the listening socket is gone: a new request cannot connect at all.
        XCTAssertThrowsError(try HTTPClient(port: fixture.port).request("GET", "/healthz"))
    }
}
