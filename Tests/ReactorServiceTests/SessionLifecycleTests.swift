import ReactorCore
import ReactorService
import TestSupport
import XCTest

final class SessionLifecycleTests: XCTestCase {
    func testCreateWithoutBodyUsesDefaultReactorAtVersionZero() throws {
        let fixture = try ServerFixture()
        defer { fixture.stop() }
        let response = try fixture.client.request("POST", "/sessions")
        XCTAssertEqual(response.status, 201)
        XCTAssertEqual(response.object["reactor"] as? String, "counter")
        XCTAssertEqual(response.object["version"] as? Int, 0)
        let id = try XCTUnwrap(response.object["session"] as? String)
        XCTAssertEqual(response.header("Location"), "/sessions/\(id)")
        XCTAssertEqual(id.count, 22)
        XCTAssertTrue(id.allSatisfy { $0.isLetter || $0.isNumber || $0 == "-" || $0 == "_" })
        let state = try XCTUnwrap(response.object["state"] as? [String: Any])
        XCTAssertEqual(state["count"] as? Int, 0)
        XCTAssertTrue(state.keys.contains("alertMessage") && state.keys.contains("user"))
        let fetched = try fixture.client.request("GET", "/sessions/\(id)")
        XCTAssertEqual(fetched.status, 200)
        XCTAssertEqual(fetched.object["session"] as? String, id)
    }

    func testIdsAreDistinct() throws {
        let fixture = try ServerFixture()
        defer { fixture.stop() }
        let ids = try (0..<200).map { _ in try fixture.createSession() }
        XCTAssertEqual(Set(ids).count, ids.count)
    }

    func testDeleteEndsStreamsAndForgetsTheSession() throws {
        let fixture = try ServerFixture()
        defer { fixture.stop() }
        let session = try fixture.createSession()
        let events = try fixture.subscribe(session)
        XCTAssertEqual(events.next()?.event, "state")
        XCTAssertEqual(try fixture.client.request("DELETE", "/sessions/\(session)").status, 204)
        let end = try XCTUnwrap(events.next())
        XCTAssertEqual(end.event, "end")
        XCTAssertEqual(end.object["reason"] as? String, "deleted")
        XCTAssertNil(events.next(timeout: 2), "the stream closes after event: end")
        XCTAssertTrue(events.ended)
        XCTAssertEqual(try fixture.client.request("GET", "/sessions/\(session)").status, 404)
        XCTAssertEqual(try fixture.send(session, #"{"type":"increase"}"#).status, 404)
        XCTAssertEqual(try fixture.client.request("DELETE", "/sessions/\(session)").status, 404)
    }

    /// A DELETE cancels the session's effects, also one that holds its reactor: no release of
    /// the reactor would end that one.
    func testDeleteCancelsAnEffectThatHoldsItsReactor() throws {
        let ticks = Locked(0)
        let fixture = try ServerFixture()
        defer { fixture.stop() }
        fixture.server.register("ticker") { _ in TickingReactor(ticks: ticks) }
        let created = try fixture.client.request("POST", "/sessions", body: #"{"reactor":"ticker"}"#)
        let session = try XCTUnwrap(created.object["session"] as? String, created.text)
        XCTAssertEqual(try fixture.send(session, #""tick""#).status, 200)
        let deadline = Date().addingTimeInterval(5)
        while ticks.value < 3, Date() < deadline { Thread.sleep(forTimeInterval: 0.01) }
        XCTAssertGreaterThanOrEqual(ticks.value, 3, "the effect runs")
        XCTAssertEqual(try fixture.client.request("DELETE", "/sessions/\(session)").status, 204)
        Thread.sleep(forTimeInterval: 0.1)
        let afterDelete = ticks.value
        Thread.sleep(forTimeInterval: 0.3)
        XCTAssertEqual(ticks.value, afterDelete, "the effect still ran after the DELETE")
    }

    func testIdleSessionExpiresAfterTTLButNotWhileSubscribed() throws {
        let fixture = try ServerFixture { $0.sessionTTL = .milliseconds(500) }
        defer { fixture.stop() }
        let idle = try fixture.createSession()
        let watched = try fixture.createSession()
        let events = try fixture.subscribe(watched)
        XCTAssertEqual(events.next()?.event, "state")
        Thread.sleep(forTimeInterval: 1.5)
        XCTAssertEqual(try fixture.client.request("GET", "/sessions/\(idle)").status, 404)
        XCTAssertEqual(try fixture.client.request("GET", "/sessions/\(watched)").status, 200)
        XCTAssertEqual(fixture.server.sessionCount, 1)
        events.reset()
        let deadline = Date().addingTimeInterval(5)
        while fixture.server.sessionCount > 0, Date() < deadline { Thread.sleep(forTimeInterval: 0.1) }
        XCTAssertEqual(fixture.server.sessionCount, 0, "expires once its subscriber is gone and the TTL passes")
    }

    func testExpiredSessionCannotBeFollowed() throws {
        // A subscriber keeps a session alive, so only a session nobody follows expires.
        let fixture = try ServerFixture { $0.sessionTTL = .milliseconds(300) }
        defer { fixture.stop() }
        let session = try fixture.createSession()
        Thread.sleep(forTimeInterval: 1)
        XCTAssertEqual(try fixture.subscribe(session).status, 404)
    }

    func testFullSessionTableAnswers503WithRetryAfter() throws {
        let fixture = try ServerFixture { $0.maxSessions = 3 }
        defer { fixture.stop() }
        let ids = try (0..<3).map { _ in try fixture.createSession() }
        let refused = try fixture.client.request("POST", "/sessions")
        XCTAssertEqual(refused.status, 503)
        XCTAssertEqual(refused.header("Content-Type"), "application/problem+json")
        XCTAssertNotNil(refused.header("Retry-After").flatMap(Int.init))
        XCTAssertTrue((refused.object["detail"] as? String ?? "").contains("full"))
        XCTAssertEqual(try fixture.client.request("DELETE", "/sessions/\(ids[0])").status, 204)
        XCTAssertEqual(try fixture.client.request("POST", "/sessions").status, 201)
    }

    /// A session refused for a full table costs its client no creation token: once the table has
    /// room, the client may create as its rate allows.
    func testAFullTableTakesNoCreationToken() throws {
        let fixture = try ServerFixture {
            $0.maxSessions = 2
            $0.sessionCreateRate = 0.001  // no token comes back during the test
            $0.sessionCreateBurst = 3
        }
        defer { fixture.stop() }
        let ids = try (0..<2).map { _ in try fixture.createSession() }
        for _ in 0..<3 { XCTAssertEqual(try fixture.client.request("POST", "/sessions").status, 503) }
        XCTAssertEqual(try fixture.client.request("DELETE", "/sessions/\(ids[0])").status, 204)
        XCTAssertEqual(
            try fixture.client.request("POST", "/sessions").status, 201, "the third token was spent on a 503")
        XCTAssertEqual(try fixture.client.request("DELETE", "/sessions/\(ids[1])").status, 204)
        XCTAssertEqual(try fixture.client.request("POST", "/sessions").status, 429)
    }

    /// A rate so small its wait is past any integer (it trapped, at the first refusal) waits 1e9 s.
    func testATinyCreationRateRefusesWithABoundedWait() throws {
        let fixture = try ServerFixture {
            $0.sessionCreateRate = 1e-20
            $0.sessionCreateBurst = 1
        }
        defer { fixture.stop() }
        _ = try fixture.createSession()
        let refused = try fixture.client.request("POST", "/sessions")
        XCTAssertEqual(refused.status, 429, refused.text)
        XCTAssertEqual(refused.header("Retry-After"), "1000000000")
        XCTAssertEqual(try fixture.client.request("GET", "/healthz").status, 200)
    }
}

/// A reactor whose effect holds the reactor itself (as a `.run` that captured `self` does) and
/// counts its ticks until cancelled.
private final class TickingReactor: Reactor {
    typealias Action = String
    typealias Mutation = Int
    typealias State = Int

    let initialState = 0
    private let ticks: Locked<Int>

    init(ticks: Locked<Int>) { self.ticks = ticks }

    func mutate(action: String) -> AnyPublisher<Int, Never> {
        nonisolated(unsafe) let reactor = self
        let ticks = self.ticks
        return .run { send in
            while !Task.isCancelled {
                withExtendedLifetime(reactor) { ticks.update { $0 += 1 } }
                await send(1)
                try? await Task.sleep(nanoseconds: 10_000_000)
            }
        }
    }

    func reduce(state: Int, mutation: Int) -> Int { state + mutation }
}
