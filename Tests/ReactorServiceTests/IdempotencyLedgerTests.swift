import MicroHTTP
import XCTest

@testable import ReactorService

/// The ledger's own rules, where a real server cannot hold a request open on demand: a key
/// runs once at a time (409), is given back when its ticket goes, and the action's JSON is
/// found in POST /action's envelope as it was sent.
final class IdempotencyLedgerTests: XCTestCase {
    private func request(_ key: String, body: String = "{}") -> IdempotentRequest {
        let headers = HTTPHeaders([("Idempotency-Key", key)])
        let request = Request(
            method: .POST, path: "/action", query: [:], headers: headers, body: Array(body.utf8),
            peer: nil, client: nil)
        guard
            case let .key(read) = IdempotentRequest.read(
                request, scope: "", kind: .action, session: "s",
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
    /// Members in the order of their names: a body built from a hash map names the same request
    /// whatever order it comes in. Keys kept before (24 h at most) hold the digest of the body
    /// as sent without its layout, which still names it.
    func testTheRequestDigestIsSHA256OfKindSessionAndBodyWithoutLayout() throws {
        let sent = request("k", body: "{ \"type\" : \"increase\",\n \"by\": [1, 2] }")
        XCTAssertEqual(sent.digest, "d8eb6432b24289dfec6afbbe2a95ad06")
        XCTAssertEqual(request("k", body: #"{"by":[1,2],"type":"increase"}"#).digest, sent.digest)
        XCTAssertEqual(sent.olderDigest, "289bbabf28a9449a37fd993ae33befa2")
        XCTAssertTrue(sent.isNamed(by: "289bbabf28a9449a37fd993ae33befa2"))
        XCTAssertFalse(sent.isNamed(by: request("k", body: #"{"by":[2,1],"type":"increase"}"#).digest))
        XCTAssertNil(request("k", body: #"{"by":[1,2]}"#).olderDigest, "in order: one digest")
    }

    func testCanonicalJSONPutsMembersInOrderAndKeepsEverythingElseAsSent() {
        func canonical(_ json: String) -> (String, Bool) {
            var out: [UInt8] = []
            let reordered = CanonicalJSON.append(Array(json.utf8)[...], to: &out)
            return (String(decoding: out, as: UTF8.self), reordered)
        }
        XCTAssertTrue(
            canonical(#" { "b" : 1 , "a" : { "d" : [ 3 , { "f" : null, "e" : "x y" } ], "c" : true } } "#) == (
                #"{"a":{"c":true,"d":[3,{"e":"x y","f":null}]},"b":1}"#, true
            ))
        XCTAssertTrue(canonical(#"{"a":"\u0062","b":[2,1],"c":{}}"#) == (#"{"a":"\u0062","b":[2,1],"c":{}}"#, false))
        XCTAssertTrue(canonical(#"{"ab":1,"a":2}"#) == (#"{"a":2,"ab":1}"#, true))
        XCTAssertTrue(canonical("-1.5e3") == ("-1.5e3", false))
        // Not one JSON value: without its layout, as before.
        for text in [#"{"b":1,"a":2"#, #"{"b":1} {"a":2}"#, #"{"b" 1}"#, "", #"["a",]"#] {
            XCTAssertTrue(canonical(text) == (text.filter { $0 != " " }, false), text)
        }
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
