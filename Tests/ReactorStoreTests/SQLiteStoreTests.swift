import Foundation
import ReactorStore
import TestSupport
import XCTest

/// The SQLite engine through the seam alone, on real files: what a commit keeps, what a
/// delete removes, and that a late write never brings a deleted session back.
final class SQLiteStoreTests: XCTestCase {
    private var folder: URL!

    override func setUpWithError() throws {
        folder = FileManager.default.temporaryDirectory.appendingPathComponent("reactord-store-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
    }

    override func tearDownWithError() throws { try? FileManager.default.removeItem(at: folder) }

    private func write(
        _ id: String, version: UInt64, isNew: Bool = false, lastActive: Double? = nil,
        events: [StoredEvent] = []
    ) -> StoreChange {
        .session(
            SessionWrite(
                id: id, kind: "counter", isNew: isNew, stateJSON: Array(#"{"count":\#(version)}"#.utf8),
                version: version, createdAt: 1_000, lastActive: lastActive, events: events))
    }

    private func event(_ seq: UInt64) -> StoredEvent {
        StoredEvent(seq: seq, pulse: seq % 2 == 0 ? "alert" : nil, json: Array(#"{"count":\#(seq)}"#.utf8))
    }

    func testACommitKeepsStateVersionHistoryAndUser() throws {
        let store = try SQLiteStore(path: folder.appendingPathComponent("a.sqlite").path)
        defer { store.close() }
        try store.commit(
            [
                write("s1", version: 0, isNew: true, lastActive: 1_000),
                write("s1", version: 3, lastActive: 2_000, events: [event(1), event(2), event(3)]),
                .user(Array(#"{"id":"u","name":"n"}"#.utf8)),
            ], historyLength: 2)
        let session = try XCTUnwrap(try store.session("s1", historyLength: 2))
        XCTAssertEqual(session.version, 3)
        XCTAssertEqual(String(decoding: session.stateJSON, as: UTF8.self), #"{"count":3}"#)
        XCTAssertEqual(session.lastActive, 2_000)
        XCTAssertEqual(session.events, [event(2), event(3)], "the newest historyLength events, oldest first")
        XCTAssertEqual(try store.loadUser().map { String(decoding: $0, as: UTF8.self) }, #"{"id":"u","name":"n"}"#)
        XCTAssertEqual(try store.sessionCount(), 1)
        XCTAssertEqual(try store.sessions(lastActiveBefore: 2_001, limit: 10), ["s1"])
        XCTAssertEqual(try store.sessions(lastActiveBefore: 2_000, limit: 10), [])
    }

    /// A session's activity as it leaves memory moves its stored time only later, and writes
    /// nothing for a session that is gone.
    /// The file moved, deleted or replaced while the store has it open: a commit into it would be
    /// lost to every restart, so it fails, naming what happened, and so does the probe's check.
    func testACommitFailsOnceTheFileIsNoLongerAtItsPath() throws {
        for change in ["moved", "deleted", "replaced"] {
            let path = folder.appendingPathComponent("\(change).sqlite").path
            let store = try SQLiteStore(path: path)
            defer { store.close() }
            try store.commit([write("s", version: 0, isNew: true)], historyLength: 10)
            XCTAssertNil(store.fileProblem())
            switch change {
            case "moved": try FileManager.default.moveItem(atPath: path, toPath: path + ".old")
            case "deleted": try FileManager.default.removeItem(atPath: path)
            default:
                try FileManager.default.moveItem(atPath: path, toPath: path + ".old")
                FileManager.default.createFile(atPath: path, contents: Data())
            }
            let problem = try XCTUnwrap(store.fileProblem(), change)
            XCTAssertTrue(problem.contains(path), problem)
            XCTAssertThrowsError(try store.commit([write("s", version: 1)], historyLength: 10), change) { error in
                guard case .unavailable = error as? StoreError else { return XCTFail("\(error)") }
            }
        }
    }

    func testActivityMovesTheStoredTimeOnlyLater() throws {
        let store = try SQLiteStore(path: folder.appendingPathComponent("t.sqlite").path)
        defer { store.close() }
        try store.commit([write("s1", version: 0, isNew: true, lastActive: 1_000)], historyLength: 2)
        try store.commit(
            [.activity(id: "s1", lastActive: 3_000), .activity(id: "gone", lastActive: 3_000)], historyLength: 2)
        XCTAssertEqual(try store.session("s1", historyLength: 2)?.lastActive, 3_000)
        try store.commit([.activity(id: "s1", lastActive: 2_000)], historyLength: 2)
        XCTAssertEqual(try store.session("s1", historyLength: 2)?.lastActive, 3_000, "never moved back")
        XCTAssertEqual(try store.sessionCount(), 1)
    }

    /// The WAL's file is reused once checkpointed, so it stays near SQLite's autocheckpoint
    /// (1,000 pages). A statement left on a row kept its connection's snapshot, and every frame
    /// after it: the action log's sweep did, and the file grew by every commit's pages (a GB in
    /// 12 s of actions) for as long as the server ran.
    func testTheWALStaysBoundedAfterTheActionLogsSweep() throws {
        let path = folder.appendingPathComponent("w.sqlite").path
        let store = try SQLiteStore(path: path)
        defer { store.close() }
        try store.commit([write("s1", version: 0, isNew: true)], historyLength: 10)
        let padding = String(repeating: "x", count: 32_000)
        for version: UInt64 in 1...1_000 {  // 32 MB of states: the autocheckpoint's 4 MB eight times over
            let state = Array(#"{"count":\#(version),"padding":"\#(padding)"}"#.utf8)
            try store.commit(
                [
                    .session(
                        SessionWrite(
                            id: "s1", kind: "counter", isNew: false, stateJSON: state, version: version,
                            createdAt: 1_000, lastActive: nil, events: [event(version)]))
                ], historyLength: 10)
            if version % 50 == 0 {
                try store.commit(
                    [.forgetLoggedActions(before: 1e9, limit: 10)], historyLength: 10, actionLogLength: 100)
            }
            if version % 10 == 0 { XCTAssertNotNil(try store.session("s1", historyLength: 10)) }
        }
        let wal = try FileManager.default.attributesOfItem(atPath: path + "-wal")[.size] as? Int ?? 0
        XCTAssertLessThan(wal, 8_000_000, "the WAL's file grew past its checkpoints")
    }

    /// The checkpointer's thread copies the WAL into the file beside the writer, a few commits
    /// in, long before the writer's own copy at 1,800 frames: its connection had never read the
    /// file, so it did not know it was a WAL database, and each of its passes copied nothing. The
    /// WAL then grew to ~7 MB, and a small disk filled with it stayed full.
    func testTheCheckpointerCopiesTheWALIntoTheFileBesideTheWriter() throws {
        let path = folder.appendingPathComponent("c.sqlite").path
        let store = try SQLiteStore(path: path)
        defer { store.close() }
        try store.commit([write("s1", version: 0, isNew: true)], historyLength: 10)
        for version: UInt64 in 1...20 {
            try store.commit([write("s1", version: version, events: [event(version)])], historyLength: 10)
        }
        func fileSize() -> Int { (try? FileManager.default.attributesOfItem(atPath: path)[.size] as? Int) ?? 0 }
        let copied = waitUntil(timeout: 5) { fileSize() > 4_096 }
        XCTAssertTrue(copied, "the file holds \(fileSize()) bytes: nothing was copied out of the WAL")
    }

    func testAnExpiryLeavesASessionUsedSinceItWasFoundExpired() throws {
        let store = try SQLiteStore(path: folder.appendingPathComponent("e.sqlite").path)
        defer { store.close() }
        try store.commit(
            [
                write("used", version: 1, isNew: true, lastActive: 5_000, events: [event(1)]),
                write("idle", version: 1, isNew: true, lastActive: 1_000, events: [event(1)]),
            ], historyLength: 10)
        let refused = try store.commit(
            [
                .delete(id: "used", reason: "expired", idleBefore: 2_000),
                .delete(id: "idle", reason: "expired", idleBefore: 2_000),
            ], historyLength: 10)
        XCTAssertEqual(refused, ["used"], "said, so that nothing counts it as gone")
        XCTAssertEqual(try store.session("used", historyLength: 10)?.events, [event(1)], "it stays, with its history")
        XCTAssertNil(try store.session("idle", historyLength: 10))
    }

    func testALateWriteNeverBringsADeletedSessionBack() throws {
        let store = try SQLiteStore(path: folder.appendingPathComponent("b.sqlite").path)
        defer { store.close() }
        try store.commit([write("s1", version: 0, isNew: true, lastActive: 1_000)], historyLength: 10)
        try store.commit([.delete(id: "s1", reason: "deleted")], historyLength: 10)
        // Writes of a session deleted meanwhile, with and without an activity time.
        try store.commit(
            [
                write("s1", version: 1, lastActive: 3_000, events: [event(1)]),
                write("s1", version: 2, events: [event(2)]),
            ], historyLength: 10)
        XCTAssertNil(try store.session("s1", historyLength: 10))
        XCTAssertEqual(try store.sessionCount(), 0)
        store.close()
        let check = try SQLiteStore(path: folder.appendingPathComponent("b.sqlite").path)
        defer { check.close() }
        XCTAssertNil(try check.session("s1", historyLength: 10))
        // Were any late events kept, a row under the same id would show them (ids are never
        // reused by the server; here it is the way to look at the events table).
        try check.commit([write("s1", version: 0, isNew: true, lastActive: 1_000)], historyLength: 10)
        XCTAssertEqual(try check.session("s1", historyLength: 10)?.events, [], "no orphan events")
    }

    func testAnswersAreKeptWithTheirChangeOnlyAndForgottenOnceExpired() throws {
        let store = try SQLiteStore(path: folder.appendingPathComponent("k.sqlite").path)
        defer { store.close() }
        func answer(_ key: String, session: String?, expires: Double = 5_000, body: String = "{}") -> StoredAnswer {
            StoredAnswer(
                scope: "alice", key: key, request: "digest-\(key)", status: 200,
                headers: [.init("Content-Type", "application/json"), .init("ETag", "\"1\"")],
                body: Array(body.utf8), expires: expires, session: session)
        }
        var created = SessionWrite(
            id: "s1", kind: "counter", isNew: true, stateJSON: Array("{}".utf8), version: 0,
            createdAt: 1_000, lastActive: 1_000, events: [])
        created.answers = [answer("k1", session: "s1", body: #"{"a":1}"#)]
        try store.commit([.session(created)], historyLength: 10)
        XCTAssertEqual(try store.answer(scope: "alice", key: "k1"), answer("k1", session: nil, body: #"{"a":1}"#))
        XCTAssertNil(try store.answer(scope: "bob", key: "k1"), "a key is its caller's")

        // A write to a session deleted meanwhile keeps nothing, its answer neither; nor does an
        // expiry's refused delete; a key kept keeps its first answer.
        var late = SessionWrite(
            id: "gone", kind: "counter", isNew: false, stateJSON: Array("{}".utf8), version: 1,
            createdAt: 1_000, lastActive: nil, events: [])
        late.answers = [answer("k2", session: "gone")]
        try store.commit(
            [
                .session(late), .delete(id: "s1", reason: "expired", idleBefore: 500),
                .answer(answer("k3", session: "s1")), .answer(answer("k1", session: nil, body: "other")),
                .answer(answer("old", session: nil, expires: 10)),
            ], historyLength: 10)
        XCTAssertNil(try store.answer(scope: "alice", key: "k2"))
        XCTAssertNil(try store.answer(scope: "alice", key: "k3"))
        XCTAssertEqual(try store.answer(scope: "alice", key: "k1")?.body, Array(#"{"a":1}"#.utf8))
        XCTAssertEqual(try store.answerCount(), 2)
        // Forgotten oldest first: "old" waits for k1, kept before it and for longer.
        try store.commit([.forgetAnswers(expiredBefore: 100, limit: 10)], historyLength: 10)
        XCTAssertNotNil(try store.answer(scope: "alice", key: "old"))
        try store.commit([.forgetAnswers(expiredBefore: 5_001, limit: 10)], historyLength: 10)
        XCTAssertNil(try store.answer(scope: "alice", key: "old"), "expired: forgotten")
        XCTAssertNil(try store.answer(scope: "alice", key: "k1"))
    }

    func testAnEmptyUserClearsIt() throws {
        let store = try SQLiteStore(path: folder.appendingPathComponent("c.sqlite").path, sync: .full)
        defer { store.close() }
        try store.commit([.user(Array("{}".utf8))], historyLength: 1)
        try store.commit([.user(nil)], historyLength: 1)
        XCTAssertNil(try store.loadUser())
    }

    func testStoreLocationsParse() throws {
        XCTAssertEqual(try StoreLocation(parsing: "memory"), .memory)
        XCTAssertEqual(try StoreLocation(parsing: "sqlite:a.sqlite"), .sqlite(path: "a.sqlite"))
        XCTAssertEqual(
            try StoreLocation(parsing: "sqlite:/d/a.sqlite?sync=full"), .sqlite(path: "/d/a.sqlite", sync: .full))
        XCTAssertThrowsError(try StoreLocation(parsing: "sqlite:"))
        XCTAssertThrowsError(try StoreLocation(parsing: "sqlite:a?sync=sometimes"))
        // An unknown option named a new, empty file ("r.sqlite?synchronous=full"), as if every session were gone.
        for text in ["sqlite:/x/r.sqlite?synchronous=full", "sqlite:r.sqlite?foo=bar", "sqlite:a?b?sync=full"] {
            XCTAssertThrowsError(try StoreLocation(parsing: text), text) { error in
                XCTAssertTrue("\(error)".contains("no option"), "\(error)")
            }
        }
        XCTAssertThrowsError(try StoreLocation(parsing: "redis://x"))
    }
}

extension SQLiteStoreTests {
    /// Schema 2 keeps a session's owner; a file of schema 1 (written before owners existed)
    /// is migrated in place, its sessions kept with no owner.
    func testOwnersAreKeptAndAVersionOneFileIsMigrated() throws {
        let path = folder.appendingPathComponent("v1.sqlite").path
        let v1 = """
            CREATE TABLE reactord_schema (version INTEGER NOT NULL); INSERT INTO reactord_schema VALUES (1);
            CREATE TABLE sessions (id TEXT PRIMARY KEY NOT NULL, kind TEXT NOT NULL, state TEXT NOT NULL,
              version INTEGER NOT NULL, created_at REAL NOT NULL, last_active REAL NOT NULL) WITHOUT ROWID;
            CREATE INDEX sessions_by_last_active ON sessions (last_active);
            CREATE TABLE events (session TEXT NOT NULL, seq INTEGER NOT NULL, pulse TEXT, data TEXT NOT NULL,
              PRIMARY KEY (session, seq)) WITHOUT ROWID;
            CREATE TABLE global_user (only INTEGER PRIMARY KEY CHECK (only = 1), data TEXT NOT NULL);
            INSERT INTO sessions VALUES ('old', 'counter', '{"count":4}', 4, 1000, 1000);
            """
        try runSQLite(path, v1)

        let store = try SQLiteStore(path: path)
        defer { store.close() }
        let old = try XCTUnwrap(try store.session("old", historyLength: 10))
        XCTAssertEqual(old.version, 4)
        XCTAssertNil(old.owner)
        try store.commit(
            [
                .session(
                    SessionWrite(
                        id: "new", kind: "counter", owner: "alice", isNew: true,
                        stateJSON: Array("{}".utf8), version: 0, createdAt: 1, lastActive: 1,
                        events: []))
            ], historyLength: 10)
        XCTAssertEqual(try store.session("new", historyLength: 10)?.owner, "alice")
    }
}

extension SQLiteStoreTests {
    /// Runs `sql` on the file at `path` with the sqlite3 command: a file as another program (or an
    /// older reactord) wrote it.
    func runSQLite(_ path: String, _ sql: String) throws {
        let sqlite = Process()
        sqlite.executableURL = URL(fileURLWithPath: "/usr/bin/sqlite3")
        sqlite.arguments = [path, sql]
        try sqlite.run()
        sqlite.waitUntilExit()
        XCTAssertEqual(sqlite.terminationStatus, 0, sql)
    }
}

// MARK: - Action log (the bodies are ActionLogChecks', shared with PostgresStoreTests)

extension SQLiteStoreTests {
    private func onAFreshStore(_ check: (SQLiteStore) throws -> Void) throws {
        let store = try SQLiteStore(path: folder.appendingPathComponent("log-\(UUID().uuidString).sqlite").path)
        defer { store.close() }
        try check(store)
    }

    func testActionLogEntriesAreWrittenWithTheirCommitAndReadInPages() throws {
        try onAFreshStore(ActionLogChecks.checkPagesAndReload)
    }

    func testActionLogIsTrimmedToItsLength() throws { try onAFreshStore(ActionLogChecks.checkTrimming) }

    func testActionLogGoesWithItsSessionAndOldEntriesAreForgotten() throws {
        try onAFreshStore(ActionLogChecks.checkDeleteAndForget)
    }

    func testStateAtAVersion() throws { try onAFreshStore(ActionLogChecks.checkStateAtVersion) }

    func testActionLogEntriesWithTheirEventsOutliveEitherTrim() throws {
        try onAFreshStore(ActionLogChecks.checkEntriesWithTheirEvents)
    }

    func testSessionsAreListedInPagesInByteOrder() throws { try onAFreshStore(ActionLogChecks.checkSessionsInPages) }

    /// A file of schema 5 kept every entry as a row of its own, its number in its key: migrated in
    /// place, its entries read as before, and the next ones, riding on their events, follow them.
    func testAVersionFiveActionLogIsMigratedAndContinued() throws {
        let path = folder.appendingPathComponent("v5.sqlite").path
        let top = (1 << 62) + (1 << 61)
        let v5 = """
            CREATE TABLE reactord_schema (version INTEGER NOT NULL); INSERT INTO reactord_schema VALUES (5);
            CREATE TABLE sessions (id TEXT PRIMARY KEY NOT NULL, kind TEXT NOT NULL, state TEXT NOT NULL,
              version INTEGER NOT NULL, created_at REAL NOT NULL, last_active REAL NOT NULL, owner TEXT) WITHOUT ROWID;
            CREATE INDEX sessions_by_last_active ON sessions (last_active);
            CREATE INDEX sessions_by_owner ON sessions (owner) WHERE owner IS NOT NULL;
            CREATE TABLE events (session TEXT NOT NULL, seq INTEGER NOT NULL, pulse TEXT, data TEXT NOT NULL,
              cause TEXT, origin INTEGER, first_version INTEGER, version INTEGER, subject TEXT, idempotency_key TEXT,
              time REAL, PRIMARY KEY (session, seq)) WITHOUT ROWID;
            CREATE TABLE global_user (only INTEGER PRIMARY KEY CHECK (only = 1), data TEXT NOT NULL);
            CREATE TABLE answers (scope TEXT NOT NULL, key TEXT NOT NULL, request TEXT NOT NULL, status INTEGER NOT NULL,
              headers TEXT NOT NULL, body TEXT NOT NULL, expires REAL NOT NULL, PRIMARY KEY (scope, key)) WITHOUT ROWID;
            CREATE INDEX answers_by_expiry ON answers (expires);
            INSERT INTO sessions VALUES ('old', 'counter', '{"count":2}', 2, 1000, 1000, NULL);
            INSERT INTO events (session, seq, data) VALUES ('old', 1, '{"count":1}'), ('old', 2, '{"count":2}');
            INSERT INTO events (session, seq, data, cause, first_version, version, time) VALUES
              ('old', \(top - 1), '{"type":"increment"}', 'action', 1, 1, 1000.5),
              ('old', \(top - 2), '', 'user', 2, 2, 1001.5);
            """
        try runSQLite(path, v5)

        let store = try SQLiteStore(path: path)
        defer { store.close() }
        let old = [
            LoggedAction(
                number: 1, cause: .action, firstVersion: 1, version: 1, json: Array(#"{"type":"increment"}"#.utf8),
                time: 1000.5),
            LoggedAction(number: 2, cause: .user, firstVersion: 2, version: 2, time: 1001.5),
        ]
        XCTAssertEqual(try store.loggedActions(of: "old", after: nil, limit: 10), old)
        XCTAssertEqual(try store.session("old", historyLength: 10)?.lastLoggedAction, 2)
        let next = ActionLogChecks.entry(3, version: 3)
        try store.commit(
            [
                ActionLogChecks.write(
                    "old", version: 3,
                    events: [
                        StoredEvent(
                            seq: 3, pulse: nil,
                            json: Array(#"{"count":3}"#.utf8))
                    ],
                    logged: [next])
            ], historyLength: 10, actionLogLength: 10)
        XCTAssertEqual(try store.loggedActions(of: "old", after: nil, limit: 10), old + [next])
        XCTAssertEqual(try store.loggedActions(of: "old", after: 1, limit: 1), [old[1]])
        XCTAssertEqual(try store.session("old", historyLength: 10)?.lastLoggedAction, 3)
        XCTAssertEqual(try store.state(of: "old", at: 2), .found(Array(#"{"count":2}"#.utf8)))
    }

    /// The newest entry's number survives a restart (it numbers the next one).
    func testTheLastLoggedActionIsReadAfterAReopen() throws {
        let path = folder.appendingPathComponent("reopen.sqlite").path
        let store = try SQLiteStore(path: path)
        try store.commit(
            [
                ActionLogChecks.write("s1", version: 0, isNew: true),
                ActionLogChecks.write(
                    "s1", version: 1,
                    logged: [
                        ActionLogChecks.entry(1, version: 1),
                        ActionLogChecks.entry(2, version: 1, changed: false),
                    ]),
            ],
            historyLength: 10, actionLogLength: 10)
        store.close()
        let reopened = try SQLiteStore(path: path)
        defer { reopened.close() }
        XCTAssertEqual(try reopened.session("s1", historyLength: 10)?.lastLoggedAction, 2)
    }
}

// MARK: - Idempotency keys

extension SQLiteStoreTests {
    private func answer(_ key: String, scope: String = "alice", expires: Double, body: String = "{}") -> StoredAnswer {
        StoredAnswer(
            scope: scope, key: key, request: "digest-\(key)", status: 201,
            headers: [.init("Content-Type", "application/json"), .init("Location", "/sessions/s")],
            body: Array(body.utf8), expires: expires, session: nil)
    }

    /// A file of schema 6 kept its answers in a table keyed by (scope, key), with an index on
    /// the expiry: migrated in place, in the order they expire, and they replay, expire and are
    /// followed by new ones as before.
    func testAVersionSixAnswersTableIsMigrated() throws {
        let path = folder.appendingPathComponent("v6.sqlite").path
        let v6 = """
            CREATE TABLE reactord_schema (version INTEGER NOT NULL); INSERT INTO reactord_schema VALUES (6);
            CREATE TABLE sessions (id TEXT PRIMARY KEY NOT NULL, kind TEXT NOT NULL, state TEXT NOT NULL,
              version INTEGER NOT NULL, created_at REAL NOT NULL, last_active REAL NOT NULL, owner TEXT) WITHOUT ROWID;
            CREATE INDEX sessions_by_last_active ON sessions (last_active);
            CREATE INDEX sessions_by_owner ON sessions (owner) WHERE owner IS NOT NULL;
            CREATE TABLE events (session TEXT NOT NULL, seq INTEGER NOT NULL, pulse TEXT, data TEXT NOT NULL,
              cause TEXT, origin INTEGER, first_version INTEGER, version INTEGER, subject TEXT, idempotency_key TEXT,
              time REAL, number INTEGER, action TEXT, PRIMARY KEY (session, seq)) WITHOUT ROWID;
            CREATE TABLE global_user (only INTEGER PRIMARY KEY CHECK (only = 1), data TEXT NOT NULL);
            CREATE TABLE answers (scope TEXT NOT NULL, key TEXT NOT NULL, request TEXT NOT NULL, status INTEGER NOT NULL,
              headers TEXT NOT NULL, body TEXT NOT NULL, expires REAL NOT NULL, PRIMARY KEY (scope, key)) WITHOUT ROWID;
            CREATE INDEX answers_by_expiry ON answers (expires);
            INSERT INTO answers VALUES
              ('alice', 'late', 'digest-late', 201, 'Content-Type: application/json
            Location: /sessions/s
            ', '{"a":1}', 9000),
              ('alice', 'early', 'digest-early', 201, 'Content-Type: application/json
            Location: /sessions/s
            ', '{}', 50),
              ('', 'early', 'digest-early', 201, 'Content-Type: application/json
            Location: /sessions/s
            ', '{}', 60);
            """
        try runSQLite(path, v6)

        let store = try SQLiteStore(path: path)
        XCTAssertEqual(try store.answer(scope: "alice", key: "late"), answer("late", expires: 9000, body: #"{"a":1}"#))
        XCTAssertEqual(try store.answer(scope: "", key: "early"), answer("early", scope: "", expires: 60))
        XCTAssertNil(try store.answer(scope: "bob", key: "late"), "a key is its caller's")
        // The first answer stays; a new key follows the old ones; the oldest expire first.
        try store.commit(
            [.answer(answer("late", expires: 9500, body: "other")), .answer(answer("new", expires: 9600))],
            historyLength: 10)
        XCTAssertEqual(try store.answer(scope: "alice", key: "late")?.body, Array(#"{"a":1}"#.utf8))
        try store.commit([.forgetAnswers(expiredBefore: 100, limit: 10)], historyLength: 10)
        XCTAssertNil(try store.answer(scope: "alice", key: "early"))
        XCTAssertNil(try store.answer(scope: "", key: "early"))
        XCTAssertEqual(try store.answerCount(), 2)
        store.close()

        let reopened = try SQLiteStore(path: path)
        defer { reopened.close() }
        XCTAssertEqual(try reopened.answer(scope: "alice", key: "new"), answer("new", expires: 9600))
        XCTAssertEqual(try reopened.answer(scope: "alice", key: "late")?.body, Array(#"{"a":1}"#.utf8))
    }

    /// Trimmed oldest first, up to the first answer not expired: one kept for longer than
    /// those after it (a TTL shortened since) holds them back until it expires.
    func testExpiredAnswersAreForgottenOldestFirst() throws {
        let store = try SQLiteStore(path: folder.appendingPathComponent("trim.sqlite").path)
        defer { store.close() }
        var answers = (0..<20).map { answer("k\($0)", expires: 10) }
        answers.append(answer("long", expires: 9000))
        answers += (20..<25).map { answer("k\($0)", expires: 10) }
        try store.commit(answers.map(StoreChange.answer), historyLength: 10)
        try store.commit([.forgetAnswers(expiredBefore: 100, limit: 5)], historyLength: 10)
        XCTAssertEqual(try store.answerCount(), 21)
        XCTAssertNil(try store.answer(scope: "alice", key: "k4"))
        XCTAssertNotNil(try store.answer(scope: "alice", key: "k5"))
        try store.commit([.forgetAnswers(expiredBefore: 100, limit: 100)], historyLength: 10)
        XCTAssertEqual(try store.answerCount(), 6, "the 5 after the long one wait for it")
        try store.commit([.forgetAnswers(expiredBefore: 10_000, limit: 100)], historyLength: 10)
        XCTAssertEqual(try store.answerCount(), 0)
    }

    /// With the keys of the file known (read on a thread of their own after the open), a key
    /// never kept is answered without a read and every kept one is still found, those kept
    /// before the open and those kept since.
    func testKeysKeptBeforeAndAfterAnOpenAreFound() throws {
        let path = folder.appendingPathComponent("keys.sqlite").path
        let store = try SQLiteStore(path: path)
        try store.commit((0..<5000).map { .answer(answer("old-\($0)", expires: 9000)) }, historyLength: 10)
        store.close()
        let reopened = try SQLiteStore(path: path)
        defer { reopened.close() }
        try reopened.commit([.answer(answer("new", expires: 9000))], historyLength: 10)
        let deadline = Date().addingTimeInterval(10)
        while !reopened.knowsItsAnswerKeys && Date() < deadline { usleep(1000) }
        XCTAssertTrue(reopened.knowsItsAnswerKeys)
        for index in stride(from: 0, to: 5000, by: 7) {
            XCTAssertNotNil(try reopened.answer(scope: "alice", key: "old-\(index)"), "old-\(index)")
        }
        XCTAssertNotNil(try reopened.answer(scope: "alice", key: "new"))
        XCTAssertNil(try reopened.answer(scope: "alice", key: "never"))
        XCTAssertNil(try reopened.answer(scope: "bob", key: "new"))
    }
}
