import ReactorService
import XCTest

/// Browsers from other origins: preflights, and the headers that let an allowed origin read
/// replies and event streams, over raw sockets as a browser sends them.
final class CORSTests: XCTestCase {
    private static let allowed = "http://127.0.0.1:5500"
    private static let other = "http://evil.example"
    private var fixture: ServerFixture!

    override func setUpWithError() throws {
        fixture = try ServerFixture { $0.corsOrigins = [Self.allowed] }
    }

    override func tearDown() {
        fixture.stop()
    }

    private func preflight(
        _ path: String, origin: String, method: String = "POST",
        headers: String = "content-type"
    ) throws -> TestResponse {
        try fixture.client.request(
            "OPTIONS", path,
            headers: [
                "Origin": origin,
                "Access-Control-Request-Method": method,
                "Access-Control-Request-Headers": headers,
            ])
    }

    private func list(_ value: String?) -> Set<String> {
        Set((value ?? "").split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces).lowercased() })
    }

    /// An origin configured with a trailing slash or in capitals is the one browsers send.
    func testAnOriginConfiguredAsAURLMatchesWhatBrowsersSend() throws {
        let other = try ServerFixture {
            $0.corsOrigins = ["HTTP://LocalHost:3000/", "https://app.example:443", "null"]
        }
        defer { other.stop() }
        for origin in ["http://localhost:3000", "https://app.example", "null"] {
            let response = try other.client.request("GET", "/healthz", headers: ["Origin": origin])
            XCTAssertEqual(response.header("Access-Control-Allow-Origin"), origin)
        }
    }

    func testPreflightForPostActionFromAnAllowedOrigin() throws {
        let response = try preflight("/action", origin: Self.allowed)
        XCTAssertEqual(response.status, 204)
        XCTAssertEqual(response.header("Access-Control-Allow-Origin"), Self.allowed)
        XCTAssertTrue(list(response.header("Access-Control-Allow-Methods")).contains("post"))
        XCTAssertTrue(list(response.header("Access-Control-Allow-Headers")).contains("content-type"))
        XCTAssertEqual(response.header("Vary"), "Origin")
        XCTAssertNotNil(response.header("Access-Control-Max-Age"))
        XCTAssertNil(response.header("Access-Control-Allow-Credentials"))
    }

    /// A browser may send the key that makes a retry safe, and read whether it was a replay.
    func testPreflightAllowsAnIdempotencyKeyAndAReplaySaysSo() throws {
        let session = try fixture.createSession()
        let preflight = try preflight(
            "/sessions/\(session)/actions", origin: Self.allowed, headers: "content-type, idempotency-key, if-match")
        XCTAssertTrue(
            list(preflight.header("Access-Control-Allow-Headers")).isSuperset(of: ["idempotency-key", "if-match"]))
        let headers = ["Origin": Self.allowed, "Idempotency-Key": "cors-1"]
        for _ in 0..<2 {
            let answer = try fixture.client.request(
                "POST", "/sessions/\(session)/actions", body: #"{"type":"increase"}"#, headers: headers)
            XCTAssertEqual(answer.status, 200)
            XCTAssertTrue(
                list(answer.header("Access-Control-Expose-Headers")).isSuperset(
                    of: ["idempotent-replayed", "etag", "reactord-not-applied"]))
        }
    }

    /// A page may read why its token was refused (`error="invalid_token"`), not only the detail.
    func testTheChallengeOfARefusedTokenIsExposed() throws {
        let fixture = try ServerFixture { configuration in
            configuration.corsOrigins = [Self.allowed]
            configuration.jwt = try? JWTVerification(secret: "a-cors-test-hs256-secret-of-32-bytes+")
        }
        defer { fixture.stop() }
        let refused = try fixture.client.request(
            "POST", "/sessions", body: "{}", headers: ["Origin": Self.allowed, "Authorization": "Bearer not-a-jwt"])
        XCTAssertEqual(refused.status, 401, refused.text)
        XCTAssertNotNil(refused.header("WWW-Authenticate"))
        XCTAssertTrue(list(refused.header("Access-Control-Expose-Headers")).contains("www-authenticate"))
    }

    func testPreflightForEventsAllowsLastEventID() throws {
        let session = try fixture.createSession()
        let response = try preflight(
            "/sessions/\(session)/events", origin: Self.allowed, method: "GET",
            headers: "last-event-id")
        XCTAssertEqual(response.status, 204)
        XCTAssertEqual(response.header("Access-Control-Allow-Origin"), Self.allowed)
        XCTAssertTrue(list(response.header("Access-Control-Allow-Methods")).contains("get"))
        XCTAssertTrue(list(response.header("Access-Control-Allow-Headers")).contains("last-event-id"))
    }

    /// OPTIONS names what a 405 on the same resource names (HEAD wherever GET is).
    func testOptionsAllowsWhatA405Allows() throws {
        let session = try fixture.createSession()
        let options = try preflight("/sessions/\(session)", origin: Self.allowed, method: "GET")
        let refused = try fixture.client.request("PATCH", "/sessions/\(session)")
        XCTAssertEqual(refused.status, 405)
        XCTAssertEqual(options.header("Allow"), refused.header("Allow"))
        XCTAssertEqual(list(options.header("Allow")), ["delete", "get", "head", "options"])
    }

    func testPreflightFromAnotherOriginGrantsNothing() throws {
        let response = try preflight("/action", origin: Self.other)
        XCTAssertEqual(response.status, 204)
        XCTAssertNil(response.header("Access-Control-Allow-Origin"))
        XCTAssertNil(response.header("Access-Control-Allow-Methods"))
        XCTAssertNil(response.header("Access-Control-Allow-Headers"))
        XCTAssertEqual(response.header("Vary"), "Origin")
    }

    func testActionRepliesCarryTheAllowedOriginOnly() throws {
        let session = try fixture.createSession()
        let body = #"{"session":"\#(session)","action":{"type":"increase"}}"#
        let allowed = try fixture.client.request(
            "POST", "/action", body: body,
            headers: ["Origin": Self.allowed, "Content-Type": "application/json"])
        XCTAssertEqual(allowed.status, 200)
        XCTAssertEqual(allowed.header("Access-Control-Allow-Origin"), Self.allowed)
        XCTAssertEqual(allowed.header("Vary"), "Origin")

        // The server cannot stop a simple request from another origin; the browser hides the reply.
        let other = try fixture.client.request("POST", "/action", body: body, headers: ["Origin": Self.other])
        XCTAssertEqual(other.status, 200)
        XCTAssertNil(other.header("Access-Control-Allow-Origin"))
        XCTAssertEqual(other.header("Vary"), "Origin")

        let created = try fixture.client.request("POST", "/sessions", body: "{}", headers: ["Origin": Self.allowed])
        XCTAssertEqual(created.status, 201)
        XCTAssertTrue(list(created.header("Access-Control-Expose-Headers")).contains("location"))
    }

    func testEventStreamCarriesTheAllowedOrigin() throws {
        let session = try fixture.createSession()
        let allowed = try fixture.subscribe(session, headers: ["Origin": Self.allowed])
        XCTAssertEqual(allowed.status, 200)
        XCTAssertEqual(allowed.headers["access-control-allow-origin"], Self.allowed)
        XCTAssertEqual(allowed.next()?.event, "state")
        let other = try fixture.subscribe(session, headers: ["Origin": Self.other])
        XCTAssertNil(other.headers["access-control-allow-origin"])
    }

    func testNoOriginsConfiguredMeansNoCORSHeaders() throws {
        fixture.stop()
        fixture = try ServerFixture()
        let response = try preflight("/action", origin: Self.allowed)
        XCTAssertEqual(response.status, 204)
        XCTAssertNil(response.header("Access-Control-Allow-Origin"))
        XCTAssertNil(response.header("Vary"))
    }

    func testWildcardEchoesAnyOrigin() throws {
        fixture.stop()
        fixture = try ServerFixture { $0.corsOrigins = ["*"] }
        let response = try preflight("/action", origin: Self.other)
        XCTAssertEqual(response.header("Access-Control-Allow-Origin"), Self.other)
    }
}
