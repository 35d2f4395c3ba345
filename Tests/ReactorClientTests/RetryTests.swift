import Foundation
import XCTest

@testable import ReactorClient

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// `ReactorClient`'s retries, against a scripted server on a real loopback socket that loses
/// answers, answers 503/504/409, or stays silent, and shows what each attempt carried.
final class RetryTests: XCTestCase {
    private var servers: [ScriptedServer] = []

    override func tearDown() {
        for server in servers { server.stop() }
        servers = []
    }

    private static let session = "AAAAAAAAAAAAAAAAAAAAAA"
    private static func reply(count: Int, version: UInt64) -> String {
        #"{"reactor":"counter","session":"\#(session)","state":{"alertMessage":null,"count":\#(count),"user":null},"version":\#(version)}"#
    }

    /// Short waits, so that a test of four retries takes a fraction of a second.
    private static let quick = RetryPolicy(maxRetries: 4, initialDelay: .milliseconds(20), maxDelay: .seconds(3))

    private func serve(_ script: [ScriptedServer.Step], port: UInt16 = 0) throws -> ScriptedServer {
        let server = try ScriptedServer(script, port: port)
        servers.append(server)
        return server
    }

    private func client(
        _ server: ScriptedServer, retry: RetryPolicy = quick,
        configure: (URLSessionConfiguration) -> Void = { _ in }
    ) -> ReactorClient {
        let configuration = URLSessionConfiguration.ephemeral
        configure(configuration)
        return ReactorClient(baseURL: server.url, configuration: configuration, retry: retry)
    }

    private func keys(_ server: ScriptedServer) -> [String?] { server.requests.map { $0.headers["idempotency-key"] } }

    func testAnActionWhoseAnswerWasLostIsSentAgainWithTheSameKey() async throws {
        let server = try serve([.drop, .answer(200, [:], Self.reply(count: 1, version: 1))])
        let session = client(server).session(id: Self.session, state: CounterState.self)
        let after = try await session.send(CounterAction.alert("Hi"))
        XCTAssertEqual(after.state.count, 1)
        XCTAssertFalse(after.replayed)
        let requests = server.requests
        XCTAssertEqual(requests.count, 2, "one drop, one retry")
        guard requests.count == 2, let key = requests[0].headers["idempotency-key"] else {
            return XCTFail("the action carried no Idempotency-Key: \(requests.map(\.headers))")
        }
        // The time as 12 hexadecimal digits, then 96 random bits as base64url: 28 characters.
        XCTAssertEqual(key.count, 28, key)
        XCTAssertTrue(key.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "-" || $0 == "_") }, key)
        XCTAssertEqual(requests[1].headers["idempotency-key"], key, "the retry must carry the same key")
        XCTAssertEqual(requests[1].body, requests[0].body, "the retry must be the same request")
        XCTAssertEqual(requests.map(\.path), Array(repeating: "/sessions/\(Self.session)/actions", count: 2))

        // The next action is another action: another key.
        try await session.send(CounterAction.increase)
        let next = server.requests.last?.headers["idempotency-key"]
        XCTAssertNotNil(next)
        XCTAssertNotEqual(next, key, "each action needs a fresh key")
    }

    func testResetAndCutAnswersAreRetriedWithTheSameKey() async throws {
        let server = try serve([
            .reset, .cut(Self.reply(count: 1, version: 1)), .drop,
            .answer(200, [:], Self.reply(count: 1, version: 1)),
        ])
        let after = try await client(server).session(id: Self.session, state: CounterState.self).send(
            CounterAction.increase)
        XCTAssertEqual(after.state.count, 1)
        XCTAssertEqual(server.requests.count, 4, "reset, cut, drop, then the answer")
        XCTAssertEqual(Set(keys(server)).count, 1, "\(keys(server))")
        XCTAssertNotNil(keys(server).first ?? nil)
    }

    func testAKeyOfTheCallersOwnIsSentAsItIs() async throws {
        let server = try serve([.drop, .answer(200, [:], Self.reply(count: 1, version: 1))])
        let session = client(server).session(id: Self.session, state: CounterState.self)
        try await session.send(CounterAction.increase, idempotencyKey: "order-42")
        XCTAssertEqual(keys(server), ["order-42", "order-42"])
    }

    /// An action's members in an order of their own, nested.
    private struct WideAction: Encodable {
        struct Inner: Encodable { let yankee = 1, bravo = 2, xray = 3, charlie = 4 }
        let type = "wide"
        let zulu = 1, alpha = 2, mike = 3, echo = 4, golf = 5, kilo = 6, delta = 7
        let inner = Inner()
    }

    func testAnActionIsTheSameBytesInEveryProcessSoAKeptKeyIsReplayed() async throws {
        // JSONEncoder's member order changes from one process to the next; a key kept and sent
        // again by a later run of the app must carry the same body, or the server refuses it (422).
        let server = try serve([.answer(200, [:], Self.reply(count: 1, version: 1))])
        try await client(server).session(id: Self.session, state: CounterState.self).send(
            WideAction(), idempotencyKey: "kept")
        let body = server.requests.first.map { String(decoding: $0.body, as: UTF8.self) }
        XCTAssertEqual(
            body,
            #"{"alpha":2,"delta":7,"echo":4,"golf":5,"inner":{"bravo":2,"charlie":4,"xray":3,"yankee":1},"#
                + #""kilo":6,"mike":3,"type":"wide","zulu":1}"#)
    }

    func test502To504AreRetriedAndRetryAfterIsWaitedFor() async throws {
        let server = try serve([
            .answer(503, ["Retry-After": "1"]), .answer(504), .answer(502),
            .answer(200, [:], Self.reply(count: 1, version: 1)),
        ])
        let session = client(server).session(id: Self.session, state: CounterState.self)
        let start = ContinuousClock.now
        let after = try await session.send(CounterAction.increase)
        let elapsed = ContinuousClock.now - start
        XCTAssertEqual(after.state.count, 1)
        XCTAssertEqual(server.requests.count, 4)
        XCTAssertEqual(Set(keys(server)).count, 1, "one key across the retries: \(keys(server))")
        XCTAssertNotNil(keys(server).first ?? nil)
        XCTAssertGreaterThanOrEqual(elapsed, .milliseconds(1000), "Retry-After: 1 was not waited for")
        XCTAssertLessThan(elapsed, .seconds(5))
    }

    func testALongRetryAfterIsCapped() async throws {
        let server = try serve([
            .answer(503, ["Retry-After": "30"]), .answer(200, [:], Self.reply(count: 1, version: 1)),
        ])
        let retry = RetryPolicy(maxRetries: 1, initialDelay: .milliseconds(20), maxDelay: .milliseconds(300))
        let session = client(server, retry: retry).session(id: Self.session, state: CounterState.self)
        let start = ContinuousClock.now
        try await session.send(CounterAction.increase)
        let elapsed = ContinuousClock.now - start
        XCTAssertEqual(server.requests.count, 2)
        XCTAssertGreaterThanOrEqual(elapsed, .milliseconds(300))
        XCTAssertLessThan(elapsed, .seconds(5), "maxDelay should cap Retry-After: 30")
    }

    func testRetriesStopAtTheLimitWithTheLastAnswer() async throws {
        let server = try serve([.answer(503, [:], #"{"status":503,"title":"Service Unavailable","detail":"stopping"}"#)]
        )
        let retry = RetryPolicy(maxRetries: 2, initialDelay: .milliseconds(10))
        let session = client(server, retry: retry).session(id: Self.session, state: CounterState.self)
        do {
            try await session.send(CounterAction.increase)
            XCTFail("an answer that stays 503 should be thrown")
        } catch let ReactorClientError.problem(problem) {
            XCTAssertEqual(problem.status, 503)
            XCTAssertEqual(problem.detail, "stopping")
        }
        XCTAssertEqual(server.requests.count, 3, "the first attempt and 2 retries")
        XCTAssertEqual(Set(keys(server)).count, 1)

        let never = try serve([.answer(503)])
        do {
            try await client(never, retry: .never).session(id: Self.session, state: CounterState.self)
                .send(CounterAction.increase)
            XCTFail("503 should be thrown")
        } catch ReactorClientError.problem {}
        XCTAssertEqual(never.requests.count, 1, "RetryPolicy.never retries nothing")
    }

    func testClientErrorsAndOtherStatusesAreNotRetried() async throws {
        // 409 without Retry-After is a damaged session's, not a key in flight: it will not change.
        for status in [400, 404, 409, 412, 422, 500] {
            let server = try serve([
                .answer(status, [:], #"{"status":\#(status),"detail":"no"}"#),
                .answer(200, [:], Self.reply(count: 1, version: 1)),
            ])
            do {
                try await client(server).session(id: Self.session, state: CounterState.self).send(
                    CounterAction.increase)
                XCTFail("\(status) should be thrown")
            } catch let ReactorClientError.problem(problem) {
                XCTAssertEqual(problem.status, status)
            }
            XCTAssertEqual(server.requests.count, 1, "\(status) must not be retried")
        }
    }

    func testAKeyStillInFlightIsAskedAgainAfterRetryAfterAndTheReplayIsReported() async throws {
        let conflict = #"{"status":409,"detail":"a request with this Idempotency-Key is still running"}"#
        let server = try serve([
            .answer(409, ["Retry-After": "1"], conflict),
            .answer(200, ["Idempotent-Replayed": "true"], Self.reply(count: 7, version: 7)),
        ])
        let session = client(server).session(id: Self.session, state: CounterState.self)
        let start = ContinuousClock.now
        let after = try await session.send(CounterAction.increase)
        XCTAssertGreaterThanOrEqual(ContinuousClock.now - start, .milliseconds(1000))
        XCTAssertTrue(after.replayed, "Idempotent-Replayed: true should show as replayed")
        XCTAssertEqual(after.state.count, 7)
        XCTAssertEqual(server.requests.count, 2)
        XCTAssertEqual(Set(keys(server)).count, 1)
    }

    func testASilentServerTimesOutAndTheRequestIsRetried() async throws {
        let server = try serve([.silent(3), .answer(200, [:], Self.reply(count: 1, version: 1))])
        // Whole seconds: FoundationNetworking on Linux treats 0.5 as no time at all.
        let client = client(server) { $0.timeoutIntervalForRequest = 1 }
        let start = ContinuousClock.now
        let after = try await client.session(id: Self.session, state: CounterState.self).send(CounterAction.increase)
        XCTAssertEqual(after.state.count, 1)
        let elapsed = ContinuousClock.now - start
        XCTAssertGreaterThanOrEqual(elapsed, .milliseconds(900), "the first attempt should have waited for its timeout")
        XCTAssertLessThan(elapsed, .seconds(3), "the retry should not wait for the silent one")
        XCTAssertEqual(server.requests.count, 2)
        XCTAssertEqual(Set(keys(server)).count, 1)
    }

    func testARefusedConnectionIsRetriedUntilTheServerListens() async throws {
        // A port that was just free: nothing listens there until the server below starts.
        let probe = try ScriptedServer([.drop])
        let port = probe.port
        probe.stop()
        let retry = RetryPolicy(maxRetries: 6, initialDelay: .milliseconds(100), maxDelay: .seconds(1))
        let client = ReactorClient(
            baseURL: URL(string: "http://127.0.0.1:\(port)")!,
            configuration: .ephemeral, retry: retry)
        let sending = Task {
            try await client.session(id: Self.session, state: CounterState.self).send(CounterAction.increase)
        }
        try await Task.sleep(for: .milliseconds(300))
        let server = try serve([.answer(200, [:], Self.reply(count: 1, version: 1))], port: port)
        let after = try await sending.value
        XCTAssertEqual(after.state.count, 1)
        XCTAssertEqual(server.requests.count, 1)
        XCTAssertEqual(keys(server).first??.count, 28)
    }

    func testCreatingAndDeletingASessionAreRetriedWithOneKeyEach() async throws {
        let server = try serve([
            .drop, .answer(201, [:], Self.reply(count: 0, version: 0)),
            .answer(504), .answer(204),
        ])
        let client = client(server)
        let session = try await client.createSession(reactor: "counter", state: CounterState.self)
        XCTAssertEqual(session.id, Self.session)
        try await session.delete()
        let requests = server.requests
        XCTAssertEqual(requests.map(\.method), ["POST", "POST", "DELETE", "DELETE"])
        guard requests.count == 4 else { return }
        XCTAssertNotNil(requests[0].headers["idempotency-key"])
        XCTAssertEqual(requests[0].headers["idempotency-key"], requests[1].headers["idempotency-key"])
        XCTAssertNotNil(requests[2].headers["idempotency-key"])
        XCTAssertEqual(requests[2].headers["idempotency-key"], requests[3].headers["idempotency-key"])
        XCTAssertNotEqual(requests[0].headers["idempotency-key"], requests[2].headers["idempotency-key"])
    }

    func testReadingIsRetriedWithoutAKey() async throws {
        let server = try serve([.answer(503), .answer(200, [:], Self.reply(count: 3, version: 3))])
        let current = try await client(server).session(id: Self.session, state: CounterState.self).current()
        XCTAssertEqual(current.state.count, 3)
        XCTAssertFalse(current.replayed)
        XCTAssertEqual(server.requests.map(\.method), ["GET", "GET"])
        XCTAssertEqual(keys(server), [nil, nil], "a GET changes nothing: no key")
    }

    /// Keys are 28 visible ASCII characters, never repeated, and sort in the order they were
    /// made (a millisecond apart or more), so a server's index of them grows at its end.
    func testFreshKeysAreUniqueAndSortByTime() {
        let start: UInt64 = 1_790_000_000_000
        let keys = (0..<1000).map { IdempotencyKey.make(milliseconds: start + UInt64($0)) }
        XCTAssertEqual(Set(keys).count, keys.count)
        let sorted = keys.sorted { Array($0.utf8).lexicographicallyPrecedes(Array($1.utf8)) }
        XCTAssertTrue(keys == sorted, "keys out of time order: \(keys.prefix(3)) …")
        for key in keys {
            XCTAssertEqual(key.utf8.count, 28, key)
            XCTAssertTrue(key.utf8.allSatisfy { (0x21...0x7E).contains($0) }, key)
        }
        let sameTime = (0..<1000).map { _ in IdempotencyKey.make(milliseconds: start) }
        XCTAssertEqual(Set(sameTime).count, sameTime.count, "the random part tells keys of one millisecond apart")
    }

    func testTheBackoffDoublesWithJitterAndIsCapped() {
        let policy = RetryPolicy(maxRetries: 10, initialDelay: .milliseconds(100), maxDelay: .seconds(1))
        XCTAssertEqual(policy.delay(attempt: 0, retryAfter: nil, random: 0), .milliseconds(50))
        XCTAssertEqual(policy.delay(attempt: 0, retryAfter: nil, random: 1), .milliseconds(100))
        XCTAssertEqual(policy.delay(attempt: 2, retryAfter: nil, random: 1), .milliseconds(400))
        XCTAssertEqual(policy.delay(attempt: 9, retryAfter: nil, random: 1), .seconds(1))
        XCTAssertEqual(policy.delay(attempt: 9, retryAfter: nil, random: 0), .milliseconds(500))
        XCTAssertEqual(policy.delay(attempt: 0, retryAfter: 0.5, random: 0), .milliseconds(500))
        XCTAssertEqual(policy.delay(attempt: 0, retryAfter: 0.5, random: 1), .milliseconds(550))
        XCTAssertEqual(policy.delay(attempt: 0, retryAfter: 30, random: 0), .seconds(1))
        XCTAssertEqual(RetryPolicy.retryAfter(" 2 "), 2)
        XCTAssertNil(RetryPolicy.retryAfter("soon"))
        XCTAssertNil(RetryPolicy.retryAfter(nil))
        let date = RetryPolicy.retryAfter("Wed, 21 Oct 2015 07:28:00 GMT")
        XCTAssertNotNil(date)
        XCTAssertLessThan(date ?? 0, 0, "a date in the past is no wait")
        XCTAssertEqual(RetryPolicy(maxRetries: -1).maxRetries, 0)
    }
}
