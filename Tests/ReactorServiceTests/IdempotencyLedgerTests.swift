import MicroHTTP
import XCTest

@testable import ReactorService

/// The ledger's own rules, where a real server cannot hold a request open on demand: a key
/// runs once at a time (409), is given back when its ticket goes, and the action's JSON is
/// found in POST /action's envelope as it was sent.
final class IdempotencyLedgerTests: XCTestCase {
    private func request(_ key: String, body: String = "{}", scope: String = "") -> IdempotentRequest {
        let headers = HTTPHeaders([("Idempotency-Key", key)])
        let request = Request(
            method: .POST, path: "/action", query: [:], headers: headers, body: Array(body.utf8),
            peer: nil, client: nil)
        guard
            case let .key(read) = IdempotentRequest.read(
                request, scope: scope, kind: .action, session: "s",
                body: request.body[...])
        else {
            XCTFail("no key read")
            return IdempotentRequest.read(request, scope: "", kind: .action).key!
        }
        return read
    }

    private func ledger() -> IdempotencyLedger {
        IdempotencyLedger(
            ttl: 60, forwardTTL: 60, engine: nil, metrics: IdempotencyMetrics(registry: MetricsRegistry()))
    }

    /// The digest is stored with each answer: it must not change between versions (a repeat
    /// after an upgrade would be 422). SHA-256 of kind, session and the body without its layout,
    /// as 32 lowercase hexadecimal digits (Python's hashlib gives the same).
    func testTheRequestDigestIsSHA256OfKindSessionAndBodyWithoutLayout() throws {
        XCTAssertEqual(
            request("k", body: "{ \"type\" : \"increase\",\n \"by\": [1, 2] }").digest,
            "289bbabf28a9449a37fd993ae33befa2")
    }

    func testARepeatWhileTheFirstRunsIs409AndTheKeyIsGivenBackWithItsTicket() throws {
        let ledger = ledger()
        var ticket: IdempotencyLedger.Ticket?
        if case let .run(first) = ledger.admit(request("k")) { ticket = first }
        XCTAssertNotNil(ticket, "the first runs")
        guard case let .answer(busy) = ledger.admit(request("k")) else { return XCTFail("a repeat meanwhile runs") }
        XCTAssertEqual(busy.status, 409)
        XCTAssertEqual(busy.headers["Retry-After"], "1")
        guard case let .answer(other) = ledger.admit(request("k", body: #"{"x":1}"#)) else { return XCTFail() }
        XCTAssertEqual(other.status, 422, "another request under a running key")
        XCTAssertNil(ticket?.keep(Response(status: 503), session: nil), "a 503 is not kept")
        ticket = nil  // answered without a kept answer: the key is free again
        guard case .run = ledger.admit(request("k")) else { return XCTFail("runs again") }
    }

    func testTheMemoryStoreKeepsA2xxAnswerAndReplaysIt() throws {
        let ledger = ledger()
        var ticket: IdempotencyLedger.Ticket?
        if case let .run(first) = ledger.admit(request("k", body: #"{ "a" : [1, "b c"] }"#)) { ticket = first }
        XCTAssertNil(
            ticket?.keep(.json(Array(#"{"ok":true}"#.utf8), status: 201), session: "s"), "kept here, not written")
        guard case let .answer(busy) = ledger.admit(request("k", body: #"{"a":[1,"b c"]}"#)) else { return XCTFail() }
        XCTAssertEqual(busy.status, 409, "kept, but still running until its answer is given")
        ticket = nil
        guard case let .answer(replay) = ledger.admit(request("k", body: #"{"a":[1,"b c"]}"#)) else { return XCTFail() }
        XCTAssertEqual(replay.status, 201)
        XCTAssertEqual(replay.body, Array(#"{"ok":true}"#.utf8))
        XCTAssertEqual(replay.headers["Idempotent-Replayed"], "true")
        guard case let .answer(spaced) = ledger.admit(request("k", body: #"{"a":[1,"bc"]}"#)) else { return XCTFail() }
        XCTAssertEqual(spaced.status, 422, "spaces inside strings count")
    }

    /// Scopes are subjects, compared byte for byte: "café" precomposed and decomposed are equal
    /// Swift strings but two callers, each with a key of its own, running or kept.
    func testScopesAreComparedByteForByte() throws {
        let ledger = ledger()
        let (composed, decomposed) = ("caf\u{E9}", "cafe\u{301}")
        var ticket: IdempotencyLedger.Ticket?
        if case let .run(first) = ledger.admit(request("k", scope: composed)) { ticket = first }
        XCTAssertNotNil(ticket, "the first runs")
        guard case .run = ledger.admit(request("k", scope: decomposed)) else {
            return XCTFail("the other subject's key is not the one running")
        }
        _ = ticket?.keep(.json(Array(#"{"ok":true}"#.utf8), status: 201), session: "s")
        ticket = nil
        guard case .run = ledger.admit(request("k", scope: decomposed)) else {
            return XCTFail("the other subject's key is not the one kept")
        }
        guard case let .answer(replay) = ledger.admit(request("k", scope: composed)) else { return XCTFail() }
        XCTAssertEqual(replay.headers["Idempotent-Replayed"], "true", "its own subject's is kept")
    }

    func testTheActionMemberIsFoundAsSent() {
        func member(_ json: String) -> String? {
            JSONWhitespace.member("action", of: Array(json.utf8)).map { String(decoding: $0, as: UTF8.self) }
        }
        XCTAssertEqual(member(#"{"session":"s","action":{"type":"increase"}}"#), #"{"type":"increase"}"#)
        XCTAssertEqual(member(#" { "action" : [1, {"a":"}"}] , "session": "s" } "#), #"[1, {"a":"}"}]"#)
        XCTAssertEqual(member(#"{"session":"s\"action","action":"x\"y"}"#), #""x\"y""#)
        XCTAssertEqual(member(#"{"n":12,"action":true}"#), "true")
        XCTAssertNil(member(#"{"session":"s"}"#))
        XCTAssertNil(member(#"["action"]"#))
        XCTAssertNil(member(#"{"action":{"type":"#))
    }
}

extension IdempotentRequest.Reading {
    fileprivate var key: IdempotentRequest? {
        if case let .key(request) = self { return request }
        return nil
    }
}
