import Foundation
import XCTest

/// `POST /sessions/{id}/actions`: the action as the whole body, the session in the path (where
/// a balancer can hash on it), with the contract of `POST /action`.
final class SessionActionsRouteTests: XCTestCase {
    private var fixture: ServerFixture!

    override func setUpWithError() throws { fixture = try ServerFixture() }

    override func tearDown() {
        fixture.stop()
        fixture = nil
    }

    private func post(_ session: String, _ body: String, headers: [String: String] = [:]) throws -> TestResponse {
        try fixture.client.request("POST", "/sessions/\(session)/actions", body: body, headers: headers)
    }

    func testAnActionOnThePathAnswersAsPostAction() throws {
        let session = try fixture.createSession()
        let applied = try post(session, #"{"type":"increase"}"#)
        XCTAssertEqual(applied.status, 200, applied.text)
        XCTAssertEqual(applied.object["session"] as? String, session)
        XCTAssertEqual(applied.object["version"] as? Int, 1)
        XCTAssertEqual((applied.object["state"] as? [String: Any])?["count"] as? Int, 1)
        XCTAssertEqual(applied.header("ETag"), #""1""#)
        let alert = try post(session, #"{"type":"alert","message":"Hi"}"#)
        XCTAssertEqual((alert.object["state"] as? [String: Any])?["alertMessage"] as? String, "Hi")
        let both = try fixture.send(session, #"{"type":"increase"}"#)
        XCTAssertEqual(
            both.object["version"] as? Int, 4, "one session, whichever route (the alert was a state and a pulse)")
    }

    func testItsErrorsNameTheProblem() throws {
        let session = try fixture.createSession()
        assertProblem(try post("AAAAAAAAAAAAAAAAAAAAAA", #"{"type":"increase"}"#), 404)
        assertProblem(try post(session, "not json"), 400)
        assertProblem(try post(session, #"{"type":"fly"}"#), 422, mentions: ["fly"])
        assertProblem(try post(session, #"{"type":"alert"}"#), 422, mentions: ["message"])
        assertProblem(
            try post(session, #"{"session":"\#(session)","action":{"type":"increase"}}"#), 422,
            mentions: ["type"])
        assertProblem(try post(session, #"{"type":"increase"}"#, headers: ["If-Match": #""7""#]), 412)
        XCTAssertEqual(
            try fixture.client.request("GET", "/sessions/\(session)").object["version"] as? Int, 0,
            "no error applied anything")
    }
}
