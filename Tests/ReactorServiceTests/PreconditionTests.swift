import Foundation
import XCTest

@testable import ReactorService

/// Entity tags and preconditions on a session's version (RFC 9110 §13), over a real server.
final class PreconditionTests: XCTestCase {
    private var fixture: ServerFixture!

    override func setUpWithError() throws { fixture = try ServerFixture() }

    override func tearDown() {
        fixture.stop()
        fixture = nil
    }

    private func act(_ session: String, ifMatch: String?) throws -> TestResponse {
        try fixture.client.request(
            "POST", "/action", body: #"{"session":"\#(session)","action":{"type":"increase"}}"#,
            headers: ifMatch.map { ["If-Match": $0] } ?? [:])
    }

    func testAnEntityTagIsTheVersionInQuotes() {
        for version: UInt64 in [0, 7, 10, 99, 1_000_000, UInt64.max] {
            XCTAssertEqual(Preconditions.entityTag(version), "\"\(version)\"")
        }
    }

    func testEveryAnswerCarryingAStateHasItsVersionAsETag() throws {
        let created = try fixture.client.request("POST", "/sessions", body: #"{"reactor":"counter"}"#)
        XCTAssertEqual(created.header("ETag"), #""0""#)
        let session = try XCTUnwrap(created.object["session"] as? String)
        XCTAssertEqual(try act(session, ifMatch: nil).header("ETag"), #""1""#)
        XCTAssertEqual(try fixture.client.request("GET", "/sessions/\(session)").header("ETag"), #""1""#)
    }

    func testIfNoneMatchAnswers304WhileTheVersionIsTheSame() throws {
        let session = try fixture.createSession()
        XCTAssertEqual(try act(session, ifMatch: nil).status, 200)
        let current = try fixture.client.request("GET", "/sessions/\(session)")
        let unchanged = try fixture.client.request("GET", "/sessions/\(session)", headers: ["If-None-Match": #""1""#])
        XCTAssertEqual(unchanged.status, 304)
        XCTAssertEqual(unchanged.header("ETag"), #""1""#)
        XCTAssertEqual(unchanged.body, [])
        // RFC 9110 §8.6: a 304's Content-Length, if any, is the 200's.
        XCTAssertEqual(unchanged.header("Content-Length"), String(current.body.count))
        XCTAssertEqual(
            try fixture.client.request(
                "GET", "/sessions/\(session)",
                headers: ["If-None-Match": #"W/"1", "7""#]
            ).status, 304,
            "a list, and If-None-Match compares weakly")
        XCTAssertEqual(
            try fixture.client.request("GET", "/sessions/\(session)", headers: ["If-None-Match": "*"]).status, 304)
        let changed = try fixture.client.request("GET", "/sessions/\(session)", headers: ["If-None-Match": #""0""#])
        XCTAssertEqual(changed.status, 200)
        XCTAssertEqual(changed.object["version"] as? Int, 1)
        assertProblem(
            try fixture.client.request("GET", "/sessions/\(session)", headers: ["If-None-Match": "v1"]),
            400, mentions: ["If-None-Match"])
    }

    /// `GET /sessions/{id}?fields=`: the state reduced to those fields, under a tag of its own.
    func testAFieldsViewHasItsOwnEntityTag() throws {
        let session = try fixture.createSession()
        XCTAssertEqual(try act(session, ifMatch: nil).status, 200)
        let whole = try fixture.client.request("GET", "/sessions/\(session)")
        let view = try fixture.client.request("GET", "/sessions/\(session)?fields=count")
        XCTAssertEqual(view.status, 200, view.text)
        XCTAssertEqual(view.object["state"] as? [String: Int], ["count": 1])
        XCTAssertEqual(view.object["version"] as? Int, 1)
        let tag = try XCTUnwrap(view.header("ETag"))
        XCTAssertNotEqual(tag, whole.header("ETag"))
        XCTAssertTrue(tag.hasPrefix(#""1."#), tag)
        let same = try fixture.client.request("GET", "/sessions/\(session)?fields=%20count,count")
        XCTAssertEqual(same.header("ETag"), tag, "the same fields: the same view")
        let other = try fixture.client.request("GET", "/sessions/\(session)?fields=count,user")
        XCTAssertEqual(other.object["state"] as? NSDictionary, ["count": 1, "user": NSNull()])
        XCTAssertNotEqual(other.header("ETag"), tag)

        let unchanged = try fixture.client.request(
            "GET", "/sessions/\(session)?fields=count", headers: ["If-None-Match": tag])
        XCTAssertEqual(unchanged.status, 304)
        XCTAssertEqual(unchanged.header("ETag"), tag)
        XCTAssertEqual(unchanged.header("Content-Length"), String(view.body.count))
        XCTAssertEqual(
            try fixture.client.request(
                "GET", "/sessions/\(session)?fields=count", headers: ["If-None-Match": whole.header("ETag") ?? ""]
            ).status, 200, "the whole state's tag is not the view's")
        XCTAssertEqual(
            try fixture.client.request("GET", "/sessions/\(session)", headers: ["If-None-Match": tag]).status, 200,
            "nor the view's the whole state's")
        XCTAssertEqual(
            try fixture.client.request(
                "GET", "/sessions/\(session)?fields=count,user", headers: ["If-None-Match": tag]
            ).status, 200, "nor another view's")

        XCTAssertEqual(try act(session, ifMatch: tag).status, 200, "If-Match reads a view's tag as its version")
        XCTAssertEqual(try act(session, ifMatch: tag).status, 412)
        XCTAssertEqual(
            try fixture.client.request(
                "GET", "/sessions/\(session)?fields=count", headers: ["If-None-Match": tag]
            ).status, 200, "a new version")
        assertProblem(
            try fixture.client.request("GET", "/sessions/\(session)?fields=nothing"), 400,
            mentions: ["nothing", "count"])
        assertProblem(
            try fixture.client.request("GET", "/sessions/\(session)", headers: ["If-None-Match": #""1.abc""#]),
            400, mentions: ["If-None-Match"])
    }

    func testIfMatchAppliesAnActionOnlyOnTheVersionNamed() throws {
        let session = try fixture.createSession()
        XCTAssertEqual(try act(session, ifMatch: #""0""#).status, 200)
        let stale = try act(session, ifMatch: #""0""#)
        assertProblem(stale, 412, mentions: ["version 1"])
        XCTAssertEqual(stale.object["version"] as? Int, 1, "the problem says where the session stands")
        XCTAssertEqual((stale.object["state"] as? [String: Any])?["count"] as? Int, 1)
        XCTAssertEqual(stale.header("ETag"), #""1""#)
        // A weak tag never matches, and the 412 says so: sent again unchanged, it never would.
        assertProblem(try act(session, ifMatch: #"W/"1""#), 412, mentions: ["version 1", "weak", "without W/"])
        assertProblem(try act(session, ifMatch: #"W/"1", "0""#), 412, mentions: ["version 1", "try again"])
        XCTAssertEqual(try act(session, ifMatch: "*").status, 200, "* is: the session exists")
        XCTAssertEqual(try act(session, ifMatch: #""5", "2""#).status, 200)
        XCTAssertEqual(try act(session, ifMatch: "3").status, 200, "a bare version is read as its tag")
        for malformed in ["x3", #""+3""#, ",", #""""#, #"*, "3""#, #""123456789012345678901""#, #""04""#] {
            assertProblem(try act(session, ifMatch: malformed), 400, mentions: ["If-Match"])
        }
        XCTAssertEqual(try act(session, ifMatch: #", "9",,"4","#).status, 200, "empty list elements are ignored")
        let read = try fixture.client.request("GET", "/sessions/\(session)")
        XCTAssertEqual(read.object["version"] as? Int, 5, "neither a 412 nor a 400 applied anything")
        assertProblem(try act("AAAAAAAAAAAAAAAAAAAAAA", ifMatch: "*"), 404)
    }

    /// A field sent on two lines is one list (RFC 9110, 5.3): either line's version matches.
    func testConditionsSentOnTwoLinesAreOneList() throws {
        let session = try fixture.createSession()
        XCTAssertEqual(try act(session, ifMatch: nil).status, 200)
        func raw(_ head: String, body: String = "") throws -> ResponseParser? {
            let client = try TestClient(port: fixture.port)
            client.send(head + "Host: t\r\nContent-Length: \(body.utf8.count)\r\n\r\n" + body)
            return client.readResponse()
        }
        let action = #"{"type":"increase"}"#
        let applied = try raw(
            "POST /sessions/\(session)/actions HTTP/1.1\r\nIf-Match: \"0\"\r\nIf-Match: \"1\"\r\n", body: action)
        XCTAssertEqual(applied?.status, 200)
        let stale = try raw(
            "POST /sessions/\(session)/actions HTTP/1.1\r\nIf-Match: \"0\"\r\nIf-Match: \"1\"\r\n", body: action)
        XCTAssertEqual(stale?.status, 412, "neither line names version 2")
        let unchanged = try raw("GET /sessions/\(session) HTTP/1.1\r\nIf-None-Match: \"0\"\r\nIf-None-Match: \"2\"\r\n")
        XCTAssertEqual(unchanged?.status, 304)
        let malformed = try raw("GET /sessions/\(session) HTTP/1.1\r\nIf-None-Match: \"2\"\r\nIf-None-Match: x\r\n")
        XCTAssertEqual(malformed?.status, 400, "a bad tag on the second line is still read")
    }

    func testTwoClientsRacingWithIfMatchWinEachVersionOnce() throws {
        let session = try fixture.createSession()
        let wins = Locked<[Int]>([])
        let done = DispatchGroup()
        for _ in 0..<2 {
            done.enter()
            Thread.detachNewThread { [self] in
                defer { done.leave() }
                let client = HTTPClient(port: fixture.port)
                for _ in 0..<150 {  // bounded
                    guard let read = try? client.request("GET", "/sessions/\(session)"),
                        let version = read.object["version"] as? Int,
                        let answer = try? client.request(
                            "POST", "/action",
                            body: #"{"session":"\#(session)","action":{"type":"increase"}}"#,
                            headers: ["If-Match": "\"\(version)\""])
                    else { continue }
                    if answer.status == 200 {
                        XCTAssertEqual(answer.object["version"] as? Int, version + 1)
                        wins.update { $0.append(version) }
                    } else {
                        XCTAssertEqual(answer.status, 412, answer.text)
                    }
                }
            }
        }
        XCTAssertEqual(done.wait(timeout: .now() + 60), .success)
        let final = try XCTUnwrap(fixture.client.request("GET", "/sessions/\(session)").object["version"] as? Int)
        XCTAssertEqual(wins.value.sorted(), Array(0..<final), "each version won exactly once")
        XCTAssertGreaterThanOrEqual(final, 150)
    }

    func testIfMatchOnDeleteRefusesAStaleVersion() throws {
        let session = try fixture.createSession()
        XCTAssertEqual(try act(session, ifMatch: nil).status, 200)
        let stale = try fixture.client.request("DELETE", "/sessions/\(session)", headers: ["If-Match": #""0""#])
        assertProblem(stale, 412)
        XCTAssertEqual(try fixture.client.request("GET", "/sessions/\(session)").status, 200, "still there")
        XCTAssertEqual(
            try fixture.client.request("DELETE", "/sessions/\(session)", headers: ["If-Match": #""1""#]).status, 204)
        XCTAssertEqual(try fixture.client.request("GET", "/sessions/\(session)").status, 404)
    }

    /// RFC 9110 §13.1: a server that receives a precondition on the session evaluates it.
    /// `If-None-Match` on a DELETE: `*` never holds (the session exists), a tag not while the
    /// session is at its version; `If-Match` on a GET: 412 once the version moved on.
    func testIfNoneMatchOnDeleteAndIfMatchOnReadAreEvaluated() throws {
        let session = try fixture.createSession()
        XCTAssertEqual(try act(session, ifMatch: nil).status, 200)
        let any = try fixture.client.request("DELETE", "/sessions/\(session)", headers: ["If-None-Match": "*"])
        assertProblem(any, 412, mentions: ["If-None-Match"])
        XCTAssertEqual(any.object["version"] as? Int, 1)
        assertProblem(
            try fixture.client.request("DELETE", "/sessions/\(session)", headers: ["If-None-Match": #""0", "1""#]),
            412, mentions: ["version 1"])
        assertProblem(
            try fixture.client.request(
                "DELETE", "/sessions/\(session)", headers: ["If-Match": #""1""#, "If-None-Match": #""1""#]),
            412, mentions: ["If-None-Match"])

        let stale = try fixture.client.request("GET", "/sessions/\(session)", headers: ["If-Match": #""0""#])
        assertProblem(stale, 412, mentions: ["version 1"])
        XCTAssertEqual((stale.object["state"] as? [String: Any])?["count"] as? Int, 1)
        let read = try fixture.client.request("GET", "/sessions/\(session)", headers: ["If-Match": #""1""#])
        XCTAssertEqual(read.status, 200, read.text)
        XCTAssertEqual(
            try fixture.client.request("GET", "/sessions/\(session)", headers: ["If-Match": "x"]).status, 400)

        XCTAssertEqual(
            try fixture.client.request("DELETE", "/sessions/\(session)", headers: ["If-None-Match": #""0""#]).status,
            204)
        XCTAssertEqual(try fixture.client.request("GET", "/sessions/\(session)").status, 404)
    }
}
