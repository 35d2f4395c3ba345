import XCTest

final class EventStreamTests: XCTestCase {
    func testStreamHeadersRetryAndCurrentStateFirst() throws {
        let fixture = try ServerFixture()
        defer { fixture.stop() }
        let session = try fixture.createSession()
        try fixture.send(session, #"{"type":"increase"}"#)
        let events = try fixture.subscribe(session)
        XCTAssertEqual(events.status, 200)
        XCTAssertEqual(events.headers["content-type"], "text/event-stream")
        XCTAssertEqual(events.headers["cache-control"], "no-cache")
        XCTAssertEqual(events.headers["x-accel-buffering"], "no")
        let first = try XCTUnwrap(events.next())
        XCTAssertEqual(first.retry, 3000, "retry: comes in the first event's block")
        XCTAssertEqual(events.retryOnlyBlocks, 0)
        XCTAssertEqual(first.event, "state")
        XCTAssertEqual(first.id, "1")
        XCTAssertEqual(first.state["count"] as? Int, 1)
    }

    func testSubscribersShareTheSameEventsAndHeartbeatsArrive() throws {
        let fixture = try ServerFixture { $0.heartbeat = .milliseconds(200) }
        defer { fixture.stop() }
        let session = try fixture.createSession()
        let streams = try (0..<5).map { _ in try fixture.subscribe(session) }
        for stream in streams { XCTAssertEqual(stream.next()?.id, "0") }
        for _ in 0..<10 { try fixture.send(session, #"{"type":"increase"}"#) }
        for stream in streams {
            let counts = stream.take(10).map { $0.state["count"] as? Int }
            XCTAssertEqual(counts, (1...10).map { $0 })
        }
        Thread.sleep(forTimeInterval: 0.7)
        XCTAssertNil(streams[0].next(timeout: 0.1))
        XCTAssertTrue(streams[0].comments.contains("keep-alive"), "\(streams[0].comments)")
    }

    func testResumeReplaysExactlyWhatWasMissed() throws {
        let fixture = try ServerFixture()
        defer { fixture.stop() }
        let session = try fixture.createSession()
        let first = try fixture.subscribe(session)
        try fixture.send(session, #"{"type":"increase"}"#)
        try fixture.send(session, #"{"type":"alert","message":"a"}"#)
        let seen = first.take(3)
        XCTAssertEqual(seen.map(\.id), ["0", "1", "2"])
        first.reset()
        try fixture.send(session, #"{"type":"alert","message":"a"}"#)  // pulse only: 4
        try fixture.send(session, #"{"type":"increase"}"#)  // state: 5

        let resumed = try fixture.subscribe(session, headers: ["Last-Event-ID": "2"])
        let missed = resumed.drain()
        XCTAssertEqual(missed.map(\.id), ["3", "4", "5"])
        XCTAssertEqual(missed.map(\.event), ["pulse", "pulse", "state"])
        XCTAssertEqual(missed.last?.state["count"] as? Int, 2)

        let byQuery = try fixture.subscribe(session, query: "?lastEventId=4")
        XCTAssertEqual(byQuery.drain().map(\.id), ["5"])

        let upToDate = try fixture.subscribe(session, headers: ["Last-Event-ID": "5"])
        XCTAssertEqual(upToDate.drain().count, 0)
        // A resume that missed nothing gets `retry:` in front of its next event, not alone.
        try fixture.send(session, #"{"type":"increase"}"#)
        let next = try XCTUnwrap(upToDate.next())
        XCTAssertEqual(next.id, "6")
        XCTAssertEqual(next.retry, 3000)
        XCTAssertEqual(upToDate.retryOnlyBlocks, 0)
        XCTAssertEqual(missed.first?.retry, 3000)
    }

    func testAResumeThatMissedMoreThanTheQueueHoldsGetsThereInParts() throws {
        let fixture = try ServerFixture { $0.streamQueueLimit = 16 * 1024 }
        defer { fixture.stop() }
        let session = try fixture.createSession()
        // 40 alerts of 1,000 characters: a state and a pulse event each, about 80 KiB in all.
        let message = String(repeating: "x", count: 990)
        for index in 0..<40 { try fixture.send(session, #"{"type":"alert","message":"\#(index)\#(message)"}"#) }
        var lastSeen = "0"
        var received: [String] = []
        var connections = 0
        while lastSeen != "80", connections < 20 {
            let resumed = try fixture.subscribe(session, headers: ["Last-Event-ID": lastSeen])
            XCTAssertEqual(resumed.status, 200)
            connections += 1
            let events = resumed.drain()
            XCTAssertFalse(events.isEmpty, "a resume from \(lastSeen) got nothing")
            received += events.compactMap(\.id)
            lastSeen = events.last?.id ?? lastSeen
        }
        XCTAssertEqual(received, (1...80).map(String.init), "every event once, in order")
        XCTAssertGreaterThan(connections, 1, "the whole backlog fitted one queue: the test proves nothing")
    }

    func testAStateLargerThanTheQueueReachesReadersThatKeepUp() throws {
        let fixture = try ServerFixture { $0.streamQueueLimit = 1_024 }
        defer { fixture.stop() }
        let session = try fixture.createSession()
        let stream = try fixture.subscribe(session)
        XCTAssertEqual(stream.next()?.id, "0")
        // The user is in every session's state: 2 KiB of it makes every state event larger than the queue.
        XCTAssertEqual(try fixture.putUser(id: "u", name: String(repeating: "n", count: 2_048)).status, 200)
        XCTAssertEqual(stream.next()?.id, "1", "an open stream")
        let fresh = try fixture.subscribe(session)
        XCTAssertEqual(fresh.status, 200)
        XCTAssertEqual(fresh.next()?.id, "1", "a new stream starts with the state")
        try fixture.send(session, #"{"type":"increase"}"#)
        XCTAssertEqual(stream.next()?.id, "2")
        XCTAssertEqual(fresh.next()?.id, "2")

        // Missed: a small pulse, then a state larger than the queue behind it. Each resume moves on.
        try fixture.send(session, #"{"type":"alert","message":"a"}"#)  // 3: state, 4: pulse
        try fixture.send(session, #"{"type":"increase"}"#)  // 5: state
        var lastSeen = "3"
        var received: [String] = []
        for _ in 0..<5 where lastSeen != "5" {
            let resumed = try fixture.subscribe(session, headers: ["Last-Event-ID": lastSeen])
            XCTAssertEqual(resumed.status, 200)
            let ids = resumed.drain().compactMap(\.id)
            XCTAssertFalse(ids.isEmpty, "a resume from \(lastSeen) got nothing")
            received += ids
            lastSeen = ids.last ?? lastSeen
        }
        XCTAssertEqual(received, ["4", "5"])
    }

    /// An `event: end` that is a stream's first event carries `retry:` as any first event does.
    func testAnEndThatIsAResumesFirstEventCarriesRetry() throws {
        let fixture = try ServerFixture()
        defer { fixture.stop() }
        let session = try fixture.createSession()
        let upToDate = try fixture.subscribe(session, headers: ["Last-Event-ID": "0"])
        XCTAssertEqual(upToDate.drain().count, 0)
        XCTAssertEqual(try fixture.client.request("DELETE", "/sessions/\(session)").status, 204)
        let end = try XCTUnwrap(upToDate.next())
        XCTAssertEqual(end.event, "end")
        XCTAssertEqual(end.retry, 3000)
    }

    /// A Last-Event-ID is digits (openapi.yaml's EventID): anything else starts the stream afresh,
    /// with the current state, as an id this server never issued does.
    func testALastEventIDThatIsNotDigitsStartsAfresh() throws {
        let fixture = try ServerFixture()
        defer { fixture.stop() }
        let session = try fixture.createSession()
        for _ in 0..<3 { try fixture.send(session, #"{"type":"increase"}"#) }
        for id in ["+1", "-0", "1e0", " 1 x"] {
            let events = try fixture.subscribe(session, headers: ["Last-Event-ID": id]).drain()
            XCTAssertEqual(events.map(\.id), ["3"], "Last-Event-ID \(id)")
        }
        XCTAssertEqual(try fixture.subscribe(session, headers: ["Last-Event-ID": "01"]).drain().map(\.id), ["2", "3"])
    }

    func testResumeBeyondHistoryStartsWithCurrentState() throws {
        let fixture = try ServerFixture { $0.historyLength = 4 }
        defer { fixture.stop() }
        let session = try fixture.createSession()
        for _ in 0..<10 { try fixture.send(session, #"{"type":"increase"}"#) }
        let resumed = try fixture.subscribe(session, headers: ["Last-Event-ID": "2"])
        let events = resumed.drain()
        XCTAssertEqual(events.count, 1)
        XCTAssertEqual(events.first?.event, "state")
        XCTAssertEqual(events.first?.id, "10")
        XCTAssertEqual(events.first?.state["count"] as? Int, 10)
        // Pulses are not replayed on a new connection.
        try fixture.send(session, #"{"type":"alert","message":"x"}"#)
        let fresh = try fixture.subscribe(session)
        XCTAssertEqual(fresh.drain().map(\.event), ["state"])
    }

    func testFieldsFilterSendsOnlyThoseFieldsWhenTheyChange() throws {
        let fixture = try ServerFixture()
        defer { fixture.stop() }
        let session = try fixture.createSession()
        let filtered = try fixture.subscribe(session, query: "?fields=count")
        let first = try XCTUnwrap(filtered.next())
        XCTAssertEqual(Set(first.state.keys), ["count"])
        try fixture.send(session, #"{"type":"alert","message":"m"}"#)  // state changes, count does not
        try fixture.send(session, #"{"type":"increase"}"#)
        let events = filtered.drain()
        XCTAssertEqual(events.filter { $0.event == "state" }.map { $0.state as NSDictionary }, [["count": 1]])
        XCTAssertEqual(events.filter { $0.event == "pulse" }.count, 1, "pulses still arrive")
    }

    /// A filtered stream that resumes compares with the state the client had at its last id,
    /// also before the first event (version 0) and past what history still holds: a change of
    /// other fields sends nothing.
    func testAFilteredResumeSendsOnlyChangesOfItsFields() throws {
        let fixture = try ServerFixture { $0.historyLength = 2 }
        defer { fixture.stop() }
        let session = try fixture.createSession()
        let fromStart = try fixture.subscribe(session, query: "?fields=alertMessage", headers: ["Last-Event-ID": "0"])
        for _ in 1...3 { try fixture.send(session, #"{"type":"increase"}"#) }  // events 1-3; history holds 2 and 3
        let fromOne = try fixture.subscribe(session, query: "?fields=alertMessage", headers: ["Last-Event-ID": "1"])
        try fixture.send(session, #"{"type":"alert","message":"m"}"#)  // 4: state, 5: pulse
        for stream in [fromStart, fromOne] {
            let events = stream.drain()
            XCTAssertEqual(events.map { $0.id }, ["4", "5"], "\(events.map { ($0.id, $0.event) })")
            XCTAssertEqual(events.first?.state as NSDictionary?, ["alertMessage": "m"])
        }
    }

    func testConcurrentActionsOnOneSessionAreSerialised() throws {
        let fixture = try ServerFixture { $0.threads = 2 }
        defer { fixture.stop() }
        let session = try fixture.createSession()
        let clients = 4
        let perClient = 250
        DispatchQueue.concurrentPerform(iterations: clients) { _ in
            let client = HTTPClient(port: fixture.port)
            for _ in 0..<perClient {
                let body = #"{"session":"\#(session)","action":{"type":"increase"}}"#
                XCTAssertEqual(try? client.request("POST", "/action", body: body).status, 200)
            }
        }
        let state = try fixture.client.request("GET", "/sessions/\(session)")
        XCTAssertEqual((state.object["state"] as? [String: Any])?["count"] as? Int, clients * perClient)
        XCTAssertEqual(state.object["version"] as? Int, clients * perClient)
    }
}

/// `streamMaxAge`: the server ends a stream without `event: end`; the client resumes.
final class StreamMaxAgeTests: XCTestCase {
    func testStreamClosesWithoutEndAndResumeReplaysWhatWasMissed() throws {
        let fixture = try ServerFixture { $0.streamMaxAge = .milliseconds(500) }
        defer { fixture.stop() }
        let session = try fixture.createSession()
        let first = try fixture.subscribe(session)
        XCTAssertEqual(first.next()?.id, "0")
        try fixture.send(session, #"{"type":"increase"}"#)
        XCTAssertEqual(first.next()?.id, "1")
        // Closed by age: the body ends, no `event: end` before it.
        XCTAssertNil(first.next(timeout: 3))
        XCTAssertTrue(first.ended, "the stream should have ended")
        // Sent while nobody listens; a pulse is only replayed on a resume.
        try fixture.send(session, #"{"type":"alert","message":"while away"}"#)
        let resumed = try fixture.subscribe(session, headers: ["Last-Event-ID": "1"])
        let events = resumed.take(2)
        XCTAssertEqual(events.map(\.event), ["state", "pulse"])
        XCTAssertEqual(events.map(\.id), ["2", "3"])
        XCTAssertEqual(events.last?.object["value"] as? String, "while away")
    }

    func testStreamsLiveOnWithoutMaxAge() throws {
        // A slow heartbeat: `next(timeout:)` times each read, and a keep-alive is a read.
        let fixture = try ServerFixture { $0.heartbeat = .seconds(10) }
        defer { fixture.stop() }
        let session = try fixture.createSession()
        let stream = try fixture.subscribe(session)
        XCTAssertEqual(stream.next()?.id, "0")
        XCTAssertNil(stream.next(timeout: 1.5))
        XCTAssertFalse(stream.ended)
    }
}
