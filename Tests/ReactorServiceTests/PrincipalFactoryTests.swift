import Foundation
import JWSSignatures
import ReactorCore
import ReactorService
import XCTest

/// A reactor that shows what its factory was handed: the principal of the session's creator.
final class WhoAmIReactor: Reactor {
    enum Action: Decodable {
        case ping
        init(from decoder: any Decoder) throws { self = .ping }
    }
    struct State: Codable {
        var owner: String
        var plan: String?
        var pings = 0
    }

    let initialState: State

    init(principal: Principal?) {
        initialState = State(owner: principal?.subject ?? "anonymous", plan: principal?[string: "plan"])
    }

    func reduce(state: State, mutation: Action) -> State {
        var state = state
        state.pings += 1
        return state
    }
}

/// Issue 16, part 4: the factory receives the principal; one-argument factories still work.
/// Tokens are HS256, signed here with the HMAC the server verifies with (OpenSSL's).
final class PrincipalFactoryTests: XCTestCase {
    private static let secret = "principal-factory-tests-secret-32-bytes!"
    private var fixture: ServerFixture!

    override func setUpWithError() throws {
        fixture = try ServerFixture { configuration in
            configuration.jwt = try? JWTVerification(secret: Self.secret)
        }
        fixture.server.register("whoami") { _, principal in WhoAmIReactor(principal: principal) }
    }

    override func tearDown() {
        fixture.stop()
        fixture = nil
    }

    private func token(_ claims: String) -> String {
        func base64URL(_ bytes: [UInt8]) -> String {
            Data(bytes).base64EncodedString().replacingOccurrences(of: "+", with: "-")
                .replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
        }
        let input = base64URL(Array(#"{"alg":"HS256","typ":"JWT"}"#.utf8)) + "." + base64URL(Array(claims.utf8))
        let mac = HMACSHA256Key(Array(Self.secret.utf8)).authenticationCode(for: Array(input.utf8))
        return input + "." + base64URL(Array(mac))
    }

    private func bearer(_ subject: String, extra: String = "") -> [String: String] {
        let exp = Int(Date().timeIntervalSince1970) + 300
        return ["Authorization": "Bearer " + token(#"{"sub":"\#(subject)","exp":\#(exp)\#(extra)}"#)]
    }

    func testTheFactoryReceivesTheCreatorsSubjectAndClaims() throws {
        let created = try fixture.client.request(
            "POST", "/sessions", body: #"{"reactor":"whoami"}"#,
            headers: bearer("alice", extra: #","plan":"pro""#))
        XCTAssertEqual(created.status, 201, created.text)
        let state = try XCTUnwrap(created.object["state"] as? [String: Any])
        XCTAssertEqual(state["owner"] as? String, "alice")
        XCTAssertEqual(state["plan"] as? String, "pro")

        let other = try fixture.client.request(
            "POST", "/sessions", body: #"{"reactor":"whoami"}"#, headers: bearer("bob"))
        XCTAssertEqual((other.object["state"] as? [String: Any])?["owner"] as? String, "bob")
        XCTAssertNil((other.object["state"] as? [String: Any])?["plan"])

        // Alice's session answers Alice only.
        let id = try XCTUnwrap(created.object["session"] as? String)
        XCTAssertEqual(try fixture.client.request("GET", "/sessions/\(id)", headers: bearer("alice")).status, 200)
        XCTAssertEqual(try fixture.client.request("GET", "/sessions/\(id)", headers: bearer("bob")).status, 403)
        XCTAssertEqual(try fixture.client.request("GET", "/sessions/\(id)").status, 401)
    }

    func testSubjectsAreComparedByteForByte() throws {
        // "Å" as U+212B and as U+00C5 are equal Swift strings, but two subjects (RFC 7519 §7.3).
        let created = try fixture.client.request(
            "POST", "/sessions", body: #"{"reactor":"counter"}"#,
            headers: bearer(#"\u212B"#))
        XCTAssertEqual(created.status, 201, created.text)
        let id = try XCTUnwrap(created.object["session"] as? String)
        XCTAssertEqual(try fixture.client.request("GET", "/sessions/\(id)", headers: bearer(#"\u212B"#)).status, 200)
        XCTAssertEqual(try fixture.client.request("GET", "/sessions/\(id)", headers: bearer(#"\u00C5"#)).status, 403)
    }

    func testEachSubjectHasItsOwnIdempotencyKeysByteForByte() throws {
        // "café" precomposed and decomposed are equal Swift strings, but two subjects: the same
        // key makes a session for each, and neither may use the other's.
        let (composed, decomposed) = (bearer(#"caf\u00e9"#), bearer(#"cafe\u0301"#))
        let key = ["Idempotency-Key": "nf-1"]
        let first = try fixture.client.request(
            "POST", "/sessions", body: #"{"reactor":"counter"}"#, headers: composed.merging(key) { $1 })
        XCTAssertEqual(first.status, 201, first.text)
        let second = try fixture.client.request(
            "POST", "/sessions", body: #"{"reactor":"counter"}"#, headers: decomposed.merging(key) { $1 })
        XCTAssertEqual(second.status, 201, second.text)
        XCTAssertNil(second.header("Idempotent-Replayed"), "not the other subject's answer")
        let id = try XCTUnwrap(first.object["session"] as? String)
        XCTAssertNotEqual(second.object["session"] as? String, id)
        XCTAssertEqual(try fixture.client.request("GET", "/sessions/\(id)", headers: decomposed).status, 403)
        XCTAssertEqual(try fixture.client.request("GET", "/sessions/\(id)", headers: composed).status, 200)
    }

    func testASubjectWithANulIsRefused() throws {
        // A store keeps the owner as text; PostgreSQL's failed the whole group commit on it.
        let refused = try fixture.client.request(
            "POST", "/sessions", body: #"{"reactor":"counter"}"#,
            headers: bearer(#"a\u0000b"#))
        XCTAssertEqual(refused.status, 401, refused.text)
        XCTAssertTrue(refused.text.contains("NUL"), refused.text)
    }

    func testAOneArgumentFactoryStillWorksWithAuthenticationOn() throws {
        // `counter` is registered by the bundled reactors with `{ currentUser in ... }`.
        let created = try fixture.client.request(
            "POST", "/sessions", body: #"{"reactor":"counter"}"#, headers: bearer("carol"))
        XCTAssertEqual(created.status, 201, created.text)
        let id = try XCTUnwrap(created.object["session"] as? String)
        let acted = try fixture.client.request(
            "POST", "/action", body: #"{"session":"\#(id)","action":{"type":"increase"}}"#,
            headers: bearer("carol"))
        XCTAssertEqual(acted.status, 200, acted.text)
        XCTAssertEqual(
            try fixture.client.request(
                "POST", "/action", body: #"{"session":"\#(id)","action":{"type":"increase"}}"#,
                headers: bearer("dave")
            ).status, 403)
    }

    func testTheAdminTokenOnASessionRouteIsA403NotAMalformedToken() throws {
        let created = try fixture.client.request(
            "POST", "/sessions", body: #"{"reactor":"whoami"}"#, headers: bearer("alice"))
        let id = try XCTUnwrap(created.object["session"] as? String, created.text)
        let admin = ["Authorization": "Bearer \(ServerFixture.token)"]
        for (method, path, body) in [
            ("POST", "/sessions", #"{"reactor":"whoami"}"#), ("GET", "/sessions/\(id)", ""),
            ("DELETE", "/sessions/\(id)", ""), ("GET", "/sessions/\(id)/events", ""),
            ("POST", "/sessions/\(id)/actions", "{}"), ("POST", "/action", #"{"session":"\#(id)","action":{}}"#),
        ] {
            let refused = try fixture.client.request(method, path, body: body, headers: admin)
            XCTAssertEqual(refused.status, 403, "\(method) \(path): \(refused.text)")
            XCTAssertTrue((refused.object["detail"] as? String ?? "").contains("admin token"), refused.text)
            XCTAssertEqual(refused.header("WWW-Authenticate"), #"Bearer error="insufficient_scope""#)
        }
        let query = try fixture.client.request("GET", "/sessions/\(id)/events?access_token=\(ServerFixture.token)")
        XCTAssertEqual(query.status, 403, query.text)
        // The history routes are the admin's.
        XCTAssertEqual(try fixture.client.request("GET", "/sessions/\(id)/actions", headers: admin).status, 200)
        XCTAssertEqual(try fixture.client.request("GET", "/sessions/\(id)", headers: bearer("alice")).status, 200)
        let metrics = try fixture.client.request("GET", "/metrics").text
        XCTAssertFalse(metrics.contains(#"reactord_auth_failures_total{reason="malformed"}"#), metrics)
        XCTAssertTrue(metrics.contains(#"reactord_auth_failures_total{reason="forbidden"} 7"#), metrics)
    }

    func testWithoutAuthenticationThePrincipalIsNil() throws {
        let open = try ServerFixture()
        defer { open.stop() }
        open.server.register("whoami") { _, principal in WhoAmIReactor(principal: principal) }
        let created = try open.client.request("POST", "/sessions", body: #"{"reactor":"whoami"}"#)
        XCTAssertEqual(created.status, 201, created.text)
        XCTAssertEqual((created.object["state"] as? [String: Any])?["owner"] as? String, "anonymous")
    }
}
