import Foundation
import XCTest

@testable import ReactorService

/// Issue 6, part 6: ids are unguessable capabilities, nothing leaks them or the admin token,
/// the token check takes the same time wherever a guess goes wrong, per-IP limits hold.
final class SecurityTests: XCTestCase {
    func testSessionIdsAre128RandomBitsInBase64URL() throws {
        let fixture = try ServerFixture()
        defer { fixture.stop() }
        let ids = try (0..<500).map { _ in try fixture.createSession() }
        XCTAssertEqual(Set(ids).count, ids.count, "distinct")
        var ones = [Int](repeating: 0, count: 128)
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")
        for id in ids {
            XCTAssertEqual(id.count, 22, id)
            // 22 characters × 6 bits = 132: the last character carries 2 bits and 4 zero bits.
            let values = id.map { alphabet.firstIndex(of: $0) }
            XCTAssertFalse(values.contains(nil), "base64url only: \(id)")
            XCTAssertEqual((values.last!! & 0x0F), 0, "no bits past the 128th: \(id)")
            var bit = 0
            for value in values.compactMap({ $0 }) {
                for shift in stride(from: 5, through: 0, by: -1) where bit < 128 {
                    ones[bit] += (value >> shift) & 1
                    bit += 1
                }
            }
        }
        // Every one of the 128 bits is set in about half the ids: none is fixed or biased.
        // 500 draws: mean 250, sd ~11; 190...310 is more than 5 sd either way.
        for (index, count) in ones.enumerated() {
            XCTAssertTrue((190...310).contains(count), "bit \(index) set in \(count) of 500 ids")
        }
        // Made in-process too, many more: no collision, every id well-formed.
        let many = (0..<100_000).map { _ in SessionID.make() }
        XCTAssertEqual(Set(many).count, many.count)
        XCTAssertTrue(many.allSatisfy { SessionID.isWellFormed($0.string) && SessionKey($0.string) == $0 })
    }

    func testNoSessionIsReachableWithoutItsId() throws {
        let fixture = try ServerFixture()
        defer { fixture.stop() }
        let session = try fixture.createSession()
        let client = fixture.client
        // No listing but the admin's (docs/history.md).
        XCTAssertEqual(try client.request("GET", "/sessions").status, 401)
        XCTAssertFalse(try client.request("GET", "/sessions").text.contains(session))
        XCTAssertEqual(try client.request("GET", "/sessions/").status, 404)
        for path in ["/", "/healthz", "/metrics", "/user", "/openapi.yaml"] {
            XCTAssertFalse(try client.request("GET", path).text.contains(session), "\(path) shows no session id")
        }
        // Near misses are other ids: unknown, never a prefix or case-insensitive match.
        let near = [
            String(session.dropLast()), session + "A",
            session.lowercased() == session ? session.uppercased() : session.lowercased(),
            String(session.dropLast()) + (session.last == "A" ? "B" : "A"), " " + session, session + "%20",
            session.replacingOccurrences(of: "-", with: "+"), "../" + session,
        ]
        for id in Set(near) where id != session {
            let encoded = id.addingPercentEncoding(withAllowedCharacters: .urlPathAllowed) ?? id
            XCTAssertEqual(try client.request("GET", "/sessions/\(encoded)").status, 404, id)
            XCTAssertEqual(try client.request("DELETE", "/sessions/\(encoded)").status, 404, id)
            XCTAssertEqual(try fixture.send(id, #"{"type":"increase"}"#).status, 404, id)
        }
        let state = try client.request("GET", "/sessions/\(session)")
        XCTAssertEqual(state.object["version"] as? Int, 0, "nothing reached the session")
    }

    func testMetricsAndErrorsLeakNoSessionIdOrToken() throws {
        let fixture = try ServerFixture()
        defer { fixture.stop() }
        let session = try fixture.createSession()
        let client = fixture.client
        let token = ServerFixture.token
        try fixture.send(session, #"{"type":"increase"}"#)
        let events = try fixture.subscribe(session)
        XCTAssertNotNil(events.next())
        var errors: [TestResponse] = [
            try fixture.send(session, #"{"type":"nope"}"#),
            try fixture.send(session, #"{"type":"alert"}"#),
            try fixture.send(session, #"{"type":"alert","message":5}"#),
            try client.request("POST", "/action", body: #"{"session":"\#(session)","action":7}"#),
            try client.request("POST", "/action", body: #"{"session":"\#(session)x","action":{"type":"increase"}}"#),
            try client.request("POST", "/action", body: #"{"session":"\#(session)""#),
            try client.request("GET", "/sessions/\(session)/events?fields=nope"),
            try client.request("GET", "/sessions/\(session)x"),
            try client.request("PATCH", "/sessions/\(session)"),
            try client.request("PUT", "/user", body: #"{"id":"u"}"#, headers: ["Authorization": "Bearer \(token)"]),
            try client.request("PUT", "/user", body: "{}", headers: ["Authorization": "Bearer \(token)x"]),
            try client.request("PUT", "/user", body: "{}", headers: ["Authorization": "Basic \(token)"]),
            try client.request("DELETE", "/user", headers: ["Authorization": "Bearer \(String(token.dropLast()))"]),
        ]
        errors.append(try client.request("GET", "/metrics"))
        for response in errors {
            XCTAssertGreaterThanOrEqual(
                response.status, response.header("Content-Type") == "application/problem+json" ? 400 : 200)
            XCTAssertFalse(response.text.contains(session), "\(response.status) \(response.text)")
            XCTAssertFalse(response.text.contains(token), "\(response.status) \(response.text)")
            XCTAssertFalse(response.headers.values.contains { $0.contains(session) || $0.contains(token) })
        }
        XCTAssertTrue(errors.last!.text.contains("reactord_sessions 1"))
    }

    func testAdminTokenComparisonIsConstantTime() throws {
        let secret = Array(String(repeating: "s", count: 4096).utf8)
        XCTAssertTrue(AdminAuthorization.constantTimeEquals(secret, secret))
        XCTAssertFalse(AdminAuthorization.constantTimeEquals([], secret))
        XCTAssertFalse(AdminAuthorization.constantTimeEquals(secret + [0], secret))
        XCTAssertFalse(AdminAuthorization.constantTimeEquals(Array(secret.dropLast()), secret))
        XCTAssertFalse(AdminAuthorization.constantTimeEquals(Array(secret.dropLast()) + [0], secret))
        XCTAssertTrue(AdminAuthorization.constantTimeEquals([], []))

        // A guess wrong in its first byte does the work of one wrong in its last byte, and a
        // short guess that of a long one: every byte of the secret is read, once, whatever the
        // guess, and as many bytes of the guess (counted, not timed: a timing would measure the
        // machine's other load).
        var wrongFirst = secret
        wrongFirst[0] = 0x41
        var wrongLast = secret
        wrongLast[secret.count - 1] = 0x41
        let guesses = [wrongFirst, wrongLast, [0x41], [], Array(repeating: 0x41, count: 65_536), secret]
        for guess in guesses {
            let (countedGuess, countedSecret) = (CountingBytes(guess), CountingBytes(secret))
            XCTAssertEqual(AdminAuthorization.constantTimeEquals(countedGuess, countedSecret), guess == secret)
            XCTAssertEqual(countedSecret.reads.value, secret.count, "a guess of \(guess.count) bytes")
            XCTAssertEqual(
                countedGuess.reads.value, guess.isEmpty ? 0 : secret.count, "a guess of \(guess.count) bytes")
        }
    }

    func testConnectionsPerIPIsConfigurableAndHolds() throws {
        let fixture = try ServerFixture { $0.connectionsPerIP = 3 }
        defer { fixture.stop() }
        try assertLimit(port: fixture.port, limit: 3)
    }

    func testConnectionsPerIPFlagOfTheExecutable() throws {
        let server = try ReactordProcess(arguments: ["--connections-per-ip", "2", "--admin-token", "t"])
        try assertLimit(port: server.port, limit: 2)
        let environment = try ReactordProcess(
            arguments: ["--admin-token", "t"],
            environment: ["REACTORD_CONNECTIONS_PER_IP": "4"])
        try assertLimit(port: environment.port, limit: 4)
    }

    /// `limit` keep-alive connections from 127.0.0.1 are served; one more is answered 429 with
    /// Retry-After; once one of the first goes, a new one is served again.
    private func assertLimit(port: UInt16, limit: Int, file: StaticString = #filePath, line: UInt = #line) throws {
        var clients = try (0..<limit).map { _ in try TestClient(port: port) }
        for client in clients {
            XCTAssertEqual(client.request("GET", "/healthz")?.status, 200, file: file, line: line)
        }
        let refused = try TestClient(port: port, receiveTimeout: 2)
        let refusal = refused.request("GET", "/healthz")
        XCTAssertEqual(refusal?.status, 429, "connection \(limit + 1) is refused", file: file, line: line)
        XCTAssertNotNil(refusal?.header("Retry-After"), file: file, line: line)
        clients.removeFirst()
        let again = waitUntil(timeout: 3) {
            (try? TestClient(port: port, receiveTimeout: 1).request("GET", "/healthz")?.status) == 200
        }
        XCTAssertTrue(again, "a place freed is served again", file: file, line: line)
        for client in clients {
            XCTAssertEqual(client.request("GET", "/healthz")?.status, 200, file: file, line: line)
        }
    }
}

/// Bytes that count how often they are read.
private struct CountingBytes: RandomAccessCollection {
    final class Counter { var value = 0 }
    let bytes: [UInt8]
    let reads = Counter()
    init(_ bytes: [UInt8]) { self.bytes = bytes }
    var startIndex: Int { bytes.startIndex }
    var endIndex: Int { bytes.endIndex }
    subscript(position: Int) -> UInt8 {
        reads.value += 1
        return bytes[position]
    }
}
