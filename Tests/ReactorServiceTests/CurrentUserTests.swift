import XCTest

final class CurrentUserTests: XCTestCase {
    func testPutUserReachesAThousandLiveSubscribersAndNewSessions() throws {
        // 1,000 streams and a client, all from 127.0.0.1: past the default per-address limit.
        let fixture = try ServerFixture { $0.connectionsPerIP = 0 }
        defer { fixture.stop() }
        let sessions = try (0..<1_000).map { _ in try fixture.createSession() }
        let streams = try sessions.map { try fixture.subscribe($0) }
        for stream in streams { XCTAssertEqual(stream.next()?.event, "state") }

        let put = try fixture.putUser(id: "u-jay", name: "jay")
        XCTAssertEqual(put.status, 200)
        XCTAssertEqual(put.object["name"] as? String, "jay")

        var reached = 0
        for stream in streams {
            guard let event = stream.next(), event.event == "state",
                let user = event.state["user"] as? [String: Any]
            else { continue }
            if user["id"] as? String == "u-jay", user["name"] as? String == "jay" { reached += 1 }
        }
        XCTAssertEqual(reached, 1_000)

        let later = try fixture.client.request("POST", "/sessions")
        let user = (later.object["state"] as? [String: Any])?["user"] as? [String: Any]
        XCTAssertEqual(user?["name"] as? String, "jay", "a session made afterwards starts with the user")
        XCTAssertEqual(later.object["version"] as? Int, 0)
        let current = try fixture.client.request("GET", "/user")
        XCTAssertEqual(current.object["id"] as? String, "u-jay")
    }

    func testDeleteUserClearsItEverywhere() throws {
        let fixture = try ServerFixture()
        defer { fixture.stop() }
        XCTAssertEqual(try fixture.putUser(id: "u1", name: "kim").status, 200)
        let session = try fixture.createSession()
        let events = try fixture.subscribe(session)
        XCTAssertEqual((events.next()?.state["user"] as? [String: Any])?["name"] as? String, "kim")
        let cleared = try fixture.client.request(
            "DELETE", "/user",
            headers: ["Authorization": "Bearer \(ServerFixture.token)"])
        XCTAssertEqual(cleared.status, 204)
        let next = try XCTUnwrap(events.next())
        XCTAssertTrue(next.state["user"] is NSNull, "\(next.data)")
        XCTAssertEqual(try fixture.client.request("GET", "/user").text, "null")
    }

    func testTheTokenIsReadWithoutTheWhitespaceAroundIt() throws {
        let fixture = try ServerFixture()
        defer { fixture.stop() }
        for field in [
            "Bearer \(ServerFixture.token) ", "Bearer  \(ServerFixture.token)\t", "bearer \(ServerFixture.token)",
        ] {
            let put = try fixture.client.request(
                "PUT", "/user", body: #"{"id":"u1","name":"kim"}"#, headers: ["Authorization": field])
            XCTAssertEqual(put.status, 200, "\(field.debugDescription): \(put.text)")
        }
        let empty = try fixture.client.request(
            "PUT", "/user", body: #"{"id":"u1","name":"kim"}"#, headers: ["Authorization": "Bearer \t "])
        XCTAssertEqual(empty.status, 401, empty.text)
        XCTAssertTrue(empty.text.contains("empty"), empty.text)
    }
}
