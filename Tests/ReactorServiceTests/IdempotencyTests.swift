import Foundation
import XCTest

/// `Idempotency-Key` over real servers: a repeat gets the first answer byte for byte and runs
/// nothing, across kill -9 on a real SQLite file; another request under the same key is 422; a
/// malformed key is 400; answers that changed nothing are not kept; keys expire.
final class IdempotencyTests: XCTestCase {
    private var folder: URL!
    private var database: String { folder.appendingPathComponent("reactord.sqlite").path }

    override func setUpWithError() throws {
        folder = FileManager.default.temporaryDirectory.appendingPathComponent("reactord-keys-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
    }

    override func tearDownWithError() throws {
        try? FileManager.default.removeItem(at: folder)
    }

    private func start(_ extra: [String] = [], store: String? = nil) throws -> ReactordProcess {
        try ReactordProcess(arguments: ["--store", store ?? "sqlite:\(database)", "--admin-token", "t"] + extra)
    }

    private func create(_ client: HTTPClient, key: String? = nil) throws -> TestResponse {
        try client.request(
            "POST", "/sessions", body: #"{"reactor":"counter"}"#, headers: key.map { ["Idempotency-Key": $0] } ?? [:])
    }

    private func act(
        _ client: HTTPClient, _ session: String, key: String?, _ action: String = #"{"type":"increase"}"#,
        headers: [String: String] = [:]
    ) throws -> TestResponse {
        var headers = headers
        if let key { headers["Idempotency-Key"] = key }
        return try client.request(
            "POST", "/action", body: #"{"session":"\#(session)","action":\#(action)}"#, headers: headers)
    }

    private func count(_ client: HTTPClient, _ session: String) throws -> Int? {
        (try client.request("GET", "/sessions/\(session)").object["state"] as? [String: Any])?["count"] as? Int
    }

    private func assertReplay(
        _ replay: TestResponse, of first: TestResponse, file: StaticString = #filePath, line: UInt = #line
    ) {
        XCTAssertEqual(replay.status, first.status, replay.text, file: file, line: line)
        XCTAssertEqual(replay.body, first.body, "the same bytes", file: file, line: line)
        XCTAssertEqual(replay.header("Idempotent-Replayed"), "true", file: file, line: line)
        XCTAssertNil(first.header("Idempotent-Replayed"), file: file, line: line)
        for name in ["Content-Type", "ETag", "Location"] {
            XCTAssertEqual(replay.header(name), first.header(name), name, file: file, line: line)
        }
    }

    func testARepeatGetsTheFirstAnswerAfterKillNineAndRunsNothing() throws {
        var server = try start()
        var client = HTTPClient(port: server.port)
        let created = try create(client, key: "create-1")
        XCTAssertEqual(created.status, 201, created.text)
        let session = try XCTUnwrap(created.object["session"] as? String)
        let first = try act(client, session, key: "increase-1")
        XCTAssertEqual(first.status, 200, first.text)
        assertReplay(try act(client, session, key: "increase-1"), of: first)

        kill(server.process.processIdentifier, SIGKILL)
        XCTAssertNotNil(server.waitForExit(timeout: 5))
        server = try start()
        client = HTTPClient(port: server.port)
        assertReplay(try act(client, session, key: "increase-1"), of: first)
        assertReplay(try create(client, key: "create-1"), of: created)
        // The other action route, the same action of the same session (laid out otherwise): the same request.
        assertReplay(
            try client.request(
                "POST", "/sessions/\(session)/actions", body: #"{ "type" : "increase" }"#,
                headers: ["Idempotency-Key": "increase-1"]), of: first)
        XCTAssertEqual(try count(client, session), 1, "applied once")
        XCTAssertEqual(try act(client, session, key: "increase-2").status, 200)
        XCTAssertEqual(try count(client, session), 2)
    }

    /// The gauge of kept keys is counted at the sweeper's first look after a start, not a minute
    /// later: a 0 there read as "no keys" after every restart.
    func testTheKeptKeysAreCountedSoonAfterARestart() throws {
        var server = try start(["--unload-after", "0.5"])
        var client = HTTPClient(port: server.port)
        let session = try XCTUnwrap(try create(client).object["session"] as? String)
        for index in 0..<3 { XCTAssertEqual(try act(client, session, key: "kept-\(index)").status, 200) }
        XCTAssertEqual(kill(server.process.processIdentifier, SIGTERM), 0)
        XCTAssertEqual(server.waitForExit(timeout: 10), 0)
        server = try start(["--unload-after", "0.5"])
        client = HTTPClient(port: server.port)
        let gauge = "reactord_idempotency_keys_stored 3"
        let deadline = Date().addingTimeInterval(3)  // the first trim came 5 s after a start
        var metrics = ""
        while Date() < deadline {
            metrics = try client.request("GET", "/metrics").text
            if metrics.contains(gauge) { break }
            Thread.sleep(forTimeInterval: 0.1)
        }
        XCTAssertTrue(metrics.contains(gauge), metrics)
    }

    func testTheSameKeyForAnotherRequestIs422AndRunsNothing() throws {
        let server = try start()
        let client = HTTPClient(port: server.port)
        let session = try XCTUnwrap(try create(client).object["session"] as? String)
        XCTAssertEqual(try act(client, session, key: "k").status, 200)
        for other in [
            try act(client, session, key: "k", #"{"type":"decrease"}"#),
            try client.request("DELETE", "/sessions/\(session)", headers: ["Idempotency-Key": "k"]),
            try create(client, key: "k"),
        ] {
            XCTAssertEqual(other.status, 422, other.text)
            XCTAssertTrue((other.object["detail"] as? String)?.contains("Idempotency-Key") == true, other.text)
        }
        XCTAssertEqual(try count(client, session), 1)
    }

    /// A body of whitespace alone is not the empty body (which opens the default kind): its
    /// repeat under the empty one's key is another request, not that answer replayed.
    func testWhitespaceAloneIsNotTheEmptyBody() throws {
        let server = try start()
        let client = HTTPClient(port: server.port)
        let created = try client.request("POST", "/sessions", headers: ["Idempotency-Key": "e"])
        XCTAssertEqual(created.status, 201, created.text)
        let blank = try client.request("POST", "/sessions", body: " \n", headers: ["Idempotency-Key": "e"])
        XCTAssertEqual(blank.status, 422, blank.text)
        XCTAssertNil(blank.header("Idempotent-Replayed"))
        assertReplay(try client.request("POST", "/sessions", headers: ["Idempotency-Key": "e"]), of: created)
    }

    func testAMalformedKeyIs400NamingTheHeader() throws {
        let server = try start()
        let client = HTTPClient(port: server.port)
        let session = try XCTUnwrap(try create(client).object["session"] as? String)
        // The detail names what is wrong: a length only where it is one (a byte outside ASCII is
        // read as U+FFFD, 3 bytes), else the first character that is not visible ASCII.
        for (key, problem) in [
            ("", "got 0 characters"), ("a b", "its character 2 is a space"),
            (String(repeating: "x", count: 256), "got 256 characters"),
            ("caf\u{e9}", "its character 4 is outside ASCII"),
            ("tab\there", "its character 4 is a control character (0x09)"),
        ] {
            let answer = try act(client, session, key: key)
            XCTAssertEqual(answer.status, 400, "key \(key.debugDescription): \(answer.text)")
            let detail = try XCTUnwrap(answer.object["detail"] as? String, answer.text)
            XCTAssertTrue(detail.contains("Idempotency-Key"), detail)
            XCTAssertTrue(detail.hasSuffix(problem), "key \(key.debugDescription): \(detail)")
        }
        XCTAssertEqual(try act(client, session, key: String(repeating: "x", count: 255)).status, 200, "255 is allowed")
        let raw = try TestClient(port: server.port)
        let body = #"{"session":"\#(session)","action":{"type":"increase"}}"#
        let twice = TestResponse(
            try XCTUnwrap(
                raw.request(
                    "POST", "/action", headers: ["Idempotency-Key: a", "Idempotency-Key: b"],
                    body: body)))
        XCTAssertEqual(twice.status, 400, twice.text)
        XCTAssertEqual(try count(client, session), 1, "nothing refused was applied")
        // Whitespace after a field's value is not part of it (RFC 9110, 5.5).
        let spaced = TestResponse(
            try XCTUnwrap(raw.request("POST", "/action", headers: ["Idempotency-Key: spaced \t "], body: body)))
        XCTAssertEqual(spaced.status, 200, spaced.text)
        let repeated = try act(client, session, key: "spaced")
        XCTAssertEqual(repeated.header("Idempotent-Replayed"), "true", repeated.text)
        XCTAssertEqual(try count(client, session), 2)
    }

    func testAnAnswerThatChangedNothingIsNotKept() throws {
        let server = try start()
        let client = HTTPClient(port: server.port)
        let session = try XCTUnwrap(try create(client).object["session"] as? String)
        let stale = try act(client, session, key: "retry-me", headers: ["If-Match": #""7""#])
        XCTAssertEqual(stale.status, 412, stale.text)
        let again = try act(client, session, key: "retry-me")
        XCTAssertEqual(again.status, 200, "a 412 was not kept: the repeat runs")
        XCTAssertNil(again.header("Idempotent-Replayed"))
        XCTAssertEqual(try count(client, session), 1)
    }

    func testDeleteAndTheUserAreReplayedToo() throws {
        let server = try start()
        let client = HTTPClient(port: server.port)
        let session = try XCTUnwrap(try create(client).object["session"] as? String)
        let deleted = try client.request("DELETE", "/sessions/\(session)", headers: ["Idempotency-Key": "d"])
        XCTAssertEqual(deleted.status, 204)
        let repeated = try client.request("DELETE", "/sessions/\(session)", headers: ["Idempotency-Key": "d"])
        XCTAssertEqual(repeated.status, 204, "the session is gone, the delete's answer is kept: \(repeated.text)")
        XCTAssertEqual(repeated.header("Idempotent-Replayed"), "true")
        XCTAssertEqual(try client.request("DELETE", "/sessions/\(session)").status, 404, "without the key: gone")

        let admin = ["Authorization": "Bearer t", "Idempotency-Key": "u"]
        let put = try client.request("PUT", "/user", body: #"{"id":"ada","name":"Ada"}"#, headers: admin)
        XCTAssertEqual(put.status, 200)
        XCTAssertEqual(
            try client.request("PUT", "/user", body: #"{"id":"bob","name":"Bob"}"#, headers: admin).status, 422)
        assertReplay(try client.request("PUT", "/user", body: #"{"id":"ada","name":"Ada"}"#, headers: admin), of: put)
    }

    /// A repeat of a delete while the first waits for its commit: the session has left memory,
    /// but the first may still succeed, so the repeat is told it runs (409), never 404.
    func testARepeatedDeleteWhileTheFirstCommitsIs409NotUnknown() throws {
        try XCTSkipUnless(FileManager.default.isExecutableFile(atPath: "/usr/bin/sqlite3"), "needs sqlite3")
        let server = try start()
        let client = HTTPClient(port: server.port)
        let session = try XCTUnwrap(try create(client).object["session"] as? String)
        let lock = try WriteLockHolder(database)
        let first = Locked<TestResponse?>(nil)
        let deleting = Thread {
            let answer = try? HTTPClient(port: server.port).request(
                "DELETE", "/sessions/\(session)", headers: ["Idempotency-Key": "d"])
            first.update { $0 = answer }
        }
        deleting.start()
        Thread.sleep(forTimeInterval: 0.3)  // the first is past its lookup, waiting for the lock
        let repeated = try HTTPClient(port: server.port).request(
            "DELETE", "/sessions/\(session)", headers: ["Idempotency-Key": "d"])
        // Any other request meanwhile: the delete may yet fail, so not 404 but "retry".
        let read = try HTTPClient(port: server.port).request("GET", "/sessions/\(session)")
        let other = try HTTPClient(port: server.port).request("DELETE", "/sessions/\(session)")
        try lock.release()
        XCTAssertEqual(repeated.status, 409, repeated.text)
        XCTAssertEqual(repeated.header("Retry-After"), "1")
        for answer in [read, other] {
            XCTAssertEqual(answer.status, 503, answer.text)
            XCTAssertEqual(answer.header("Retry-After"), "1")
        }
        let deadline = Date().addingTimeInterval(10)
        while first.value == nil, Date() < deadline { Thread.sleep(forTimeInterval: 0.01) }
        XCTAssertEqual(first.value?.status, 204)
        let after = try client.request("DELETE", "/sessions/\(session)", headers: ["Idempotency-Key": "d"])
        XCTAssertEqual(after.status, 204, after.text)
        XCTAssertEqual(after.header("Idempotent-Replayed"), "true")
        XCTAssertEqual(try client.request("GET", "/sessions/\(session)").status, 404)
    }

    /// A delete whose commit fails (the file's write lock held past the 5 s busy timeout) leaves
    /// the session, which the requests that came meanwhile were told to retry for.
    func testADeleteThatFailsToCommitLeavesTheSession() throws {
        try XCTSkipUnless(FileManager.default.isExecutableFile(atPath: "/usr/bin/sqlite3"), "needs sqlite3")
        let server = try start()
        let client = HTTPClient(port: server.port)
        let session = try XCTUnwrap(try create(client).object["session"] as? String)
        XCTAssertEqual(try act(client, session, key: nil).status, 200)
        let lock = try WriteLockHolder(database)
        // The 503 comes once SQLite's 5 s busy timeout has run out: more than the client's 5 s.
        let deleted = try HTTPClient(port: server.port, timeout: 20).request("DELETE", "/sessions/\(session)")
        try lock.release()
        XCTAssertEqual(deleted.status, 503, deleted.text)
        let state = try client.request("GET", "/sessions/\(session)")
        XCTAssertEqual(state.status, 200, state.text)
        XCTAssertEqual(try count(client, session), 1)
        XCTAssertEqual(try act(client, session, key: nil).status, 200)
    }

    /// Without authentication the callers share one space of keys and the admins have their own
    /// (PUT and DELETE /user), as with it: a key used on one side is free on the other.
    func testWithoutAuthenticationTheUserRoutesUseTheAdminsKeys() throws {
        for store in [nil, "memory"] {
            let server = try start(store: store)
            let client = HTTPClient(port: server.port)
            XCTAssertEqual(try create(client, key: "k").status, 201)
            let put = try client.request(
                "PUT", "/user", body: #"{"id":"a","name":"b"}"#,
                headers: ["Authorization": "Bearer t", "Idempotency-Key": "k"])
            XCTAssertEqual(put.status, 200, "\(store ?? "sqlite"): \(put.text)")
            let cleared = try client.request(
                "DELETE", "/user", headers: ["Authorization": "Bearer t", "Idempotency-Key": "d"])
            XCTAssertEqual(cleared.status, 204, cleared.text)
            let created = try create(client, key: "d")
            XCTAssertEqual(created.status, 201, "\(store ?? "sqlite"): \(created.text)")
            XCTAssertNil(created.header("Idempotent-Replayed"))
        }
    }

    /// The admins' keys are one space whether authentication is on or not: a PUT /user retried
    /// across a restart that turns it on is replayed, not applied again, and the callers' keys of
    /// before are not the admins'.
    func testTheAdminsKeysStayTheirsWhenAuthenticationIsTurnedOnOrOff() throws {
        let user = #"{"id":"a","name":"b"}"#
        let admin = ["Authorization": "Bearer t"]
        var server = try start()
        var client = HTTPClient(port: server.port)
        XCTAssertEqual(try create(client, key: "callers").status, 201)
        let put = try client.request(
            "PUT", "/user", body: user, headers: admin.merging(["Idempotency-Key": "p"]) { $1 })
        XCTAssertEqual(put.status, 200, put.text)
        for secret in [["--jwt-secret", "0123456789abcdef0123456789abcdef-secret"], []] {
            server.process.terminate()
            XCTAssertNotNil(server.waitForExit(timeout: 10))
            server = try start(secret)
            client = HTTPClient(port: server.port)
            assertReplay(
                try client.request("PUT", "/user", body: user, headers: admin.merging(["Idempotency-Key": "p"]) { $1 }),
                of: put)
        }
        server.process.terminate()
        XCTAssertNotNil(server.waitForExit(timeout: 10))
        server = try start(["--jwt-secret", "0123456789abcdef0123456789abcdef-secret"])
        client = HTTPClient(port: server.port)
        let cleared = try client.request(
            "DELETE", "/user", headers: admin.merging(["Idempotency-Key": "callers"]) { $1 })
        XCTAssertEqual(cleared.status, 204, "an open server's callers' key is not the admins': \(cleared.text)")
    }

    /// A repeat sent the moment the first answer arrives is replayed, never a 409: the key's
    /// run ends before its answer goes out, not when the journal lets go of the request's
    /// closures (which came after the answer, and failed CI's run of the test above).
    func testARepeatRightAfterTheAnswerIsReplayedNotRunning() throws {
        let server = try start()
        let client = HTTPClient(port: server.port)
        let session = try XCTUnwrap(try create(client).object["session"] as? String)
        let admin = ["Authorization": "Bearer t"]
        for round in 0..<100 {
            let user = #"{"id":"u\#(round)","name":"U"}"#
            let put = try client.request(
                "PUT", "/user", body: user, headers: admin.merging(["Idempotency-Key": "u\(round)"]) { $1 })
            XCTAssertEqual(put.status, 200, put.text)
            let again = try client.request(
                "PUT", "/user", body: user, headers: admin.merging(["Idempotency-Key": "u\(round)"]) { $1 })
            XCTAssertEqual(again.status, 200, "round \(round): \(again.text)")
            let first = try act(client, session, key: "a\(round)")
            let repeated = try act(client, session, key: "a\(round)")
            XCTAssertEqual(repeated.status, 200, "round \(round): \(repeated.text)")
            XCTAssertEqual(repeated.body, first.body)
            if again.status != 200 || repeated.status != 200 { break }
        }
        XCTAssertEqual(try count(client, session), 100)
    }

    func testTheMemoryStoreKeepsKeysWhileItRuns() throws {
        let server = try start(store: "memory")
        let client = HTTPClient(port: server.port)
        let session = try XCTUnwrap(try create(client).object["session"] as? String)
        let first = try act(client, session, key: "m")
        assertReplay(try act(client, session, key: "m"), of: first)
        XCTAssertEqual(try count(client, session), 1)
    }

    func testKeysAreForgottenAfterTheirTTL() throws {
        let server = try start(["--idempotency-ttl", "1"])
        let client = HTTPClient(port: server.port)
        let session = try XCTUnwrap(try create(client).object["session"] as? String)
        XCTAssertEqual(try act(client, session, key: "short").status, 200)
        XCTAssertEqual(try act(client, session, key: "short").header("Idempotent-Replayed"), "true")
        // Trimmed every 5 s in the background: bounded wait until the repeat runs again.
        XCTAssertTrue(
            waitUntil(timeout: 20) {
                (try? self.act(client, session, key: "short"))?.header("Idempotent-Replayed") == nil
            })
        XCTAssertEqual(try count(client, session), 2)
        let metrics = try client.request("GET", "/metrics").text
        XCTAssertTrue(metrics.contains("reactord_idempotent_replays_total"), metrics)
    }
}

/// Holds a SQLite file's write lock from a `sqlite3` process of its own until `release`: the
/// server's commits wait for it (its busy timeout is 5 s).
private final class WriteLockHolder {
    private let process = Process()
    private let input = Pipe()

    init(_ path: String) throws {
        let output = Pipe()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/sqlite3")
        process.arguments = [path]
        process.standardInput = input
        process.standardOutput = output
        try process.run()
        input.fileHandleForWriting.write(Data("BEGIN IMMEDIATE;\n.print locked\n".utf8))
        var printed = Data()
        while !String(decoding: printed, as: UTF8.self).contains("locked") {
            let chunk = output.fileHandleForReading.availableData
            if chunk.isEmpty { throw CocoaError(.fileReadUnknown) }
            printed += chunk
        }
    }

    func release() throws {
        input.fileHandleForWriting.write(Data("ROLLBACK;\n.quit\n".utf8))
        process.waitUntilExit()
    }

    deinit { if process.isRunning { process.terminate() } }
}
