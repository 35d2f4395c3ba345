import ReactorStore
import XCTest

/// The action log as every engine keeps it: one body per behaviour, run on the SQLite engine
/// by SQLiteStoreTests and on the PostgreSQL engine by PostgresStoreTests, so the two answer
/// alike. Each takes an empty store.
enum ActionLogChecks {
    static func write(
        _ id: String, version: UInt64, isNew: Bool = false, owner: String? = nil, lastActive: Double? = nil,
        events: [StoredEvent] = [], logged: [LoggedAction] = []
    ) -> StoreChange {
        .session(
            SessionWrite(
                id: id, kind: "counter", owner: owner, isNew: isNew,
                stateJSON: Array(#"{"count":\#(version)}"#.utf8), version: version, createdAt: 1_000,
                lastActive: lastActive, events: events, loggedActions: logged))
    }

    /// An action that made version `version` (or, `changed` false, changed nothing there).
    static func entry(_ number: UInt64, version: UInt64, changed: Bool = true, time: Double = 1_000.25) -> LoggedAction
    {
        LoggedAction(
            number: number, cause: .action, firstVersion: changed ? version : nil, version: version,
            json: Array(#"{"type":"increment","n":\#(number),"q":"\"\\"}"#.utf8), subject: "alice",
            idempotencyKey: "key-\(number)", time: time)
    }

    /// Entries written with their commit (several writes of a session in one batch, entries
    /// that changed nothing, an effect and the user's change), read back whole and in pages
    /// that never end inside a version; the newest number comes back with the session.
    static func checkPagesAndReload(_ store: some StoreEngine) throws {
        let effect = LoggedAction(number: 3, cause: .effect, origin: 1, firstVersion: 2, version: 2, time: 1_001)
        let user = LoggedAction(number: 4, cause: .user, firstVersion: 3, version: 3, time: 1_002)
        let entries = [
            entry(1, version: 1), entry(2, version: 1, changed: false), effect, user,
            entry(5, version: 3, changed: false),
        ]
        XCTAssertEqual(
            try store.commit(
                [
                    write("s1", version: 0, isNew: true), write("empty", version: 0, isNew: true),
                    write("s1", version: 2, logged: Array(entries[0..<3])),
                    write("s1", version: 3, logged: Array(entries[3...])),
                ],
                historyLength: 10, actionLogLength: 100), [])
        XCTAssertEqual(try store.loggedActions(of: "s1", after: 0, limit: 10), entries)
        XCTAssertEqual(
            try store.loggedActions(of: "s1", after: 0, limit: 1), Array(entries[0...1]),
            "the page takes the rest of version 1")
        XCTAssertEqual(try store.loggedActions(of: "s1", after: 1, limit: 1), [effect])
        XCTAssertEqual(try store.loggedActions(of: "s1", after: 2, limit: 1), Array(entries[3...]))
        XCTAssertEqual(try store.loggedActions(of: "s1", after: 2, limit: 2), Array(entries[3...]))
        XCTAssertEqual(try store.loggedActions(of: "s1", after: 3, limit: 10), [])
        XCTAssertEqual(try store.loggedActions(of: "s1", after: 0, limit: 0), [])
        XCTAssertEqual(try store.loggedActions(of: "nope", after: 0, limit: 10), [])
        // An action that changed nothing before any change is at version 0: only a read from the first entry has it.
        let first = entry(1, version: 0, changed: false)
        try store.commit(
            [write("zero", version: 0, isNew: true, logged: [first])], historyLength: 10, actionLogLength: 100)
        XCTAssertEqual(try store.loggedActions(of: "zero", after: nil, limit: 10), [first])
        XCTAssertEqual(try store.loggedActions(of: "zero", after: 0, limit: 10), [])
        XCTAssertEqual(try store.session("s1", historyLength: 10)?.lastLoggedAction, 5)
        XCTAssertEqual(try store.session("empty", historyLength: 10)?.lastLoggedAction, 0)

        // actionLogLength 0: nothing is written, the write itself is.
        try store.commit(
            [write("s1", version: 4, logged: [entry(6, version: 4)])], historyLength: 10, actionLogLength: 0)
        try store.commit([write("s1", version: 5, logged: [entry(7, version: 5)])], historyLength: 10)
        XCTAssertEqual(try store.session("s1", historyLength: 10)?.version, 5)
        XCTAssertEqual(try store.session("s1", historyLength: 10)?.lastLoggedAction, 5)
        XCTAssertEqual(try store.loggedActions(of: "s1", after: 3, limit: 10), [])
    }

    /// A session keeps its newest `actionLogLength` entries, trimmed in steps of 64: more,
    /// never fewer, and both engines the same ones.
    static func checkTrimming(_ store: some StoreEngine) throws {
        try store.commit(
            [write("s1", version: 0, isNew: true), write("s2", version: 0, isNew: true)], historyLength: 10)
        for version in stride(from: 10, through: 300, by: 10) {
            let logged = (version - 9...version).map { entry(UInt64($0), version: UInt64($0)) }
            try store.commit(
                [write("s1", version: UInt64(version), logged: logged)], historyLength: 10, actionLogLength: 10)
        }
        // The last trim came when the oldest kept passed 256 (at 260); none since.
        XCTAssertEqual(try store.loggedActions(of: "s1", after: 0, limit: 1_000).map(\.number), Array(261...300))
        XCTAssertEqual(try store.loggedActions(of: "s1", after: 290, limit: 1_000).map(\.number), Array(291...300))
        // One write of more entries than are kept: its newest ones.
        try store.commit(
            [write("s2", version: 100, logged: (1...100).map { entry($0, version: $0) })],
            historyLength: 10, actionLogLength: 10)
        XCTAssertEqual(try store.loggedActions(of: "s2", after: 0, limit: 1_000).map(\.number), Array(91...100))
        XCTAssertEqual(try store.session("s2", historyLength: 10)?.lastLoggedAction, 100)
    }

    /// A session's delete erases its log (and a late write to it brings none back); entries
    /// older than a time are forgotten, at most `limit` at a time.
    static func checkDeleteAndForget(_ store: some StoreEngine) throws {
        try store.commit(
            [
                write("s1", version: 0, isNew: true), write("s2", version: 0, isNew: true),
                write(
                    "s1", version: 3,
                    logged: [
                        entry(1, version: 1, time: 1_000), entry(2, version: 2, time: 2_000),
                        entry(3, version: 3, time: 3_000),
                    ]),
                write(
                    "s2", version: 2, logged: [entry(1, version: 1, time: 1_000), entry(2, version: 2, time: 3_000)]),
            ],
            historyLength: 10, actionLogLength: 100)
        func numbers(_ id: String) throws -> [UInt64] {
            try store.loggedActions(of: id, after: 0, limit: 10).map(\.number)
        }
        try store.commit([.forgetLoggedActions(before: 2_500, limit: 2)], historyLength: 10, actionLogLength: 100)
        XCTAssertEqual(try numbers("s1").count + numbers("s2").count, 3, "two of the three old entries forgotten")
        try store.commit([.forgetLoggedActions(before: 2_500, limit: 10)], historyLength: 10, actionLogLength: 100)
        XCTAssertEqual(try numbers("s1"), [3])
        XCTAssertEqual(try numbers("s2"), [2])
        XCTAssertEqual(try store.session("s1", historyLength: 10)?.lastLoggedAction, 3)
        // A session's newest entry stays whatever its age: its numbering goes on after it.
        try store.commit([.forgetLoggedActions(before: 9_000, limit: 10)], historyLength: 10, actionLogLength: 100)
        XCTAssertEqual(try numbers("s1"), [3])
        XCTAssertEqual(try store.session("s2", historyLength: 10)?.lastLoggedAction, 2)

        try store.commit([.delete(id: "s1", reason: "deleted")], historyLength: 10, actionLogLength: 100)
        XCTAssertEqual(try numbers("s1"), [])
        try store.commit(
            [write("s1", version: 4, logged: [entry(4, version: 4)])], historyLength: 10, actionLogLength: 100)
        XCTAssertEqual(try numbers("s1"), [], "a write to a deleted session keeps no entries")
        XCTAssertEqual(try numbers("s2"), [2], "another session's log stays")
    }

    /// The state at a version: the current one, one the history keeps (the newest state event
    /// at or before it; a pulse is none), one it no longer keeps, one not reached yet.
    static func checkStateAtVersion(_ store: some StoreEngine) throws {
        // Odd events are states, even ones pulses; the history keeps 90...100 (90 a pulse).
        let events = (1...100).map {
            StoredEvent(seq: $0, pulse: $0 % 2 == 0 ? "alert" : nil, json: Array("{\"at\":\($0)}".utf8))
        }
        try store.commit(
            [write("s1", version: 0, isNew: true), write("s1", version: 100, events: events)],
            historyLength: 11)
        XCTAssertEqual(try store.state(of: "s1", at: 100), .found(Array(#"{"count":100}"#.utf8)))
        XCTAssertEqual(try store.state(of: "s1", at: 93), .found(Array(#"{"at":93}"#.utf8)))
        XCTAssertEqual(
            try store.state(of: "s1", at: 96), .found(Array(#"{"at":95}"#.utf8)), "the state before the pulse")
        XCTAssertEqual(try store.state(of: "s1", at: 90), .notRetained(oldest: 91))
        XCTAssertEqual(try store.state(of: "s1", at: 0), .notRetained(oldest: 91))
        XCTAssertEqual(try store.state(of: "s1", at: 101), .notYet(current: 100))
        XCTAssertEqual(try store.state(of: "nope", at: 0), .noSession)
        // No state event kept at all: the current version is the oldest there is.
        try store.commit([write("s2", version: 0, isNew: true)], historyLength: 10)
        XCTAssertEqual(try store.state(of: "s2", at: 0), .found(Array(#"{"count":0}"#.utf8)))
        try store.commit([write("s2", version: 2)], historyLength: 10)
        XCTAssertEqual(try store.state(of: "s2", at: 1), .notRetained(oldest: 2))
        // A gap a run with --history 0 left (11...13 made, no event written): the states before
        // it are still known, none in it is the last one before it.
        let older = (1...10).map { StoredEvent(seq: $0, pulse: nil, json: Array("{\"at\":\($0)}".utf8)) }
        try store.commit(
            [write("s3", version: 0, isNew: true), write("s3", version: 10, events: older)], historyLength: 100)
        try store.commit([write("s3", version: 13)], historyLength: 100)
        XCTAssertEqual(try store.state(of: "s3", at: 10), .found(Array(#"{"at":10}"#.utf8)))
        XCTAssertEqual(try store.state(of: "s3", at: 12), .notRetained(oldest: 13), "named: one after the gap")
        XCTAssertEqual(try store.state(of: "s3", at: 11), .notRetained(oldest: 13))
        // A run with history again after the gap: its first state is the oldest after it.
        let newer = (14...15).map { StoredEvent(seq: $0, pulse: nil, json: Array("{\"at\":\($0)}".utf8)) }
        try store.commit([write("s3", version: 15, events: newer)], historyLength: 100)
        XCTAssertEqual(try store.state(of: "s3", at: 12), .notRetained(oldest: 14))
        XCTAssertEqual(try store.state(of: "s3", at: 14), .found(Array(#"{"at":14}"#.utf8)))
    }

    /// Sessions listed in byte order of their ids, a page at a time.
    static func checkSessionsInPages(_ store: some StoreEngine) throws {
        let ids = ["b", "a", "B", "é", "a1", "_"]
        try store.commit(
            ids.enumerated().map { index, id in
                write(
                    id, version: UInt64(index), isNew: true, owner: index % 2 == 0 ? "alice" : nil, lastActive: 2_000.5)
            }, historyLength: 10)
        var pages: [[String]] = []
        var after = ""
        while true {
            let page = try store.sessions(after: after, limit: 2)
            guard let last = page.last else { break }
            pages.append(page.map(\.id))
            after = last.id
        }
        XCTAssertEqual(pages, [["B", "_"], ["a", "a1"], ["b", "é"]])
        XCTAssertEqual(
            try store.sessions(after: "a", limit: 1),
            [
                SessionSummary(
                    id: "a1", kind: "counter", owner: "alice", version: 4, createdAt: 1_000, lastActive: 2_000.5)
            ])
        XCTAssertEqual(
            try store.sessions(after: "_", limit: 1),
            [SessionSummary(id: "a", kind: "counter", owner: nil, version: 1, createdAt: 1_000, lastActive: 2_000.5)])
        XCTAssertEqual(try store.sessions(after: "é", limit: 10), [])
        XCTAssertEqual(try store.sessions(after: "", limit: 0), [])
    }

    /// Entries written with the events they made, as the service writes them: read back whole
    /// whether the history keeps fewer versions than the log keeps entries (the history's trim
    /// must not take them along) or more (the log's trims and its age must not take the events);
    /// the newest number comes back with the session whichever entry it is.
    static func checkEntriesWithTheirEvents(_ store: some StoreEngine) throws {
        func state(_ version: UInt64) -> [UInt8] { Array(#"{"count":\#(version)}"#.utf8) }
        try store.commit(
            [write("short", version: 0, isNew: true), write("long", version: 0, isNew: true)], historyLength: 10)

        // "short": history 10, log 100. Ten actions a commit, one event each, but the tenth changes nothing.
        var version: UInt64 = 0
        var written: [LoggedAction] = []
        for _ in 0..<20 {
            var events: [StoredEvent] = []
            var logged: [LoggedAction] = []
            for index in 0..<10 {
                if index < 9 {
                    version += 1
                    events.append(StoredEvent(seq: version, pulse: nil, json: state(version)))
                }
                logged.append(entry(UInt64(written.count + logged.count + 1), version: version, changed: index < 9))
            }
            try store.commit(
                [write("short", version: version, events: events, logged: logged)],
                historyLength: 10, actionLogLength: 100)
            written += logged
        }
        // The last trim of the log came when its oldest kept passed 64 (at 170): 71...200 are kept.
        let kept = Array(written.dropFirst(70))
        XCTAssertEqual(try store.loggedActions(of: "short", after: nil, limit: 1_000), kept)
        var paged: [LoggedAction] = []
        var after: UInt64? = nil
        while let page = Optional(try store.loggedActions(of: "short", after: after, limit: 7)), let last = page.last {
            paged += page
            after = last.version
        }
        XCTAssertEqual(paged, kept, "pages of 7, each ending between versions")
        XCTAssertEqual(try store.state(of: "short", at: version - 5), .found(state(version - 5)))
        XCTAssertEqual(try store.session("short", historyLength: 10)?.lastLoggedAction, 200, "an entry of its own")
        try store.commit(
            [
                write(
                    "short", version: version + 1,
                    events: [
                        StoredEvent(
                            seq: version + 1, pulse: nil,
                            json: state(version + 1))
                    ],
                    logged: [entry(201, version: version + 1)])
            ], historyLength: 10, actionLogLength: 100)
        XCTAssertEqual(try store.session("short", historyLength: 10)?.lastLoggedAction, 201, "an entry with its event")
        XCTAssertEqual(try store.session("short", historyLength: 0)?.lastLoggedAction, 201, "read with no history")

        // "long": history 1000, log 10; entry n logged at time n.
        let logged = (1...100).map { entry($0, version: $0, time: Double($0)) }
        for batch in 0..<10 {
            let range = batch * 10..<(batch + 1) * 10
            try store.commit(
                [
                    write(
                        "long", version: UInt64(range.upperBound),
                        events: range.map { StoredEvent(seq: UInt64($0 + 1), pulse: nil, json: state(UInt64($0 + 1))) },
                        logged: Array(logged[range]))
                ], historyLength: 1_000, actionLogLength: 10)
        }
        XCTAssertEqual(try store.loggedActions(of: "long", after: nil, limit: 1_000).map(\.number), Array(71...100))
        try store.commit([.forgetLoggedActions(before: 80.5, limit: 100)], historyLength: 1_000, actionLogLength: 10)
        XCTAssertEqual(try store.loggedActions(of: "long", after: nil, limit: 1_000).map(\.number), Array(81...100))
        try store.commit([.forgetLoggedActions(before: 1e9, limit: 10_000)], historyLength: 1_000, actionLogLength: 10)
        XCTAssertEqual(
            try store.loggedActions(of: "long", after: nil, limit: 1_000).map(\.number), [100], "the newest stays")
        XCTAssertEqual(try store.session("long", historyLength: 1_000)?.lastLoggedAction, 100)
        for kept in [1, 50, 75, 100] as [UInt64] {
            XCTAssertEqual(
                try store.state(of: "long", at: kept), .found(state(kept)), "the log's trims leave event \(kept)")
        }
        try store.commit([.delete(id: "long", reason: "deleted")], historyLength: 1_000, actionLogLength: 10)
        XCTAssertEqual(try store.loggedActions(of: "long", after: nil, limit: 1_000), [])
        XCTAssertEqual(try store.state(of: "long", at: 50), .noSession)
    }
}
