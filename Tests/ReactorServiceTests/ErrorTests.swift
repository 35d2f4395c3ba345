import XCTest

/// Every error status of the contract, each a problem document naming the problem, none of
/// them changing any session.
final class ErrorTests: XCTestCase {
    private var fixture: ServerFixture!
    private var session = ""

    override func setUpWithError() throws {
        fixture = try ServerFixture { $0.bodyLimit = 4096 }
        session = try fixture.createSession()
        XCTAssertEqual(try fixture.send(session, #"{"type":"increase"}"#).status, 200)
    }

    override func tearDown() {
        fixture.stop()
        // swift-corelibs-xctest never frees its test-case objects: a fixture left in one is
        // a whole stopped server that LeakSanitizer reports at exit.
        fixture = nil
    }

    private func assertSessionUnchanged(file: StaticString = #filePath, line: UInt = #line) throws {
        let current = try fixture.client.request("GET", "/sessions/\(session)")
        XCTAssertEqual(current.object["version"] as? Int, 1, file: file, line: line)
        XCTAssertEqual((current.object["state"] as? [String: Any])?["count"] as? Int, 1, file: file, line: line)
    }

    func testUnparseableJSONIs400() throws {
        assertProblem(try fixture.client.request("POST", "/action", body: "{not json"), 400, mentions: ["JSON"])
        assertProblem(
            try fixture.client.request("POST", "/action", bodyBytes: [0x7B, 0xFF, 0xFE, 0x7D]), 400,
            mentions: ["JSON"])
        assertProblem(try fixture.client.request("POST", "/sessions", body: "[1,"), 400, mentions: ["JSON"])
        assertProblem(try fixture.client.request("POST", "/sessions", body: "\r"), 400, mentions: ["JSON"])
        assertProblem(try fixture.client.request("POST", "/sessions", body: " \n"), 400, mentions: ["JSON"])
        try assertSessionUnchanged()
    }

    /// A key twice in one object means what each reader makes of it (Foundation took the first,
    /// most parsers the last): a filter in front could pass one request and reactord serve another.
    func testADuplicateKeyIs400NamingIt() throws {
        let cases = [
            (#"{"session":"\#(session)","action":{"type":"increase","type":"decrease"}}"#, "type"),
            (#"{"session":"\#(session)","action":{"type":"increase"},"session":"x"}"#, "session"),
        ]
        for (body, key) in cases {
            assertProblem(
                try fixture.client.request("POST", "/action", body: body), 400, mentions: ["'\(key)'", "twice"])
        }
        assertProblem(
            try fixture.client.request("POST", "/sessions", body: #"{"reactor":"counter","reactor":"counter"}"#),
            400, mentions: ["reactor", "twice"])
        try assertSessionUnchanged()
    }

    func testWrongShapeIs422NamingTheField() throws {
        assertProblem(try fixture.client.request("POST", "/action", body: "[]"), 422, mentions: ["object"])
        assertProblem(
            try fixture.client.request("POST", "/action", body: #"{"action":{"type":"increase"}}"#),
            422, mentions: ["session"])
        assertProblem(
            try fixture.client.request("POST", "/action", body: #"{"session":42}"#), 422,
            mentions: ["session", "string"])
        assertProblem(
            try fixture.client.request("POST", "/action", body: #"{"session":"\#(session)"}"#), 422,
            mentions: ["missing field 'action'"])
        assertProblem(
            try fixture.client.request("POST", "/action", body: #"{"session":"\#(session)","action":null}"#), 422,
            mentions: ["'action'", "not null"])
        assertProblem(try fixture.send(session, #"{"type":"explode"}"#), 422, mentions: ["explode", "increase"])
        assertProblem(try fixture.send(session, #"{"message":"no type"}"#), 422, mentions: ["type"])
        assertProblem(try fixture.send(session, #"{"type":"alert"}"#), 422, mentions: ["message"])
        assertProblem(
            try fixture.send(session, #"{"type":"alert","message":7}"#), 422,
            mentions: ["message", "string"])
        assertProblem(try fixture.send(session, #""increase""#), 422, mentions: ["action"])
        assertProblem(
            try fixture.client.request("POST", "/sessions", body: #"{"reactor":"nope"}"#), 422,
            mentions: ["nope", "counter"])
        // A name as long as the body allows is not sent back whole.
        let long = try fixture.client.request(
            "POST", "/sessions", body: #"{"reactor":""# + String(repeating: "x", count: 4_000) + #""}"#)
        assertProblem(long, 422, mentions: [String(repeating: "x", count: 64) + "…'", "counter"])
        XCTAssertLessThan(long.text.utf8.count, 500, long.text)
        // Nor one character of a thousand combining marks, nor an action's unknown type.
        let marks = "e" + String(repeating: "\u{301}", count: 1_000)
        let combined = try fixture.client.request("POST", "/sessions", body: #"{"reactor":""# + marks + #""}"#)
        assertProblem(combined, 422, mentions: ["unknown reactor"])
        XCTAssertLessThan(combined.text.utf8.count, 500, combined.text)
        let type = try fixture.send(session, #"{"type":""# + String(repeating: "y", count: 3_000) + #""}"#)
        assertProblem(type, 422, mentions: [String(repeating: "y", count: 64) + "…'"])
        XCTAssertLessThan(type.text.utf8.count, 500, type.text)
        try assertSessionUnchanged()
    }

    func testUnknownSessionIs404() throws {
        assertProblem(try fixture.send("AAAAAAAAAAAAAAAAAAAAAA", #"{"type":"increase"}"#), 404, mentions: ["session"])
        assertProblem(try fixture.client.request("GET", "/sessions/nope"), 404, mentions: ["session"])
        assertProblem(
            try fixture.client.request("GET", "/sessions/AAAAAAAAAAAAAAAAAAAAAA/events"), 404,
            mentions: ["session"])
        try assertSessionUnchanged()
    }

    func testOversizedBodyIs413() throws {
        let big =
            #"{"session":"\#(session)","action":{"type":"alert","message":""# + String(repeating: "x", count: 8192)
            + #""}}"#
        assertProblem(try fixture.client.request("POST", "/action", body: big), 413, mentions: ["4096"])
        try assertSessionUnchanged()
    }

    /// Every action that did not apply is counted by its outcome: under its session's kind once
    /// the session was found, `unknown` before, and a 413 MicroHTTP gave before the route ran too.
    func testActionsThatDidNotApplyAreCountedByOutcomeAndKind() throws {
        let big = #"{"session":"\#(session)","action":{"type":"increase"}}"# + String(repeating: " ", count: 8192)
        XCTAssertEqual(try fixture.client.request("POST", "/action", body: big).status, 413)
        XCTAssertEqual(try fixture.send(session, #"{"type":"alert"}"#).status, 422)
        XCTAssertEqual(try fixture.send("AAAAAAAAAAAAAAAAAAAAAA", #"{"type":"increase"}"#).status, 404)
        XCTAssertEqual(try fixture.client.request("POST", "/action", body: "{not json").status, 400)
        // A body in a Content-Encoding is not understood, not a server that could not serve it.
        let encoded = try fixture.client.request(
            "POST", "/sessions/\(session)/actions", body: "{}", headers: ["Content-Encoding": "gzip"])
        XCTAssertEqual(encoded.status, 415)
        let text = try fixture.client.request("GET", "/metrics").text
        for line in [
            #"reactord_actions_total{reactor="unknown",outcome="too_large"} 1"#,
            #"reactord_actions_total{reactor="counter",outcome="invalid"} 1"#,
            #"reactord_actions_total{reactor="unknown",outcome="unknown_session"} 1"#,
            #"reactord_actions_total{reactor="unknown",outcome="malformed"} 2"#,
            #"reactord_actions_total{reactor="counter",outcome="applied"} 1"#,
        ] {
            XCTAssertTrue(text.contains(line), "\(line) in\n\(text)")
        }
        XCTAssertFalse(text.contains(#"reactor="unknown",outcome="invalid""#), text)
        XCTAssertFalse(text.contains(#"outcome="unavailable""#), text)
    }

    func testWrongMethodIs405WithAllow() throws {
        let response = try fixture.client.request("PATCH", "/action", body: "{}")
        assertProblem(response, 405, mentions: [])
        XCTAssertEqual(allowed(response), ["POST", "OPTIONS"])
        let user = try fixture.client.request("POST", "/user", body: "{}")
        XCTAssertEqual(user.status, 405)
        XCTAssertEqual(allowed(user), ["GET", "HEAD", "PUT", "DELETE", "OPTIONS"])
        assertProblem(try fixture.client.request("GET", "/no/such/path"), 404, mentions: [])
        try assertSessionUnchanged()
    }

    private func allowed(_ response: TestResponse) -> Set<String> {
        Set((response.header("Allow") ?? "").split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) })
    }

    func testUserWritesNeedTheAdminToken() throws {
        let missing = try fixture.client.request("PUT", "/user", body: #"{"id":"u1","name":"Jay"}"#)
        assertProblem(missing, 401, mentions: ["Bearer"])
        XCTAssertNotNil(missing.header("WWW-Authenticate"))
        assertProblem(
            try fixture.client.request(
                "PUT", "/user", body: #"{"id":"u1","name":"Jay"}"#,
                headers: ["Authorization": "Bearer wrong"]), 403, mentions: ["token"])
        assertProblem(
            try fixture.client.request("DELETE", "/user", headers: ["Authorization": "Bearer wrong"]), 403,
            mentions: ["token"])
        let body = try fixture.client.request(
            "PUT", "/user", body: #"{"id":"u1"}"#,
            headers: ["Authorization": "Bearer \(ServerFixture.token)"])
        assertProblem(body, 422, mentions: ["name"])
        XCTAssertEqual(try fixture.client.request("GET", "/user").text, "null")
        try assertSessionUnchanged()
    }

    func testBadFieldsFilterIs400() throws {
        assertProblem(
            try fixture.client.request("GET", "/sessions/\(session)/events?fields=count,nope"), 400,
            mentions: ["nope", "count"])
    }
}
