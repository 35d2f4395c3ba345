import XCTest

/// ReactorKit's documented pulse case, over HTTP and SSE.
final class PulseOverHTTPTests: XCTestCase {
    func testDocumentedAlertCaseDeliversPulsesAndNoStateForDoSomeAction() throws {
        let fixture = try ServerFixture()
        defer { fixture.stop() }
        let session = try fixture.createSession()
        let events = try fixture.subscribe(session)
        XCTAssertEqual(events.status, 200)
        let initial = try XCTUnwrap(events.next())
        XCTAssertEqual(initial.event, "state")
        XCTAssertEqual(initial.id, "0")
        XCTAssertEqual(events.retry, 3000)

        for action in [
            #"{"type":"alert","message":"Hello"}"#, #"{"type":"alert","message":"Hello"}"#,
            #"{"type":"doSomeAction"}"#, #"{"type":"alert","message":"Hello"}"#,
            #"{"type":"alert","message":"tokijh"}"#, #"{"type":"doSomeAction"}"#,
        ] {
            XCTAssertEqual(try fixture.send(session, action).status, 200)
        }
        let received = events.drain()
        let pulses = received.filter { $0.event == "pulse" }
        XCTAssertEqual(pulses.map { $0.object["name"] as? String }, Array(repeating: "alertMessage", count: 4))
        XCTAssertEqual(pulses.map { $0.object["value"] as? String }, ["Hello", "Hello", "Hello", "tokijh"])
        // Only the first alert changes the state (nil → Hello) and the last (Hello → tokijh).
        let states = received.filter { $0.event == "state" }
        XCTAssertEqual(states.map { $0.state["alertMessage"] as? String }, ["Hello", "tokijh"])
        // ids grow by one per event, with no gap.
        let ids = received.compactMap { $0.id.flatMap(Int.init) }
        XCTAssertEqual(ids, Array(1...ids.count))
    }

    func testActionAnswerCarriesStateAndVersionOfLatestEvent() throws {
        let fixture = try ServerFixture()
        defer { fixture.stop() }
        let session = try fixture.createSession()
        let first = try fixture.send(session, #"{"type":"increase"}"#)
        XCTAssertEqual(first.status, 200)
        XCTAssertEqual(first.object["session"] as? String, session)
        XCTAssertEqual(first.object["version"] as? Int, 1)
        XCTAssertEqual((first.object["state"] as? [String: Any])?["count"] as? Int, 1)
        let alert = try fixture.send(session, #"{"type":"alert","message":"hi"}"#)
        XCTAssertEqual(alert.object["version"] as? Int, 3, "a state event and a pulse event")
        let none = try fixture.send(session, #"{"type":"doSomeAction"}"#)
        XCTAssertEqual(none.object["version"] as? Int, 3)
        let decrease = try fixture.send(session, #"{"type":"decrease"}"#)
        XCTAssertEqual((decrease.object["state"] as? [String: Any])?["count"] as? Int, 0)
    }
}
