import ReactorService
import XCTest

/// /readyz: ready once listening, 503 naming what is not ready when an added check fails
/// (as the store's "reachable" check will), ready again when it holds.
final class ReadinessTests: XCTestCase {
    func testReadyzFollowsItsChecks() throws {
        let fixture = try ServerFixture()
        defer { fixture.stop() }
        let ready = try fixture.client.request("GET", "/readyz")
        XCTAssertEqual(ready.status, 200, ready.text)
        XCTAssertEqual(ready.object["status"] as? String, "ready")
        XCTAssertEqual((ready.object["checks"] as? [String: Any])?["listening"] as? String, "ok")

        let reachable = Locked(false)
        fixture.server.addReadinessCheck(
            ReadinessCheck("store") { reachable.value ? nil : "the database does not answer" })
        let notReady = try fixture.client.request("GET", "/readyz")
        XCTAssertEqual(notReady.status, 503, notReady.text)
        XCTAssertEqual(notReady.header("Content-Type"), "application/problem+json")
        XCTAssertNotNil(notReady.header("Retry-After"))
        XCTAssertEqual(notReady.object["detail"] as? String, "not ready: store: the database does not answer")
        XCTAssertEqual(try fixture.client.request("GET", "/healthz").status, 200, "alive while not ready")

        reachable.update { $0 = true }
        let again = try fixture.client.request("GET", "/readyz")
        XCTAssertEqual(again.status, 200, again.text)
        XCTAssertEqual((again.object["checks"] as? [String: Any])?["store"] as? String, "ok")
    }
}
