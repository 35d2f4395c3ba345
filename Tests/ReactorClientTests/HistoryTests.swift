import Foundation
import ReactorClient
import ReactorService
import XCTest

/// A session's history through `ReactorClient`, against a real reactord server in this process:
/// the action log a page at a time, the state at a version, and forks.
final class HistoryTests: XCTestCase {
    private var fixture: ServerFixture!

    override func tearDown() {
        fixture?.stop()
    }

    private struct Increase: Decodable, Equatable { let type: String }

    func testTheActionLogPageByPage() async throws {
        fixture = try ServerFixture()
        let session = try await fixture.client.createSession(reactor: "counter", state: CounterState.self)
        let started = Date()
        try await session.send(CounterAction.increase, idempotencyKey: "history-key-1")
        try await session.send(CounterAction.increase)
        try await session.send(CounterAction.decrease)
        try await session.send(CounterAction.alert("Hello"))
        try await session.send(CounterAction.increase)

        // Paging with a limit of 2: 2, 2, then the last one (no `next`).
        var pages: [ActionLogPage] = [try await session.actions(limit: 2)]
        while let next = pages.last?.next, pages.count < 10 {
            pages.append(try await session.actions(after: next, limit: 2))
        }
        XCTAssertEqual(pages.map(\.entries.count), [2, 2, 1])
        XCTAssertNil(pages.last?.next)
        let entries = pages.flatMap(\.entries)
        XCTAssertEqual(entries.map(\.number), [1, 2, 3, 4, 5])
        // The alert makes two events (its state, then its pulse): versions 4 and 5.
        XCTAssertEqual(entries.map(\.version), [1, 2, 3, 5, 6])
        XCTAssertEqual(entries.map(\.from), [1, 2, 3, 4, 6])
        XCTAssertTrue(entries.allSatisfy { $0.cause == .action && $0.origin == nil && $0.subject == nil })
        XCTAssertEqual(entries.first?.idempotencyKey, "history-key-1")
        XCTAssertNotNil(entries.last?.idempotencyKey, "the client sends a key of its own")
        XCTAssertEqual(try entries[0].decodeAction(Increase.self), Increase(type: "increase"))
        let alert = try XCTUnwrap(
            try JSONSerialization.jsonObject(with: XCTUnwrap(entries[3].action)) as? [String: String])
        XCTAssertEqual(alert, ["type": "alert", "message": "Hello"])
        for entry in entries {
            XCTAssertEqual(entry.time.timeIntervalSince(started), 0, accuracy: 30, "\(entry.time)")
        }

        let all = try await session.allActions()
        XCTAssertEqual(all.map(\.number), entries.map(\.number))
        let tail = try await session.actions(after: 3)
        XCTAssertEqual(tail.entries.map(\.version), [5, 6])
        XCTAssertNil(tail.next)
    }

    func testTheStateAtAVersionAndAForkFromIt() async throws {
        fixture = try ServerFixture()
        let session = try await fixture.client.createSession(reactor: "counter", state: CounterState.self)
        for _ in 0..<3 { try await session.send(CounterAction.increase) }
        try await session.send(CounterAction.decrease)

        let atTwo = try await session.state(at: 2)
        XCTAssertEqual(atTwo.version, 2)
        XCTAssertEqual(atTwo.state.count, 2)
        XCTAssertFalse(atTwo.replayed)
        let atZero = try await session.state(at: 0)
        XCTAssertEqual(atZero.state.count, 0)

        let fork = try await session.fork(at: 3)
        XCTAssertNotEqual(fork.id, session.id)
        XCTAssertEqual(fork.reactor, "counter")
        XCTAssertEqual(fork.initial?.version, 0)
        XCTAssertEqual(fork.initial?.state.count, 3)
        // Under one key, a repeated fork is the first one (a retry after a lost answer makes no second).
        let keyed = try await session.fork(at: 2, idempotencyKey: "fork-\(session.id)")
        let repeated = try await session.fork(at: 2, idempotencyKey: "fork-\(session.id)")
        XCTAssertEqual(repeated.id, keyed.id)
        XCTAssertEqual(repeated.initial?.state.count, 2)
        let forkNow = try await fork.current()
        XCTAssertEqual(forkNow.version, 0)
        XCTAssertEqual(forkNow.state.count, 3)
        // The fork goes its own way, with a log of its own; the original is left as it was.
        let after = try await fork.send(CounterAction.increase)
        XCTAssertEqual(after.state.count, 4)
        XCTAssertEqual(after.version, 1)
        let forkLog = try await fork.allActions()
        XCTAssertEqual(forkLog.map(\.version), [1])
        let original = try await session.current()
        XCTAssertEqual(original.state.count, 2)

        let ofCurrent = try await session.fork()
        let ofCurrentNow = try await ofCurrent.current()
        XCTAssertEqual(ofCurrentNow.state.count, 2)
    }

    func testHistoryErrorsArriveAsProblems() async throws {
        fixture = try ServerFixture { $0.historyLength = 2 }
        let session = try await fixture.client.createSession(reactor: "counter", state: CounterState.self)
        for _ in 0..<5 { try await session.send(CounterAction.increase) }
        for version in [UInt64(0), 99] {
            do {
                _ = try await session.state(at: version)
                XCTFail("version \(version) should be refused")
            } catch let ReactorClientError.problem(problem) {
                XCTAssertEqual(problem.status, 404, problem.description)
            }
        }
        do {
            _ = try await session.fork(at: 99)
            XCTFail("a fork from a version not reached should be refused")
        } catch let ReactorClientError.problem(problem) {
            XCTAssertEqual(
                problem.status, 422,
                "the session is there; the body names a version it does not have: \(problem.description)")
        }
        do {
            _ = try await session.actions(limit: 0)
            XCTFail("limit 0 should be refused")
        } catch let ReactorClientError.problem(problem) {
            XCTAssertEqual(problem.status, 400, problem.description)
        }
        let unknown = fixture.client.session(id: "AAAAAAAAAAAAAAAAAAAAAA", state: CounterState.self)
        do {
            _ = try await unknown.actions()
            XCTFail("an unknown session has no log")
        } catch let ReactorClientError.problem(problem) {
            XCTAssertEqual(problem.status, 404, problem.description)
        }

        fixture.stop()
        fixture = try ServerFixture { $0.actionLogLength = 0 }
        let unlogged = try await fixture.client.createSession(reactor: "counter", state: CounterState.self)
        do {
            _ = try await unlogged.allActions()
            XCTFail("no log with --action-log 0")
        } catch let ReactorClientError.problem(problem) {
            XCTAssertEqual(problem.status, 404)
            XCTAssertTrue(problem.detail?.contains("--action-log 0") ?? false, problem.description)
        }
    }
}
