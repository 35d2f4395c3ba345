import Foundation
import TestSupport
import XCTest

@testable import ReactorStore

/// The PostgreSQL engine against a real server (scripts/postgres-test-server), each test on a
/// fresh database: what a commit keeps, leases and fencing between two store instances (two
/// nodes), wake-ups, refusals at open, and riding out a PostgreSQL restart.
final class PostgresStoreTests: XCTestCase {
    private var stores: [PostgresStore] = []

    override func tearDown() {
        for store in stores { store.close() }
        stores = []
    }

    private func server() throws -> PostgresServer {
        do {
            return try PostgresServer.shared()
        } catch let unavailable as PostgresServer.Unavailable {
            throw XCTSkip(unavailable.reason)
        }
    }

    private func database(_ name: String = #function) throws -> String {
        try server().createDatabase(String(name.prefix { $0 != "(" }))
    }

    private func open(_ dsn: String, lease: Double = 30, address: String = "http://node") throws -> PostgresStore {
        let store = try PostgresStore(url: dsn, leaseDuration: lease)
        store.advertise(address)
        stores.append(store)
        return store
    }

    /// The wake-ups `store` delivers from now on, once its listener's LISTEN is in place.
    private func wakeups(of store: PostgresStore) -> Locked<[StoreWakeup]> {
        let wakeups = Locked<[StoreWakeup]>([])
        store.listen { wakeup in wakeups.update { $0.append(wakeup) } }
        Thread.sleep(forTimeInterval: 0.3)
        return wakeups
    }

    private func text(_ bytes: [UInt8]?) -> String? { bytes.map { String(decoding: $0, as: UTF8.self) } }

    // MARK: - Schema

    func testTwoStoresOpeningAtOnceCreateTheSchemaOnce() throws {
        let dsn = try database()
        let results = Locked<[Result<PostgresStore, StoreError>]>([])
        DispatchQueue.concurrentPerform(iterations: 3) { _ in
            let result = Result { () throws(StoreError) in try PostgresStore(url: dsn) }
            results.update { $0.append(result) }
        }
        let opened = try results.value.map { try $0.get() }
        stores += opened
        XCTAssertEqual(opened.count, 3)
        try opened[0].commit([write("s1", version: 0, isNew: true)], historyLength: 10)
        XCTAssertEqual(try opened[2].sessionCount(), 1)
        let check = try PostgresConnection(uri: dsn, secrets: [])
        XCTAssertEqual(try check.execute("SELECT version FROM reactord_schema").string(0, 0), "5")
        XCTAssertEqual(try check.execute("SELECT count(*) FROM reactord_schema").string(0, 0), "1")
    }

    func testASchemaOfANewerReactordIsRefused() throws {
        let dsn = try database()
        try open(dsn).close()
        try PostgresConnection(uri: dsn, secrets: []).execute("UPDATE reactord_schema SET version = 99")
        XCTAssertThrowsError(try PostgresStore(url: dsn)) { error in
            guard case let .cannotOpen(message)? = error as? StoreError else { return XCTFail("\(error)") }
            XCTAssertTrue(message.contains("newer reactord") && message.contains("99"), message)
            XCTAssertFalse(message.contains("reactord-test"), message)
        }
    }

    // MARK: - Commit

    func testACommitKeepsStateVersionHistoryOwnerAndUser() throws {
        let store = try open(try database())
        let refused = try store.commit(
            [
                write("s1", version: 0, isNew: true, owner: "alice", lastActive: 1_000),
                write("s1", version: 3, lastActive: 2_000, events: [event(1), event(2), event(3)]),
                .user(Array(#"{"id":"u","name":"n"}"#.utf8)),
            ], historyLength: 2)
        XCTAssertEqual(refused, [])
        let session = try XCTUnwrap(try store.session("s1", historyLength: 2))
        XCTAssertEqual(session.version, 3)
        XCTAssertEqual(session.kind, "counter")
        XCTAssertEqual(session.owner, "alice")
        XCTAssertEqual(text(session.stateJSON), #"{"count":3,"q":"\"\\"}"#)
        XCTAssertEqual(session.createdAt, 1_000)
        XCTAssertEqual(session.lastActive, 2_000)
        XCTAssertEqual(session.events, [event(2), event(3)], "the newest historyLength events, oldest first")
        XCTAssertEqual(text(try store.loadUser()), #"{"id":"u","name":"n"}"#)
        XCTAssertEqual(try store.sessionCount(), 1)
        XCTAssertTrue(store.holds("s1"), "a new session's first write takes its lease")
        // A write without an activity time leaves the stored one.
        try store.commit([write("s1", version: 4, events: [event(4)])], historyLength: 2)
        XCTAssertEqual(try store.session("s1", historyLength: 2)?.lastActive, 2_000)
        XCTAssertNil(try store.session("nope", historyLength: 2))
    }

    func testHistoryIsTrimmedToTheNewestEvents() throws {
        let dsn = try database()
        let store = try open(dsn)
        try store.commit([write("s1", version: 0, isNew: true)], historyLength: 10)
        for version in stride(from: 10, through: 300, by: 10) {
            try store.commit(
                [
                    write(
                        "s1", version: UInt64(version),
                        events: (version - 9...version).map { event(UInt64($0)) })
                ], historyLength: 10)
        }
        let session = try XCTUnwrap(try store.session("s1", historyLength: 10))
        XCTAssertEqual(session.events.map(\.seq), Array(291...300))
        let check = try PostgresConnection(uri: dsn, secrets: [])
        let kept = Int(try check.execute("SELECT count(*) FROM reactord_events").string(0, 0) ?? "") ?? -1
        XCTAssertLessThanOrEqual(kept, 10 + 64 + 10, "trimmed in steps")
    }

    // MARK: - Leases and fencing

    /// A holder at this node's own address that stopped renewing before this node opened was
    /// this node before a restart: taken at once. One that renews after is another live node
    /// given the same address: it keeps its session.
    func testAHolderAtTheSameAddressIsTakenOnlyWhenItStoppedRenewingFirst() throws {
        let dsn = try database()
        let before = try open(dsn, lease: 30, address: "http://same")
        try before.commit(
            [write("s1", version: 0, isNew: true), write("s2", version: 0, isNew: true)], historyLength: 10)
        Thread.sleep(forTimeInterval: 0.05)
        let restarted = try open(dsn, lease: 30, address: "http://same")
        guard case .taken = try restarted.claim("s1", historyLength: 10) else { return XCTFail("not taken") }
        XCTAssertEqual(try before.commit([write("s1", version: 1)], historyLength: 10), ["s1"], "fenced out")

        let renewing = try open(dsn, lease: 30, address: "http://shared")
        try renewing.commit([write("s3", version: 0, isNew: true)], historyLength: 10)
        let twin = try open(dsn, lease: 30, address: "http://shared")
        Thread.sleep(forTimeInterval: 0.05)
        XCTAssertEqual(try renewing.renewLeases(), [])
        guard case .heldElsewhere("http://shared") = try twin.claim("s3", historyLength: 10) else {
            return XCTFail("a live node's session was taken")
        }
        XCTAssertTrue(renewing.holds("s3"))
    }

    /// The holder's group commits, its lease renewals and another node's activity marks all
    /// update many session rows at once: they lock them in one order (by id), so none waits
    /// for the others in a cycle (PostgreSQL would end one after its 1 s deadlock timeout).
    func testCommitsRenewalsAndTouchesOfTheSameSessionsNeverDeadlock() throws {
        let dsn = try database()
        let holder = try open(dsn)
        let other = try open(dsn)
        let ids = (0..<40).map { "s\($0)" }
        try holder.commit(ids.map { write($0, version: 0, isNew: true) }, historyLength: 10)
        let failures = Locked<[String]>([])
        DispatchQueue.concurrentPerform(iterations: 3) { worker in
            for round in 1...150 {
                do {
                    switch worker {
                    case 0:
                        // Newest first, the reverse of the ids' order, and a different order each round.
                        let order = round % 2 == 0 ? ids.reversed() : ids.shuffled()
                        let refused = try holder.commit(
                            order.map { write($0, version: UInt64(round)) }, historyLength: 10)
                        if !refused.isEmpty { failures.update { $0.append("refused \(refused)") } }
                    case 1:
                        let lost = try holder.renewLeases()
                        if !lost.isEmpty { failures.update { $0.append("lost \(lost)") } }
                    default:
                        try other.touch(ids.shuffled())
                    }
                } catch {
                    failures.update { $0.append("\(error)") }
                }
            }
        }
        XCTAssertEqual(failures.value, [])
        XCTAssertEqual(try holder.session("s0", historyLength: 1)?.version, 150)
    }

    func testALeaseFencesOutTheNodeThatLostIt() throws {
        let dsn = try database()
        let a = try open(dsn, lease: 1, address: "http://a")
        let b = try open(dsn, lease: 1, address: "http://b")
        XCTAssertNotEqual(a.nodeID, b.nodeID)
        try a.commit(["s1", "s2", "s3"].map { write($0, version: 0, isNew: true) }, historyLength: 10)
        guard case let .heldElsewhere(address) = try b.claim("s1", historyLength: 10) else { return XCTFail("taken") }
        XCTAssertEqual(address, "http://a")
        guard case .missing = try b.claim("nope", historyLength: 10) else { return XCTFail("not missing") }

        Thread.sleep(forTimeInterval: 1.2)  // a's leases pass; a does not renew
        XCTAssertFalse(a.holds("s1"), "a stops counting on its lease before it passes")
        for id in ["s1", "s3"] {
            guard case let .taken(session) = try b.claim(id, historyLength: 10) else { return XCTFail("not taken") }
            XCTAssertEqual(session.version, 0)
        }
        XCTAssertTrue(b.holds("s1"))
        let check = try PostgresConnection(uri: dsn, secrets: [])
        XCTAssertEqual(
            try check.execute("SELECT fence, holder_address FROM reactord_sessions WHERE id = 's1'").string(0, 0), "2")

        // a's stale write of s1 is refused, s2 in the same batch is written.
        let refused = try a.commit(
            [write("s1", version: 1, events: [event(1)]), write("s2", version: 1, events: [event(1)])],
            historyLength: 10)
        XCTAssertEqual(refused, ["s1"])
        XCTAssertEqual(try b.session("s1", historyLength: 10)?.version, 0)
        XCTAssertEqual(try b.session("s1", historyLength: 10)?.events, [], "a refused write's events are not inserted")
        XCTAssertEqual(try b.session("s2", historyLength: 10)?.version, 1)
        XCTAssertEqual(try b.session("s2", historyLength: 10)?.events, [event(1)])
        // Without a lease it is refused without asking the database.
        XCTAssertEqual(try a.commit([write("s1", version: 2)], historyLength: 10), ["s1"])

        XCTAssertEqual(try a.renewLeases(), ["s3"], "the renewal reports the lease taken over")
        XCTAssertTrue(a.holds("s2"), "a renewed lease counts again")
        XCTAssertFalse(a.holds("s3"))
        // b writes on with its fence.
        XCTAssertEqual(try b.commit([write("s1", version: 1, events: [event(1)])], historyLength: 10), [])
        XCTAssertEqual(try b.renewLeases(), [])
    }

    /// A node whose lease lapsed locally claims its session again: the fence stays (the holder
    /// did not change), so a write of the hub it let go, still in flight, passes the fence. The
    /// new hub read the version before that write: its own write over it is refused.
    func testAReclaimedSessionsWriteOverAVersionItDidNotReadIsRefused() throws {
        let dsn = try database()
        let a = try open(dsn, lease: 1, address: "http://a")
        try a.commit([write("s1", version: 0, isNew: true)], historyLength: 10)
        Thread.sleep(forTimeInterval: 1.2)  // a's lease lapses here; nobody else takes it
        XCTAssertFalse(a.holds("s1"))
        guard case let .taken(session) = try a.claim("s1", historyLength: 10) else { return XCTFail("not taken") }
        XCTAssertEqual(session.version, 0)

        // The let-go hub's write, in flight across the claim, commits under the same fence.
        XCTAssertEqual(try a.commit([write("s1", version: 1, events: [event(1)], base: 0)], historyLength: 10), [])
        // The new hub's write builds on version 0, which is no longer what is stored.
        var stale = write("s1", version: 1, events: [event(1)], base: 0)
        if case var .session(change) = stale {
            change.stateJSON = Array(#"{"count":100}"#.utf8)
            stale = .session(change)
        }
        XCTAssertEqual(try a.commit([stale], historyLength: 10), ["s1"])
        let stored = try a.session("s1", historyLength: 10)
        XCTAssertEqual(stored?.version, 1)
        XCTAssertEqual(text(stored?.stateJSON), #"{"count":1,"q":"\"\\"}"#)
    }

    /// Two hubs of one session in one batch (one let go, one claimed since), both built on the
    /// same version: the first is written, the second is refused, not merged over it.
    func testTwoWritesOnOneBaseInOneBatchAreNotMerged() throws {
        let dsn = try database()
        let a = try open(dsn)
        try a.commit([write("s1", version: 0, isNew: true)], historyLength: 10)
        var second = write("s1", version: 1, events: [event(1)], base: 0)
        if case var .session(change) = second {
            change.stateJSON = Array(#"{"count":100}"#.utf8)
            second = .session(change)
        }
        let refused = try a.commit([write("s1", version: 1, events: [event(1)], base: 0), second], historyLength: 10)
        XCTAssertEqual(refused, ["s1"])
        let stored = try a.session("s1", historyLength: 10)
        XCTAssertEqual(stored?.version, 1)
        XCTAssertEqual(text(stored?.stateJSON), #"{"count":1,"q":"\"\\"}"#)
        // The refusal let the session go; claimed again, a write that builds on the one before
        // it in the batch is merged with it, as before.
        guard case .taken = try a.claim("s1", historyLength: 10) else { return XCTFail("not taken") }
        XCTAssertEqual(
            try a.commit(
                [
                    write("s1", version: 2, events: [event(2)], base: 1),
                    write("s1", version: 3, events: [event(3)], base: 2),
                ],
                historyLength: 10), [])
        XCTAssertEqual(try a.session("s1", historyLength: 10)?.version, 3)
    }

    func testAnAnswerIsKeptOnlyWithAWriteTheLeaseAllows() throws {
        let dsn = try database()
        let a = try open(dsn, lease: 1, address: "http://a")
        let b = try open(dsn, lease: 1, address: "http://b")
        func answer(_ key: String, session: String?) -> StoredAnswer {
            StoredAnswer(
                scope: "", key: key, request: "digest", status: 201,
                headers: [.init("Location", "/sessions/\(session ?? "")")], body: Array(#"{"q":"\""}"#.utf8),
                expires: 5_000, session: session)
        }
        guard case let .session(created) = write("s1", version: 0, isNew: true) else { return XCTFail() }
        var keyed = created
        keyed.answers = [answer("create", session: "s1")]
        try a.commit([.session(keyed)], historyLength: 10)
        let kept = try XCTUnwrap(try b.answer(scope: "", key: "create"), "kept, readable from any node")
        let expected = keyed.answers[0]
        XCTAssertEqual(
            kept,
            StoredAnswer(
                scope: expected.scope, key: expected.key, request: expected.request, status: expected.status,
                headers: expected.headers, body: expected.body, expires: expected.expires, session: nil))

        Thread.sleep(forTimeInterval: 1.2)  // a's lease passes; b takes s1 over
        guard case .taken = try b.claim("s1", historyLength: 10) else { return XCTFail("not taken") }
        guard case var stale = write("s1", version: 1), case .session(var fenced) = stale else { return XCTFail() }
        fenced.answers = [answer("late", session: "s1")]
        stale = .session(fenced)
        XCTAssertEqual(try a.commit([stale, .answer(answer("unrelated", session: nil))], historyLength: 10), ["s1"])
        XCTAssertNil(try b.answer(scope: "", key: "late"), "a fenced-out write keeps no answer")
        XCTAssertNotNil(try b.answer(scope: "", key: "unrelated"))
        XCTAssertEqual(try b.answerCount(), 2)
        try b.commit([.forgetAnswers(expiredBefore: 10_000, limit: 1)], historyLength: 10)
        XCTAssertEqual(try b.answerCount(), 1, "forgotten in batches of the limit")
    }

    func testAKeyIsClaimedByOneNodeAndItsAnswerReplacesOnlyItsOwnClaim() throws {
        let dsn = try database()
        let a = try open(dsn, address: "http://a")
        let b = try open(dsn, address: "http://b")
        func claim(_ store: PostgresStore, _ key: String, _ token: String, for duration: Double = 30) throws
            -> StoredAnswer?
        {
            try store.claimAnswer(scope: "", key: key, request: "digest", token: token, duration: duration)
        }
        func answer(_ key: String, claim: String) -> StoredAnswer {
            StoredAnswer(
                scope: "", key: key, request: "digest", status: 200, headers: [], body: Array("{}".utf8),
                expires: 5_000, session: nil, claim: claim)
        }
        XCTAssertNil(try claim(a, "k", "ta"), "the first claim runs")
        let running = try XCTUnwrap(try claim(b, "k", "tb"))
        XCTAssertTrue(running.isClaim && running.request == "digest", "another node finds it running")
        // A node of a version before claims reads the row as an answer to replay: it is the 409 of a
        // key still running, with its Retry-After, not a broken answer.
        XCTAssertEqual(running.status, 409)
        XCTAssertEqual(running.headers, [.init("Content-Type", "application/problem+json"), .init("Retry-After", "1")])
        let problem = try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(running.body)) as? [String: Any])
        XCTAssertEqual(problem["status"] as? Int, 409)
        XCTAssertEqual(try b.answer(scope: "", key: "k")?.isClaim, true, "a lookup never replays a claim")
        try b.commit([.forgetAnswers(expiredBefore: 1e12, limit: 10)], historyLength: 10)
        XCTAssertEqual(try b.answerCount(), 0, "a live claim is not forgotten, nor counted")
        try a.commit([.user(Array("null".utf8)), .answer(answer("k", claim: "ta"))], historyLength: 10)
        XCTAssertEqual(try claim(b, "k", "tb"), try a.answer(scope: "", key: "k"))
        XCTAssertEqual(try b.answer(scope: "", key: "k")?.status, 200, "the answer replaced the claim")

        XCTAssertNil(try claim(a, "released", "ta"))
        try a.releaseClaim(scope: "", key: "released", token: "ta")
        XCTAssertNil(try claim(b, "released", "tb"), "a claim given back is free at once")

        XCTAssertNil(try claim(a, "lapsed", "ta", for: 0.2))
        Thread.sleep(forTimeInterval: 0.4)
        XCTAssertNil(try claim(b, "lapsed", "tb"), "a claim past its time is taken over")
        try a.commit([.user(nil), .answer(answer("lapsed", claim: "ta"))], historyLength: 10)
        XCTAssertEqual(try a.answer(scope: "", key: "lapsed")?.isClaim, true, "the late run keeps nothing")
        try a.releaseClaim(scope: "", key: "lapsed", token: "ta")
        XCTAssertEqual(try a.answer(scope: "", key: "lapsed")?.isClaim, true, "nor gives back another's claim")
    }

    func testAReleasedSessionIsTakenAtOnce() throws {
        let dsn = try database()
        let a = try open(dsn, address: "http://a")
        let b = try open(dsn, address: "http://b")
        try a.commit([write("s1", version: 0, isNew: true, lastActive: 1_000)], historyLength: 10)
        XCTAssertEqual(
            try a.sessions(lastActiveBefore: 2_000, limit: 10), [], "a live lease keeps a session from expiring")
        guard case .heldElsewhere = try b.claim("s1", historyLength: 10) else { return XCTFail("taken") }
        a.release(["s1"])
        XCTAssertFalse(a.holds("s1"))
        XCTAssertEqual(try a.sessions(lastActiveBefore: 2_000, limit: 10), ["s1"])
        guard case .taken = try b.claim("s1", historyLength: 10) else { return XCTFail("not taken") }
        // Claiming what it holds keeps its fence.
        guard case .taken = try b.claim("s1", historyLength: 10) else { return XCTFail("not taken") }
        XCTAssertEqual(try b.commit([write("s1", version: 1)], historyLength: 10), [])
        // a closing releases what it holds.
        try a.commit([write("s2", version: 0, isNew: true)], historyLength: 10)
        a.close()
        guard case .taken = try b.claim("s2", historyLength: 10) else { return XCTFail("not released by close") }
    }

    // MARK: - Deletes, wake-ups

    func testAnExpiryLeavesASessionUsedSinceItWasFoundExpired() throws {
        let a = try open(try database(), address: "http://a")
        try a.commit(
            [
                write("used", version: 1, isNew: true, lastActive: 5_000, events: [event(1)]),
                write("idle", version: 1, isNew: true, lastActive: 1_000, events: [event(1)]),
            ], historyLength: 10)
        XCTAssertEqual(
            try a.commit(
                [
                    .delete(id: "used", reason: "expired", idleBefore: 2_000),
                    .delete(id: "idle", reason: "expired", idleBefore: 2_000),
                ], historyLength: 10),
            ["used"])
        XCTAssertEqual(try a.session("used", historyLength: 10)?.events, [event(1)], "it stays, with its history")
        XCTAssertNil(try a.session("idle", historyLength: 10))
    }

    func testADeleteEndsTheSessionOnAnotherNode() throws {
        let dsn = try database()
        let a = try open(dsn, address: "http://a")
        let b = try open(dsn, address: "http://b")
        let wakeups = self.wakeups(of: b)
        try a.commit([write("s1", version: 0, isNew: true), write("s2", version: 0, isNew: true)], historyLength: 10)
        try b.commit([write("s3", version: 0, isNew: true)], historyLength: 10)
        XCTAssertEqual(
            try a.commit(
                [
                    .delete(id: "s1", reason: "deleted"), .delete(id: "s3", reason: "deleted"),
                    .delete(id: "missing", reason: "deleted"),
                ], historyLength: 10),
            ["s3"], "another node's live session is not deleted; a missing one is no refusal")
        XCTAssertTrue(waitUntil(timeout: 5) { wakeups.value.contains(.ended(session: "s1", reason: "deleted")) })
        XCTAssertNil(try b.session("s1", historyLength: 10))
        XCTAssertNotNil(try b.session("s3", historyLength: 10))
        XCTAssertFalse(a.holds("s1"))
        // A reason with spaces, and a write then a delete in one batch.
        try a.commit(
            [write("s2", version: 1, events: [event(1)]), .delete(id: "s2", reason: "session expired")],
            historyLength: 10)
        XCTAssertTrue(
            waitUntil(timeout: 5) { wakeups.value.contains(.ended(session: "s2", reason: "session expired")) })
        XCTAssertEqual(try b.sessionCount(), 1)
        XCTAssertFalse(wakeups.value.contains(.ended(session: "s3", reason: "deleted")))
    }

    /// Events too large for a notification (PostgreSQL's payload is under 8,000 bytes) are not
    /// carried: the wake-up names the last one, and the table has them.
    func testEventsTooLargeForANotificationAreLeftToTheTable() throws {
        let dsn = try database()
        let a = try open(dsn)
        let b = try open(dsn)
        let wakeups = self.wakeups(of: b)
        let large = StoredEvent(
            seq: 1, pulse: nil, json: Array("{\"text\":\"\(String(repeating: "é", count: 4_000))\"}".utf8))
        try a.commit(
            [write("s1", version: 0, isNew: true), write("s1", version: 1, events: [large])], historyLength: 10)
        try a.commit([write("s1", version: 2, events: [event(2)])], historyLength: 10)
        XCTAssertTrue(
            waitUntil(timeout: 5) {
                wakeups.value.contains { if case .events("s1", 2, _, _) = $0 { true } else { false } }
            })
        let carried = wakeups.value.compactMap { wakeup -> [StoredEvent]? in
            if case let .events("s1", _, _, carried) = wakeup { carried } else { nil }
        }
        XCTAssertEqual(carried, [[], [event(2)]])
        XCTAssertEqual(try b.events(of: "s1", after: 0, limit: 10)?.events.first, large)
    }

    func testCommittedEventsWakeAnotherNodeWhichReadsThem() throws {
        let dsn = try database()
        let a = try open(dsn)
        let b = try open(dsn)
        let wakeups = self.wakeups(of: b)
        let before = Date().timeIntervalSince1970
        try a.commit(
            [
                write("s1", version: 0, isNew: true),
                write("s1", version: 3, events: [event(1), event(2), event(3)]),
            ], historyLength: 10)
        XCTAssertTrue(
            waitUntil(timeout: 5) {
                wakeups.value.contains { if case .events("s1", 3, _, _) = $0 { true } else { false } }
            })
        if case let .events(_, _, sentAt, carried)? = wakeups.value.first(where: {
            if case .events = $0 { true } else { false }
        }) {
            XCTAssertEqual(sentAt, before, accuracy: 2)
            XCTAssertEqual(carried, [event(1), event(2), event(3)], "the commit's events ride in its notification")
        }
        let read = try XCTUnwrap(try b.events(of: "s1", after: 1, limit: 10))
        XCTAssertEqual(read.version, 3)
        XCTAssertEqual(read.events, [event(2), event(3)])
        XCTAssertEqual(text(read.stateJSON), #"{"count":3,"q":"\"\\"}"#)
        XCTAssertEqual(try b.events(of: "s1", after: 3, limit: 10)?.events, [])
        XCTAssertEqual(try b.events(of: "s1", after: 0, limit: 2)?.events.map(\.seq), [1, 2])
        XCTAssertNil(try b.events(of: "nope", after: 0, limit: 2))
        XCTAssertEqual(try b.watched(["s1", "nope"]), ["s1": WatchedSession(version: 3, isHeld: true)])
        XCTAssertEqual(try b.watched([]), [:])
        a.release(["s1"])
        XCTAssertEqual(try b.watched(["s1"]), ["s1": WatchedSession(version: 3, isHeld: false)], "let go")
    }

    func testUserChangesAreVersionedAndInOrder() throws {
        let dsn = try database()
        let a = try open(dsn)
        let b = try open(dsn)
        let wakeups = self.wakeups(of: b)
        XCTAssertNil(try b.loadUser())
        XCTAssertEqual(try b.userChanges(after: 0), [])
        try a.commit([.user(Array(#"{"id":"1"}"#.utf8))], historyLength: 10)
        try b.commit([.user(Array(#"{"id":"2"}"#.utf8)), .user(nil)], historyLength: 10)
        let changes = try a.userChanges(after: 0)
        XCTAssertEqual(changes.map(\.version), [1, 2, 3])
        XCTAssertEqual(changes.map { text($0.json) }, [#"{"id":"1"}"#, #"{"id":"2"}"#, nil])
        XCTAssertEqual(try a.userChanges(after: 2), [UserChange(version: 3, json: nil)])
        XCTAssertNil(try a.loadUser())
        XCTAssertTrue(waitUntil(timeout: 5) { wakeups.value.contains(.user(version: 3)) })
        XCTAssertEqual(
            wakeups.value.filter { if case .user = $0 { true } else { false } },
            [.user(version: 1), .user(version: 2), .user(version: 3)])
    }

    func testTouchMarksSessionsActiveNow() throws {
        let store = try open(try database())
        try store.commit(
            [
                write("s1", version: 0, isNew: true, lastActive: 1_000),
                write("s2", version: 0, isNew: true, lastActive: 1_000),
            ], historyLength: 10)
        store.release(["s1", "s2"])
        XCTAssertEqual(Set(try store.sessions(lastActiveBefore: 2_000, limit: 10)), ["s1", "s2"])
        try store.touch(["s1"])
        XCTAssertEqual(try store.sessions(lastActiveBefore: 2_000, limit: 10), ["s2"])
        let now = Date().timeIntervalSince1970
        XCTAssertEqual(try store.session("s1", historyLength: 1)?.lastActive ?? 0, now, accuracy: 5)
        try store.touch([])
    }

    /// A session's activity as it leaves memory moves its stored time only later, whoever holds
    /// it, and writes nothing for a session that is gone.
    func testActivityMovesTheStoredTimeOnlyLater() throws {
        let store = try open(try database())
        try store.commit([write("s1", version: 0, isNew: true, lastActive: 1_000)], historyLength: 10)
        store.release(["s1"])
        try store.commit(
            [.activity(id: "s1", lastActive: 3_000), .activity(id: "gone", lastActive: 3_000)], historyLength: 10)
        XCTAssertEqual(try store.session("s1", historyLength: 1)?.lastActive, 3_000)
        XCTAssertEqual(try store.commit([.activity(id: "s1", lastActive: 2_000)], historyLength: 10), [])
        XCTAssertEqual(try store.session("s1", historyLength: 1)?.lastActive, 3_000, "never moved back")
    }

    // MARK: - Action log (the bodies are ActionLogChecks', shared with SQLiteStoreTests)

    func testActionLogEntriesAreWrittenWithTheirCommitAndReadInPages() throws {
        try ActionLogChecks.checkPagesAndReload(try open(try database()))
    }

    func testActionLogIsTrimmedToItsLength() throws { try ActionLogChecks.checkTrimming(try open(try database())) }

    func testActionLogGoesWithItsSessionAndOldEntriesAreForgotten() throws {
        try ActionLogChecks.checkDeleteAndForget(try open(try database()))
    }

    func testStateAtAVersion() throws { try ActionLogChecks.checkStateAtVersion(try open(try database())) }

    func testActionLogEntriesWithTheirEventsOutliveEitherTrim() throws {
        try ActionLogChecks.checkEntriesWithTheirEvents(try open(try database()))
    }

    func testSessionsAreListedInPagesInByteOrder() throws {
        try ActionLogChecks.checkSessionsInPages(try open(try database()))
    }

    /// Byte order whatever the database's collation: here one (ICU's root) that sorts "a"
    /// before "B" and "_" before both.
    func testSessionsAreListedInByteOrderUnderALinguisticCollation() throws {
        let server = try server()
        let name = "icu_\(UInt32.random(in: 0 ... .max))"
        try PostgresConnection(uri: server.dsn(), secrets: []).execute(
            "CREATE DATABASE \(name) TEMPLATE template0 ENCODING 'UTF8' LOCALE 'C.UTF-8' LOCALE_PROVIDER icu ICU_LOCALE 'und'"
        )
        let dsn = server.dsn(database: name)
        let check = try PostgresConnection(uri: dsn, secrets: [])
        XCTAssertEqual(try check.execute("SELECT 'a' < 'B'").string(0, 0), "t", "the database sorts linguistically")
        try ActionLogChecks.checkSessionsInPages(try open(dsn))
    }

    /// A write another node fenced out keeps no entries; the node that took the session over
    /// reads the newest number with its claim.
    func testAFencedOutWriteKeepsNoLogEntries() throws {
        let dsn = try database()
        let a = try open(dsn, lease: 1, address: "http://a")
        let b = try open(dsn, lease: 1, address: "http://b")
        let first = ActionLogChecks.entry(1, version: 1)
        try a.commit(
            [
                ActionLogChecks.write("s1", version: 0, isNew: true),
                ActionLogChecks.write("s2", version: 0, isNew: true),
                ActionLogChecks.write("s1", version: 1, logged: [first]),
            ], historyLength: 10, actionLogLength: 100)
        Thread.sleep(forTimeInterval: 1.2)  // a's leases pass; b takes s1 over
        guard case let .taken(session) = try b.claim("s1", historyLength: 10) else { return XCTFail("not taken") }
        XCTAssertEqual(session.lastLoggedAction, 1, "a claim reads it too")
        // Refused by the database (s1's fence moved on), then by a itself (it knows s1 is lost).
        let late = ActionLogChecks.entry(2, version: 2)
        XCTAssertEqual(
            try a.commit(
                [
                    ActionLogChecks.write("s1", version: 2, logged: [late]),
                    ActionLogChecks.write("s2", version: 1, logged: [ActionLogChecks.entry(1, version: 1)]),
                ],
                historyLength: 10, actionLogLength: 100), ["s1"])
        XCTAssertEqual(
            try a.commit(
                [ActionLogChecks.write("s1", version: 3, logged: [ActionLogChecks.entry(3, version: 3)])],
                historyLength: 10, actionLogLength: 100), ["s1"])
        XCTAssertEqual(try b.loggedActions(of: "s1", after: 0, limit: 10), [first])
        XCTAssertEqual(
            try b.loggedActions(of: "s2", after: 0, limit: 10).map(\.number), [1], "the batch's other write is kept")
        XCTAssertEqual(try b.session("s1", historyLength: 10)?.lastLoggedAction, 1)
    }

    // MARK: - Opening

    func testOpeningRefusalsNameTheProblemButNotThePassword() throws {
        let server = try server()
        let secret = "s3cret-Pw-91"
        let cases: [(String, [String])] = [
            (server.dsn(password: secret), ["password authentication failed", "reactord"]),
            (server.dsn(database: "no_such_db"), ["no_such_db", "does not exist"]),
            ("postgres://reactord:\(secret)@127.0.0.1:1/reactord", ["127.0.0.1", "port 1", "refused"]),
            ("postgres://reactord:\(secret)@127.0.0.1:\(server.port)/nodb?sslmode=bogus", ["sslmode"]),
        ]
        for (dsn, expected) in cases {
            XCTAssertThrowsError(try PostgresStore(url: dsn)) { error in
                guard case let .cannotOpen(message)? = error as? StoreError else { return XCTFail("\(error)") }
                for part in expected { XCTAssertTrue(message.contains(part), "\(part) not in: \(message)") }
                XCTAssertFalse(message.contains(secret), message)
                XCTAssertFalse(message.contains("reactord-test"), message)
            }
        }
        // A one-letter password is masked where it stands alone, not inside every word ("***ort 1").
        XCTAssertThrowsError(try PostgresStore(url: "postgres://reactord:p@127.0.0.1:1/reactord")) { error in
            XCTAssertTrue("\(error)".contains("port 1"), "\(error)")
        }
        XCTAssertEqual(
            PostgresConnection.scrub("no user:p@host (port 5432), p", ["p"]), "no user:***@host (port 5432), ***")
    }

    func testTheLocationParsesPostgresAndNeverShowsThePassword() throws {
        let location = try StoreLocation(parsing: "postgres://u:p%40ss@db.example:5432/app?sslmode=require")
        XCTAssertEqual(location, .postgres(url: "postgres://u:p%40ss@db.example:5432/app?sslmode=require"))
        XCTAssertEqual(location.description, "postgres://u:***@db.example:5432/app?sslmode=require")
        XCTAssertEqual(
            try StoreLocation(parsing: "postgresql://h/db?password=x&sslmode=disable").description,
            "postgresql://h/db?password=***&sslmode=disable")
        XCTAssertEqual(try StoreLocation(parsing: "postgres://u@h/db").description, "postgres://u@h/db")
        XCTAssertEqual(StoreLocation.passwords(in: "postgres://u:p%40ss@h/db"), ["p%40ss", "p@ss"])
        // A raw '@' in the password: libpq would take what follows it for the host and echo it.
        XCTAssertThrowsError(try StoreLocation(parsing: "postgres://u:hun@ter2@127.0.0.1:5999/db")) { error in
            let message = "\(error)"
            XCTAssertTrue(message.contains("%40"), message)
            XCTAssertFalse(message.contains("ter2") || message.contains("hun"), message)
        }
    }

    // MARK: - PostgreSQL down and back

    func testPostgresDownThenBack() throws {
        let server = try server()
        let dsn = try database()
        let a = try open(dsn)
        let b = try open(dsn)
        let untouched = try open(dsn)  // not used while the server is down
        let wakeups = self.wakeups(of: b)
        try a.commit([write("s1", version: 0, isNew: true)], historyLength: 10)
        XCTAssertEqual(try a.sessionCount(), 1)
        try untouched.commit([write("s2", version: 0, isNew: true)], historyLength: 10)
        XCTAssertEqual(try untouched.sessionCount(), 2)

        try server.stop()
        defer { try? server.start() }
        for call in [
            { _ = try a.sessionCount() },
            { try a.commit([write("s1", version: 1, events: [event(1)])], historyLength: 10) },
            { _ = try a.claim("s1", historyLength: 10) },
        ] as [() throws -> Void] {
            XCTAssertThrowsError(try call()) { error in
                guard case let .unavailable(detail, cause)? = error as? StoreError else { return XCTFail("\(error)") }
                XCTAssertEqual(detail, "PostgreSQL is unreachable")  // what a client reads: no address
                XCTAssertTrue(cause.contains("127.0.0.1"), cause)  // what the log says
                XCTAssertFalse(cause.contains("reactord-test"), cause)
            }
        }
        XCTAssertThrowsError(try a.renewLeases())

        try server.start()
        // Connections idle through the restart are found closed before use: no call fails.
        XCTAssertEqual(try untouched.sessionCount(), 2)
        XCTAssertEqual(try untouched.commit([write("s2", version: 1, events: [event(1)])], historyLength: 10), [])
        XCTAssertTrue(waitUntil(timeout: 10) { (try? a.sessionCount()) == 2 }, "reads work again")
        XCTAssertTrue(
            waitUntil(timeout: 10) { wakeups.value.contains(.reconnected) }, "the listener says it was cut off")
        XCTAssertEqual(try a.commit([write("s1", version: 1, events: [event(1)])], historyLength: 10), [])
        XCTAssertEqual(try a.renewLeases(), [])
        XCTAssertTrue(
            waitUntil(timeout: 5) {
                wakeups.value.contains { if case .events("s1", 1, _, _) = $0 { true } else { false } }
            }, "wake-ups flow again")
    }

    /// A server that stops answering (its backends frozen, as a partition that drops nothing
    /// leaves them) fails the call within the answer timeout instead of holding its thread, and
    /// the store works again once the server answers.
    func testAServerThatStopsAnsweringIsAnErrorWithinTheTimeout() throws {
        let dsn = try database()
        let store = try open(dsn)
        try store.commit([write("s1", version: 0, isNew: true)], historyLength: 10)
        XCTAssertEqual(try store.sessionCount(), 1)
        let admin = try PostgresConnection(uri: dsn, secrets: [])
        let rows = try admin.execute(
            """
            SELECT pid FROM pg_stat_activity
            WHERE datname = current_database() AND application_name = 'reactord' AND pid <> pg_backend_pid()
            """)
        let backends = (0..<rows.count).compactMap { rows.int64($0, 0) }.map { pid_t($0) }
        XCTAssertFalse(backends.isEmpty)
        for backend in backends { XCTAssertEqual(kill(backend, SIGSTOP), 0) }
        var resumed = false
        defer { if !resumed { for backend in backends { kill(backend, SIGCONT) } } }

        let started = Date()
        XCTAssertThrowsError(try store.commit([write("s1", version: 1, events: [event(1)])], historyLength: 10)) {
            guard case .outcomeUnknown? = $0 as? StoreError else { return XCTFail("\($0)") }
        }
        XCTAssertThrowsError(try store.sessionCount())
        XCTAssertLessThan(Date().timeIntervalSince(started), 2 * PostgresConnection.answerTimeout + 3)

        for backend in backends { kill(backend, SIGCONT) }
        resumed = true
        XCTAssertTrue(waitUntil(timeout: 10) { (try? store.sessionCount()) == 1 }, "reads work again")
        let version = try XCTUnwrap(try store.session("s1", historyLength: 10)).version
        XCTAssertEqual(
            try store.commit([write("s1", version: version + 1, events: [event(version + 1)])], historyLength: 10), [])
    }

    // MARK: - Speed

    /// Round trips per commit do not grow with the batch: prints the latency of a batch of 1
    /// and of 64 session writes (each with one event).
    func testCommitLatencyOfOneAndSixtyFourWrites() throws {
        let store = try open(try database())
        let ids = (0..<64).map { "s\($0)" }
        try store.commit(ids.map { write($0, version: 0, isNew: true) }, historyLength: 100)
        var version: UInt64 = 0
        func measure(_ count: Int, rounds: Int) throws -> Double {
            let start = TestSupport.monotonicNow()
            for _ in 0..<rounds {
                version += 1
                let refused = try store.commit(
                    ids.prefix(count).map { write($0, version: version, events: [event(version)]) },
                    historyLength: 100)
                XCTAssertEqual(refused, [])
            }
            return (TestSupport.monotonicNow() - start) / Double(rounds)
        }
        _ = try measure(64, rounds: 5)
        let one = try measure(1, rounds: 200)
        let many = try measure(64, rounds: 50)
        print(
            String(
                format: "postgres commit latency: batch of 1: %.2f ms, batch of 64: %.2f ms (%.3f ms a write)",
                one * 1000, many * 1000, many * 1000 / 64))
        XCTAssertEqual(try store.session("s63", historyLength: 1)?.version, version)
    }
}

// Free functions, not the test case's methods: the concurrent tests call them from @Sendable closures.
private func write(
    _ id: String, version: UInt64, isNew: Bool = false, owner: String? = nil, lastActive: Double? = nil,
    events: [StoredEvent] = [], base: UInt64? = nil
) -> StoreChange {
    .session(
        SessionWrite(
            id: id, kind: "counter", owner: owner, isNew: isNew,
            stateJSON: Array(#"{"count":\#(version),"q":"\"\\"}"#.utf8),
            version: version, createdAt: 1_000, lastActive: lastActive, events: events, base: base))
}

private func event(_ seq: UInt64) -> StoredEvent {
    StoredEvent(
        seq: seq, pulse: seq % 2 == 0 ? "alert" : nil, json: Array(#"{"count":\#(seq),"s":"a,b {c} \"d\""}"#.utf8))
}
