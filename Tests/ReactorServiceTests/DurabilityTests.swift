import Foundation
import XCTest

/// Durable sessions on the embedded SQLite store, with real processes and real files:
/// what was answered survives kill -9 and SIGTERM, resumes continue across restarts, and
/// every way the file can be wrong is refused by name.
final class DurabilityTests: XCTestCase {
    private var folder: URL!
    private var database: String { folder.appendingPathComponent("reactord.sqlite").path }

    override func setUpWithError() throws {
        folder = FileManager.default.temporaryDirectory
            .appendingPathComponent("reactord-durability-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
    }

    override func tearDownWithError() throws {
        try? FileManager.default.removeItem(at: folder)
    }

    private func start(_ extra: [String] = [], store: String? = nil) throws -> ReactordProcess {
        try ReactordProcess(
            arguments: [
                "--store", store ?? "sqlite:\(database)", "--admin-token", "t",
                "--heartbeat", "1",
            ] + extra)
    }

    private func create(_ client: HTTPClient) throws -> String {
        let created = try client.request("POST", "/sessions", body: #"{"reactor":"counter"}"#)
        XCTAssertEqual(created.status, 201, created.text)
        return try XCTUnwrap(created.object["session"] as? String)
    }

    private func act(_ client: HTTPClient, _ session: String, _ action: String = #"{"type":"increase"}"#) throws
        -> TestResponse
    {
        try client.request("POST", "/action", body: #"{"session":"\#(session)","action":\#(action)}"#)
    }

    private func count(_ client: HTTPClient, _ session: String) throws -> Int? {
        (try client.request("GET", "/sessions/\(session)").object["state"] as? [String: Any])?["count"] as? Int
    }

    // MARK: - Crashes and restarts

    func testKillNineLosesNothingThatWasAnswered() throws {
        let server = try start()
        let setup = HTTPClient(port: server.port)
        let sessions = try (0..<12).map { _ in try create(setup) }
        let answered = Locked<[String: Int]>([:])
        let inFlight = Locked<[String: Int]>([:])
        let clients = 4
        let done = DispatchGroup()
        for worker in 0..<clients {
            done.enter()
            Thread.detachNewThread { [self] in
                defer { done.leave() }
                let client = HTTPClient(port: server.port)
                var index = worker
                for _ in 0..<100_000 {  // bounded; the kill ends it much sooner
                    let session = sessions[index % sessions.count]
                    index += clients
                    inFlight.update { $0[session, default: 0] += 1 }
                    guard let response = try? act(client, session) else { return }
                    inFlight.update { $0[session, default: 0] -= 1 }
                    guard response.status == 200 else { return }
                    answered.update { $0[session, default: 0] += 1 }
                }
            }
        }
        // Mid-load: once a few hundred actions were answered (bounded, for slow sanitizer builds).
        XCTAssertTrue(waitUntil(timeout: 60) { answered.value.values.reduce(0, +) >= 300 })
        kill(server.process.processIdentifier, SIGKILL)
        XCTAssertEqual(done.wait(timeout: .now() + 20), .success)
        XCTAssertNotNil(server.waitForExit(timeout: 5))

        let restarted = try start()
        let client = HTTPClient(port: restarted.port)
        var total = 0
        for session in sessions {
            let got = answered.value[session] ?? 0
            let open = inFlight.value[session] ?? 0
            let stored = try XCTUnwrap(try count(client, session), "session \(session) is back")
            XCTAssertGreaterThanOrEqual(stored, got, "every answered action is there")
            XCTAssertLessThanOrEqual(stored, got + open, "at most the unanswered one in flight is added")
            total += got
        }
        XCTAssertGreaterThanOrEqual(total, 300, "the load ran")
        print(
            "kill -9 after \(total) answered actions on 12 sessions: every count equals its 200s (+ at most the one in flight)"
        )
        // Event ids continue without reuse: the next action is the stored version + 1.
        let session = sessions[0]
        let before = try client.request("GET", "/sessions/\(session)").object["version"] as? Int
        let after = try act(client, session).object["version"] as? Int
        XCTAssertEqual(after, before.map { $0 + 1 })
    }

    /// Reads racing a DELETE: one that looked the session up between its leaving memory and its
    /// tombstone loaded it again from its row, so a session answered 204 lived on, taking
    /// actions that were never stored (a reviewer's race: 1 to 3 rounds in 100).
    func testADeletedSessionDoesNotComeBackThroughARacingRead() throws {
        let server = try start(["--session-create-rate", "0", "--threads", "2"])
        let client = HTTPClient(port: server.port)
        for round in 0..<150 {
            let session = try create(client)
            XCTAssertEqual(try act(client, session).status, 200)
            let stop = Locked(false)
            let readers = DispatchGroup()
            for _ in 0..<3 {
                readers.enter()
                Thread {
                    defer { readers.leave() }
                    let reader = HTTPClient(port: server.port)
                    while !stop.value { _ = try? reader.request("GET", "/sessions/\(session)") }
                }.start()
            }
            usleep(5_000)
            let deleted = try HTTPClient(port: server.port).request("DELETE", "/sessions/\(session)")
            usleep(10_000)
            stop.update { $0 = true }
            readers.wait()
            XCTAssertEqual(deleted.status, 204, deleted.text)
            let after = try client.request("GET", "/sessions/\(session)")
            let acted = try act(client, session)
            XCTAssertEqual(after.status, 404, "round \(round): deleted, then \(after.text)")
            XCTAssertEqual(acted.status, 404, "round \(round): an action on a deleted session: \(acted.text)")
            if after.status != 404 { break }
        }
    }

    func testSIGTERMUnderLoadCommitsEverythingAnswered() throws {
        let server = try start(["--threads", "2"])
        let session = try create(HTTPClient(port: server.port))
        let ok = Locked(0)
        let unanswered = Locked(0)
        let other = Locked<[Int]>([])
        let done = DispatchGroup()
        for _ in 0..<4 {
            done.enter()
            Thread.detachNewThread { [self] in
                defer { done.leave() }
                var client = HTTPClient(port: server.port)
                for _ in 0..<100_000 {  // bounded; the signal ends it much sooner
                    do {
                        let response = try act(client, session)
                        if response.status == 200 {
                            ok.update { $0 += 1 }
                        } else {
                            other.update { $0.append(response.status) }
                        }
                    } catch {
                        unanswered.update { $0 += 1 }
                        if (try? TestSocket(port: server.port, timeout: 1)) == nil { return }
                        client = HTTPClient(port: server.port)
                    }
                }
            }
        }
        XCTAssertTrue(waitUntil(timeout: 60) { ok.value >= 300 })
        kill(server.process.processIdentifier, SIGTERM)
        XCTAssertEqual(server.waitForExit(timeout: 10), 0, "SIGTERM exits 0 within 10 s")
        XCTAssertEqual(done.wait(timeout: .now() + 30), .success)
        XCTAssertTrue(other.value.allSatisfy { $0 == 503 }, "only 200 and 503: \(other.value.prefix(5))")

        let restarted = try start()
        let stored = try XCTUnwrap(try count(HTTPClient(port: restarted.port), session))
        XCTAssertGreaterThanOrEqual(stored, ok.value, "every action answered 200 was committed")
        XCTAssertLessThanOrEqual(stored, ok.value + unanswered.value, "and no action that was refused")
        print(
            "SIGTERM under load on the sqlite store: \(ok.value) answered 200, \(other.value.count) refused 503, "
                + "\(unanswered.value) closed unanswered; stored count \(stored)")
    }

    private let admin = ["Authorization": "Bearer t"]

    /// A session made while the user was u1, then a `kill -9` and a new server on the same file:
    /// the session is stored there, not loaded yet.
    private func restartedWithASessionOfUserU1() throws -> (
        session: String, server: ReactordProcess, client: HTTPClient
    ) {
        let server = try start()
        let client = HTTPClient(port: server.port)
        XCTAssertEqual(
            try client.request("PUT", "/user", body: #"{"id":"u1","name":"jay"}"#, headers: admin).status, 200)
        let session = try create(client)
        kill(server.process.processIdentifier, SIGKILL)
        XCTAssertNotNil(server.waitForExit(timeout: 5))
        let restarted = try start()
        return (session, restarted, HTTPClient(port: restarted.port))
    }

    /// The user changes while a session is stored: when the session comes back, that change is
    /// its next event, committed like any other, so its answers, its GET, its stream and the
    /// store agree (it used to be answered 200 under the stored version and then lost).
    func testAUserChangeWhileASessionIsStoredIsItsNextEvent() throws {
        let (session, restarted, again) = try restartedWithASessionOfUserU1()
        XCTAssertEqual(
            try again.request("PUT", "/user", body: #"{"id":"u2","name":"kim"}"#, headers: admin).status, 200)
        func userID(_ body: [String: Any]) -> String? {
            ((body["state"] as? [String: Any])?["user"] as? [String: Any])?["id"] as? String
        }
        // The stored state (version 0) then the change, or the change alone if it was committed
        // before the stream was added (a new stream starts with the current state).
        let stream = try EventStreamClient(port: restarted.port, path: "/sessions/\(session)/events")
        var events = [stream.next()]
        if events.last??.id == "0" { events.append(stream.next()) }
        XCTAssertEqual(events.last??.id, "1")
        XCTAssertEqual((events.last??.object["user"] as? [String: Any])?["id"] as? String, "u2")
        let read = try again.request("GET", "/sessions/\(session)").object
        XCTAssertEqual(read["version"] as? Int, 1)
        XCTAssertEqual(userID(read), "u2")
        let answered = try act(again, session, #"{"type":"doSomeAction"}"#).object
        XCTAssertEqual(userID(answered), "u2")
        XCTAssertEqual(answered["version"] as? Int, 1, "an action that changes nothing keeps the version")

        kill(restarted.process.processIdentifier, SIGKILL)
        XCTAssertNotNil(restarted.waitForExit(timeout: 5))
        let third = try start()
        let stored = try HTTPClient(port: third.port).request("GET", "/sessions/\(session)").object
        XCTAssertEqual(stored["version"] as? Int, 1)
        XCTAssertEqual(userID(stored), "u2", "the change was committed")
    }

    /// The first request after the restart is a read: it waits for the change to be committed,
    /// so it shows the current user under the new version, as every later read does.
    func testTheFirstReadAfterARestartShowsAUserChangeMadeWhileStored() throws {
        let (session, restarted, again) = try restartedWithASessionOfUserU1()
        try withExtendedLifetime(restarted) {  // the server runs as long as its process object lives
            XCTAssertEqual(try again.request("DELETE", "/user", headers: admin).status, 204)
            for attempt in 1...2 {
                let read = try again.request("GET", "/sessions/\(session)").object
                XCTAssertEqual(read["version"] as? Int, 1, "read \(attempt)")
                XCTAssertTrue((read["state"] as? [String: Any])?["user"] is NSNull, "read \(attempt): \(read)")
            }
        }
    }

    func testSIGTERMClosesStreamsWithoutEndAndTheSubscriberResumesExactly() throws {
        let server = try start()
        let client = HTTPClient(port: server.port)
        let session = try create(client)
        let stream = try EventStreamClient(port: server.port, path: "/sessions/\(session)/events")
        XCTAssertEqual(stream.next()?.id, "0")
        XCTAssertEqual(try act(client, session).status, 200)
        XCTAssertEqual(try act(client, session, #"{"type":"alert","message":"before"}"#).status, 200)
        let seen = stream.take(3)  // state 1, state 2 (the alert), pulse 3
        XCTAssertEqual(seen.map(\.id), ["1", "2", "3"])
        XCTAssertEqual(seen.last?.event, "pulse")

        kill(server.process.processIdentifier, SIGTERM)
        let rest = stream.drain(quiet: 2)
        XCTAssertFalse(rest.contains { $0.event == "end" }, "the session is not over: no event: end")
        XCTAssertTrue(stream.ended, "the stream was closed")
        XCTAssertEqual(server.waitForExit(timeout: 10), 0, "SIGTERM exits 0 within 10 s")

        let restarted = try start()
        let again = HTTPClient(port: restarted.port)
        XCTAssertEqual(try act(again, session).status, 200)
        XCTAssertEqual(try act(again, session, #"{"type":"alert","message":"after"}"#).status, 200)
        // EventSource reconnects with the last id it saw: exactly what followed, pulses included.
        let resumed = try EventStreamClient(
            port: restarted.port, path: "/sessions/\(session)/events",
            headers: ["Last-Event-ID": "3"])
        let missed = resumed.take(3)
        XCTAssertEqual(missed.map(\.id), ["4", "5", "6"])
        XCTAssertEqual(missed.map(\.event), ["state", "state", "pulse"])
        XCTAssertEqual((missed[0].object)["count"] as? Int, 2)
        XCTAssertEqual(missed[2].object["value"] as? String, "after")
        XCTAssertNil(resumed.next(timeout: 0.3), "nothing more, nothing twice")
        // A resume from before the restart replays the pulse the history holds.
        let older = try EventStreamClient(port: restarted.port, path: "/sessions/\(session)/events?lastEventId=2")
        XCTAssertEqual(older.take(4).map(\.id), ["3", "4", "5", "6"])
        // ?fields= applies to replayed events as to live ones.
        let filtered = try EventStreamClient(
            port: restarted.port,
            path: "/sessions/\(session)/events?fields=count&lastEventId=0")
        let counts = filtered.take(2)
        XCTAssertEqual(counts.first?.data, #"{"count":1}"#)
    }

    func testDeletedSessionStaysGoneAndTheUserComesBack() throws {
        let server = try start()
        let client = HTTPClient(port: server.port)
        let kept = try create(client)
        let deleted = try create(client)
        XCTAssertEqual(try act(client, kept).status, 200)
        XCTAssertEqual(try client.request("DELETE", "/sessions/\(deleted)").status, 204)
        XCTAssertEqual(
            try client.request(
                "PUT", "/user", body: #"{"id":"u1","name":"jay"}"#,
                headers: admin
            ).status, 200)
        kill(server.process.processIdentifier, SIGKILL)
        XCTAssertNotNil(server.waitForExit(timeout: 5))

        let restarted = try start()
        let again = HTTPClient(port: restarted.port)
        XCTAssertEqual(try again.request("GET", "/sessions/\(deleted)").status, 404)
        XCTAssertEqual(try act(again, deleted).status, 404)
        XCTAssertEqual(try again.request("GET", "/user").object["id"] as? String, "u1")
        let state = try again.request("GET", "/sessions/\(kept)").object["state"] as? [String: Any]
        XCTAssertEqual(state?["count"] as? Int, 1)
        XCTAssertEqual(
            (state?["user"] as? [String: Any])?["name"] as? String, "jay",
            "the user was restored before the session saw currentUser")
        XCTAssertEqual(try again.request("GET", "/healthz").object["sessions"] as? Int, 1)
    }

    func testTTLGoesOnCountingFromTheStoredActivity() throws {
        let server = try start(["--session-ttl", "2"])
        let client = HTTPClient(port: server.port)
        let idle = try create(client)
        _ = try create(client)  // never asked for again: the sweeper deletes it from the store
        kill(server.process.processIdentifier, SIGKILL)
        XCTAssertNotNil(server.waitForExit(timeout: 5))
        Thread.sleep(forTimeInterval: 2.5)
        let restarted = try start(["--session-ttl", "2"])
        let again = HTTPClient(port: restarted.port)
        XCTAssertEqual(
            try again.request("GET", "/sessions/\(idle)").status, 404,
            "it expired while the server was down")
        XCTAssertTrue(
            waitUntil(timeout: 10) { (try? again.request("GET", "/healthz").object["sessions"] as? Int) == 0 },
            "the other expired one is swept from the store unasked")
        kill(restarted.process.processIdentifier, SIGTERM)
        XCTAssertEqual(restarted.waitForExit(timeout: 10), 0)
        XCTAssertEqual(try sqlite("SELECT count(*) FROM sessions;"), "0")
    }

    func testHistoryIsTrimmedSoTheFileDoesNotGrowWithoutBound() throws {
        let server = try start(["--history", "10"], store: "sqlite:\(database)?sync=full")
        let client = HTTPClient(port: server.port)
        let session = try create(client)
        for _ in 0..<300 { XCTAssertEqual(try act(client, session).status, 200) }
        let other = try create(client)
        XCTAssertEqual(try act(client, other).status, 200)
        XCTAssertEqual(try client.request("DELETE", "/sessions/\(other)").status, 204)
        kill(server.process.processIdentifier, SIGTERM)
        XCTAssertEqual(server.waitForExit(timeout: 10), 0)
        // Its events, not its action log (in the same table: an entry rides on its event's row, and
        // moves to a row of its own, keyed above 2^62, when the history drops the event; docs/history.md).
        let kept =
            Int(try sqlite("SELECT count(*) FROM events WHERE session = '\(session)' AND seq < (1 << 62);")) ?? -1
        XCTAssertGreaterThanOrEqual(kept, 10)
        XCTAssertLessThanOrEqual(kept, 10 + 64, "trimmed in steps of 64 events")
        XCTAssertEqual(try sqlite("SELECT min(seq) >= 300 - 10 - 64 FROM events;"), "1")
        let logged =
            Int(try sqlite("SELECT count(*) FROM events WHERE session = '\(session)' AND cause IS NOT NULL;")) ?? -1
        XCTAssertEqual(logged, 300, "its action log keeps its own length (--action-log, 1000)")
        XCTAssertEqual(
            try sqlite("SELECT count(*) FROM events WHERE session = '\(other)';"), "0",
            "a deleted session's history goes too")

        // The newest 10 come back: a resume from 289 is exact, one from 280 starts afresh.
        let restarted = try start(["--history", "10"])
        let exact = try EventStreamClient(port: restarted.port, path: "/sessions/\(session)/events?lastEventId=295")
        XCTAssertEqual(exact.take(5).map(\.id), ["296", "297", "298", "299", "300"])
        let afresh = try EventStreamClient(port: restarted.port, path: "/sessions/\(session)/events?lastEventId=280")
        XCTAssertEqual(afresh.next()?.id, "300", "history no longer covers it: the current state")
    }

    /// A run with --history 0 keeps no events but leaves older ones: those must not make a later
    /// run's resume skip the versions that run made (9 and 10 were replayed, 11 to 13 skipped).
    func testAResumeNeverSkipsWhatARunWithoutHistoryMade() throws {
        var server = try start()
        var client = HTTPClient(port: server.port)
        let session = try create(client)
        for _ in 0..<10 { XCTAssertEqual(try act(client, session).status, 200) }  // versions 1 to 10
        kill(server.process.processIdentifier, SIGKILL)
        XCTAssertNotNil(server.waitForExit(timeout: 5))
        server = try start(["--history", "0"])
        client = HTTPClient(port: server.port)
        for version in 11...13 { XCTAssertEqual(try act(client, session).object["version"] as? Int, version) }
        kill(server.process.processIdentifier, SIGKILL)
        XCTAssertNotNil(server.waitForExit(timeout: 5))

        server = try start()
        let resumed = try EventStreamClient(port: server.port, path: "/sessions/\(session)/events?lastEventId=8")
        XCTAssertEqual(resumed.next()?.id, "13", "history no longer covers 8: the current state, not 9 and 10")
    }

    // MARK: - Files that are wrong

    /// Runs reactord until it exits; its status and what it wrote to stderr.
    private func runToExit(_ arguments: [String]) throws -> (status: Int32?, log: String) {
        let process = Process()
        process.executableURL = try ReactordProcess.executableURL()
        process.arguments = ["--port", "0", "--admin-token", "t"] + arguments
        process.environment = [:]
        let stderr = Pipe()
        process.standardError = stderr
        try process.run()
        let deadline = Date().addingTimeInterval(10)
        while process.isRunning, Date() < deadline { Thread.sleep(forTimeInterval: 0.02) }
        if process.isRunning {
            process.terminate()
            return (nil, "still running")
        }
        let log = String(decoding: stderr.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        return (process.terminationStatus, log)
    }

    func testAMissingFolderIsRefusedByName() throws {
        let path = folder.appendingPathComponent("no-such-folder/reactord.sqlite").path
        let (status, log) = try runToExit(["--store", "sqlite:\(path)"])
        XCTAssertNotNil(status)
        XCTAssertNotEqual(status, 0)
        XCTAssertTrue(log.contains(folder.appendingPathComponent("no-such-folder").path), log)
    }

    func testAFolderThatIsNotWritableIsRefusedByName() throws {
        // Root writes anywhere a permission check guards, so the folder is a read-only mount.
        let readOnly = try mountTmpfs("read-only", options: "ro,size=1m")
        defer { unmount(readOnly) }
        let path = readOnly.appendingPathComponent("reactord.sqlite").path
        let (status, log) = try runToExit(["--store", "sqlite:\(path)"])
        XCTAssertNotEqual(status ?? 0, 0)
        XCTAssertTrue(log.contains(path), log)
    }

    /// A store in WAL mode on a full disk fails to open with "disk I/O error" (its shared-memory
    /// file cannot grow): the refusal to start says the disk is full, for a new file as well.
    func testAStartOnAFullDiskSaysTheDiskIsFull() throws {
        let full = try mountTmpfs("full", options: "size=256k")
        defer { unmount(full) }
        let existing = full.appendingPathComponent("existing.sqlite").path
        let new = full.appendingPathComponent("new.sqlite").path
        let made = Process()
        made.executableURL = URL(fileURLWithPath: "/usr/bin/sqlite3")
        made.arguments = [existing, "PRAGMA journal_mode=wal; CREATE TABLE t(x);"]
        made.standardOutput = FileHandle.nullDevice
        try made.run()
        made.waitUntilExit()
        _ = shell("/bin/dd", ["if=/dev/zero", "of=\(full.path)/filler", "bs=4096", "count=1000"])
        for path in [existing, new] {
            let (status, log) = try runToExit(["--store", "sqlite:\(path)"])
            XCTAssertNotEqual(status ?? 0, 0)
            XCTAssertTrue(log.contains(path) && log.contains("its disk is full"), log)
        }
    }

    func testAFileThatIsNoDatabaseIsRefusedAndLeftUntouched() throws {
        let bytes = Array("name,count\nalice,3\n".utf8) + (0..<4096).map { UInt8($0 % 251) }
        try Data(bytes).write(to: URL(fileURLWithPath: database))
        let (status, log) = try runToExit(["--store", "sqlite:\(database)"])
        XCTAssertNotEqual(status ?? 0, 0)
        XCTAssertTrue(log.contains(database) && log.contains("not a SQLite database"), log)
        XCTAssertEqual(Array(try Data(contentsOf: URL(fileURLWithPath: database))), bytes, "byte for byte")
        XCTAssertEqual(
            try FileManager.default.contentsOfDirectory(atPath: folder.path), ["reactord.sqlite"],
            "no -wal or -shm beside it")
    }

    func testAnotherProgramsDatabaseAndANewerSchemaAreRefused() throws {
        try sqlite(
            "CREATE TABLE accounts (id INTEGER PRIMARY KEY, balance INTEGER); INSERT INTO accounts VALUES (1, 5);")
        let foreign = try Data(contentsOf: URL(fileURLWithPath: database))
        var (status, log) = try runToExit(["--store", "sqlite:\(database)"])
        XCTAssertNotEqual(status ?? 0, 0)
        XCTAssertTrue(log.contains("another program"), log)
        XCTAssertEqual(try Data(contentsOf: URL(fileURLWithPath: database)), foreign)

        try FileManager.default.removeItem(atPath: database)
        let server = try start()  // makes a current file
        XCTAssertEqual(try HTTPClient(port: server.port).request("GET", "/healthz").status, 200)
        kill(server.process.processIdentifier, SIGTERM)
        XCTAssertEqual(server.waitForExit(timeout: 10), 0)
        try sqlite("UPDATE reactord_schema SET version = 99;")
        (status, log) = try runToExit(["--store", "sqlite:\(database)"])
        XCTAssertNotEqual(status ?? 0, 0)
        XCTAssertTrue(log.contains("newer reactord") && log.contains("99"), log)
        // No reactord writes a version below 1: refused by name (-1 trapped on the migration's range).
        for version in ["-1", "0"] {
            try sqlite("UPDATE reactord_schema SET version = \(version);")
            (status, log) = try runToExit(["--store", "sqlite:\(database)"])
            XCTAssertEqual(status, 1, log)
            XCTAssertTrue(log.contains("holds version \(version)"), log)
        }
    }

    func testAnEmptyDatabaseIsMigratedToTheCurrentSchema() throws {
        try sqlite("PRAGMA user_version = 0; VACUUM;")  // a valid SQLite file with no tables: schema version 0
        let server = try start()
        let client = HTTPClient(port: server.port)
        let session = try create(client)
        XCTAssertEqual(try act(client, session).status, 200)
        kill(server.process.processIdentifier, SIGTERM)
        XCTAssertEqual(server.waitForExit(timeout: 10), 0)
        XCTAssertEqual(try sqlite("SELECT version FROM reactord_schema;"), "7", "every migration ran")
        XCTAssertEqual(try sqlite("SELECT count(*) FROM sessions;"), "1")
        XCTAssertEqual(
            try sqlite("SELECT cause FROM events WHERE cause IS NOT NULL;"), "action", "the action was logged")
    }

    func testASecondProcessOnTheSameFileIsRefusedWhileTheFirstServes() throws {
        let first = try start()
        let client = HTTPClient(port: first.port)
        let session = try create(client)
        let (status, log) = try runToExit(["--store", "sqlite:\(database)"])
        XCTAssertNotEqual(status ?? 0, 0)
        XCTAssertTrue(log.contains(database) && log.contains("in use"), log)
        XCTAssertEqual(try act(client, session).status, 200, "the first keeps serving")
    }

    /// Four sessions, each acted on once, then the server stopped and three of their rows made
    /// unrestorable: a state that no longer decodes, a kind no longer served, a negative version.
    private func restartedWithUnrestorableSessions() throws -> (
        server: ReactordProcess, broken: String, gone: String, rewound: String, fine: String
    ) {
        let server = try start()
        let client = HTTPClient(port: server.port)
        let sessions = try (0..<4).map { _ in try create(client) }
        for session in sessions { XCTAssertEqual(try act(client, session).status, 200) }
        kill(server.process.processIdentifier, SIGTERM)
        XCTAssertEqual(server.waitForExit(timeout: 10), 0)
        let (broken, gone, rewound) = (sessions[0], sessions[1], sessions[2])
        try sqlite(
            """
            UPDATE sessions SET state = '{"count": "not a number"' WHERE id = '\(broken)';
            UPDATE sessions SET kind = 'retired' WHERE id = '\(gone)';
            UPDATE sessions SET version = -5 WHERE id = '\(rewound)';
            """)
        return (try start(), broken, gone, rewound, sessions[3])
    }

    func testACorruptRowFailsItsSessionAlone() throws {
        let (restarted, broken, gone, rewound, fine) = try restartedWithUnrestorableSessions()
        let again = HTTPClient(port: restarted.port)
        // A negative version would restart the event ids that clients resume from.
        XCTAssertTrue(try again.request("GET", "/sessions/\(rewound)").text.contains("damaged"))
        for session in [broken, gone, rewound] {
            let response = try again.request("GET", "/sessions/\(session)")
            XCTAssertEqual(response.status, 409, response.text)
            XCTAssertEqual(response.header("content-type"), "application/problem+json")
            XCTAssertEqual(try act(again, session).status, 409)
        }
        XCTAssertTrue(try again.request("GET", "/sessions/\(gone)").text.contains("'retired'"))
        XCTAssertEqual(try act(again, fine).object["version"] as? Int, 2)
        XCTAssertEqual(try again.request("GET", "/healthz").status, 200, "the server stays up")
    }

    func testAnUnrestorableSessionIsDeletedByADelete() throws {
        let (restarted, broken, gone, rewound, fine) = try restartedWithUnrestorableSessions()
        let again = HTTPClient(port: restarted.port)
        // Its state does not decode: a version asked for cannot be checked, so it stays.
        let conditional = try again.request("DELETE", "/sessions/\(broken)", headers: ["If-Match": #""1""#])
        XCTAssertEqual(conditional.status, 409, conditional.text)
        XCTAssertEqual(try again.request("GET", "/sessions/\(broken)").status, 409)
        XCTAssertEqual(try again.request("DELETE", "/sessions/\(broken)", headers: ["If-Match": "*"]).status, 204)
        let keyed = ["Idempotency-Key": "retire-\(gone)"]
        XCTAssertEqual(try again.request("DELETE", "/sessions/\(gone)", headers: keyed).status, 204)
        let replayed = try again.request("DELETE", "/sessions/\(gone)", headers: keyed)
        XCTAssertEqual(replayed.status, 204)
        XCTAssertEqual(replayed.header("idempotent-replayed"), "true")
        XCTAssertEqual(try again.request("DELETE", "/sessions/\(rewound)").status, 204, "a damaged row goes too")
        for session in [broken, gone, rewound] {
            XCTAssertEqual(try again.request("GET", "/sessions/\(session)").status, 404)
            XCTAssertEqual(try again.request("DELETE", "/sessions/\(session)").status, 404)
        }
        XCTAssertEqual(try act(again, fine).status, 200)
        kill(restarted.process.processIdentifier, SIGKILL)
        _ = restarted.waitForExit(timeout: 10)
        XCTAssertEqual(try sqlite("SELECT id FROM sessions;"), fine, "the deletes were committed")
    }

    func testADamagedFileFailsTheSessionsOnItsBadPagesFor409NotARetry() throws {
        let server = try start()
        let client = HTTPClient(port: server.port)
        var sessions: [String] = []
        for _ in 0..<60 {
            let session = try create(client)
            let message = String(repeating: "x", count: 500)
            XCTAssertEqual(try act(client, session, #"{"type":"alert","message":"\#(message)"}"#).status, 200)
            sessions.append(session)
        }
        kill(server.process.processIdentifier, SIGTERM)
        XCTAssertEqual(server.waitForExit(timeout: 10), 0)
        // A page of the sessions' histories overwritten, as a bad disk block would (the middle one
        // of the leaves: those that restoring a session reads; dbstat numbers pages from 1).
        let leaves = try sqlite(
            "SELECT pageno FROM dbstat WHERE name = 'events' AND pagetype = 'leaf' ORDER BY pageno;"
        )
        .split(separator: "\n").compactMap { UInt64($0) }
        let page = try XCTUnwrap(leaves.dropFirst(leaves.count / 2).first)
        let file = try XCTUnwrap(FileHandle(forUpdatingAtPath: database))
        try file.seek(toOffset: (page - 1) * 4096)
        file.write(Data(repeating: 0xFF, count: 4096))
        try file.close()

        let restarted = try start()
        let again = HTTPClient(port: restarted.port)
        var statuses: [Int: Int] = [:]
        for session in sessions {
            let response = try again.request("GET", "/sessions/\(session)")
            statuses[response.status, default: 0] += 1
            if response.status == 409 { XCTAssertTrue(response.text.contains("damaged"), response.text) }
        }
        XCTAssertEqual(Set(statuses.keys).subtracting([200, 409]), [], "never a 503 to retry: \(statuses)")
        XCTAssertGreaterThan(statuses[409] ?? 0, 0, "some session lived on the bad page: \(statuses)")
        XCTAssertEqual(try again.request("GET", "/healthz").status, 200, "the server stays up")
    }

    /// A leaf of the sessions' table whose cell pointers are damaged: SQLite read no row there
    /// (without `cell_size_check`), and the session answered 404, as if it had been deleted.
    func testASessionOnAPageWithDamagedCellPointersIsA409NotA404() throws {
        let extra = ["--history", "0", "--action-log", "0"]
        let server = try start(extra)
        let client = HTTPClient(port: server.port)
        let filler = String(repeating: "m", count: 990)
        var sessions: [String] = []
        for index in 0..<40 {
            let session = try create(client)
            XCTAssertEqual(try act(client, session, #"{"type":"alert","message":"\#(index)\#(filler)"}"#).status, 200)
            sessions.append(session)
        }
        kill(server.process.processIdentifier, SIGTERM)
        XCTAssertEqual(server.waitForExit(timeout: 10), 0)
        // The page that holds session 20's row: its id and its state on one page.
        var bytes = try Data(contentsOf: URL(fileURLWithPath: database))
        let pages = stride(from: 0, to: bytes.count, by: 4096).map { $0..<min($0 + 4096, bytes.count) }
        let page = try XCTUnwrap(
            pages.first { page in
                bytes[page].range(of: Data(sessions[20].utf8)) != nil
                    && bytes[page].range(of: Data(#""alertMessage":"20m"#.utf8)) != nil
            })
        bytes.replaceSubrange((page.lowerBound + 8)..<(page.lowerBound + 40), with: Data(repeating: 0xFF, count: 32))
        try bytes.write(to: URL(fileURLWithPath: database))

        let restarted = try start(extra)
        let again = HTTPClient(port: restarted.port)
        let response = try again.request("GET", "/sessions/\(sessions[20])")
        XCTAssertEqual(response.status, 409, response.text)
        XCTAssertTrue(response.text.contains("damaged"), response.text)
        XCTAssertEqual(try again.request("GET", "/healthz").status, 200, "the server stays up")
    }

    // MARK: - A full disk

    func testAFullDiskIsA507AndNothingAnsweredIsLost() throws {
        let mount = try mountTmpfs("small", options: "size=2m")
        defer { unmount(mount) }
        let path = mount.appendingPathComponent("reactord.sqlite").path
        // Two request threads: an action's answer waited for its commit only if the journal had
        // not come by while another action held the writes (a 200 for a change never stored).
        let server = try start(["--history", "100000", "--threads", "2"], store: "sqlite:\(path)")
        let client = HTTPClient(port: server.port)
        let session = try create(client)
        // Fill the disk to a few pages short, then grow the history until a write fails.
        let filler = mount.appendingPathComponent("filler")
        _ = shell("/bin/dd", ["if=/dev/zero", "of=\(filler.path)", "bs=4096", "count=400"])
        var answered = 0
        var full: TestResponse?
        for index in 0..<20_000 {
            let response = try act(
                client, session, #"{"type":"alert","message":"\#(String(repeating: "x", count: 900))\#(index)"}"#)
            if response.status == 200 {
                answered += 1
                continue
            }
            full = response
            break
        }
        let refusal = try XCTUnwrap(full, "the disk filled up")
        XCTAssertEqual(refusal.status, 507, refusal.text)
        XCTAssertEqual(refusal.header("content-type"), "application/problem+json")
        XCTAssertTrue(refusal.text.contains("full"), refusal.text)
        XCTAssertEqual(try client.request("GET", "/healthz").status, 200, "the server stays up")
        XCTAssertEqual(
            try client.request("GET", "/sessions/\(session)").object["version"] as? Int, answered * 2,
            "the session is back at its last committed state")
        // Each failed commit lets the session go, to come back from the store: an action racing that
        // was answered 404, which a client takes as final. It exists: 507 or 503, never 404.
        let statuses = Locked<[Int]>([])
        DispatchQueue.concurrentPerform(iterations: 8) { _ in
            let own = HTTPClient(port: server.port)
            for _ in 0..<40 {
                let status =
                    (try? self.act(
                        own, session, #"{"type":"alert","message":"\#(String(repeating: "y", count: 900))"}"#
                    ).status) ?? 0
                statuses.update { $0.append(status) }
            }
        }
        let seen = Set(statuses.value)
        XCTAssertTrue(seen.isSubset(of: [503, 507]), "answers while the disk is full: \(seen.sorted())")

        try FileManager.default.removeItem(at: filler)
        XCTAssertEqual(try act(client, session).status, 200, "requests succeed again once space is back")
        kill(server.process.processIdentifier, SIGKILL)
        XCTAssertNotNil(server.waitForExit(timeout: 5))
        let restarted = try start(store: "sqlite:\(path)")
        let state = try HTTPClient(port: restarted.port).request("GET", "/sessions/\(session)").object
        XCTAssertEqual(state["version"] as? Int, answered * 2 + 1, "every answered action survived")
        print("disk full after \(answered) answered alerts: 507, then 200 again once space was back")
    }

    // MARK: - Helpers

    @discardableResult
    private func sqlite(_ sql: String) throws -> String {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/sqlite3")
        process.arguments = [database, sql]
        let output = Pipe()
        process.standardOutput = output
        try process.run()
        process.waitUntilExit()
        XCTAssertEqual(process.terminationStatus, 0, "sqlite3 \(sql)")
        return String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            .trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// A tmpfs of its own under the test's folder; skips the test where none can be mounted.
    private func mountTmpfs(_ name: String, options: String) throws -> URL {
        let mount = folder.appendingPathComponent(name)
        try FileManager.default.createDirectory(at: mount, withIntermediateDirectories: true)
        guard shell("/bin/mount", ["-t", "tmpfs", "-o", options, "tmpfs", mount.path]) == 0 else {
            throw XCTSkip("cannot mount a tmpfs (\(options)) here: it needs root and mount rights")
        }
        return mount
    }

    private func unmount(_ mount: URL) { _ = shell("/bin/umount", ["-l", mount.path]) }

    private func shell(_ tool: String, _ arguments: [String]) -> Int32 {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: tool)
        process.arguments = arguments
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        guard (try? process.run()) != nil else { return -1 }
        process.waitUntilExit()
        return process.terminationStatus
    }
}
