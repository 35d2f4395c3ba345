import Foundation
import Logging
import ReactorStore
import XCTest

@testable import ReactorService

/// What a request that changed a session waits for: the journal's write that carries its change,
/// and that write's outcome, whatever comes after it. A store whose commits the test lets through
/// (or fails) one at a time holds the journal where a real disk or database only sometimes would.
final class CommitWaitTests: XCTestCase {
    private var store: HeldStore!
    private var journal: Journal!
    private var hub: EventHub!

    override func setUp() {
        store = HeldStore()
        journal = Journal(
            engine: store, historyLength: 10, failures: StoreFailureLog(logger: Logger(label: "CommitWaitTests")))
        let now = Date().timeIntervalSince1970
        let stored = StoredSession(
            id: "s", kind: "counter", stateJSON: Array(#"{"count":0}"#.utf8), version: 0, createdAt: now,
            lastActive: now, events: [])
        let record = SessionRecord(id: "s", kind: "counter", owner: nil, journal: journal, stored: stored, ttl: 0)
        hub = EventHub(historyLength: 10, metrics: ServiceMetrics(), record: record, restoring: stored)
        hub.goLive()
    }

    override func tearDown() {
        store.allowForever()
        journal.stop()
    }

    /// A change, and its mark, once the journal has taken it (its commit waits for the test).
    private func changeTaken(count: Int) -> UInt64 {
        let before = store.commitsStarted
        hub.publish(EncodedState(json: Array(#"{"count":\#(count)}"#.utf8), pulses: []))
        XCTAssertTrue(store.waitForCommitsStarted(before + 1), "the journal took the change")
        return hub.latest.mark
    }

    private func outcome(through mark: UInt64) -> Locked<StoreError??> {
        let outcome = Locked<StoreError??>(.none)
        hub.whenCommitted(through: mark) { failure in outcome.update { $0 = .some(failure) } }
        return outcome
    }

    /// A write that does not end (a frozen volume) makes the store's probe fail, though its reads
    /// still answer; once the write ends the store is ready again.
    func testAWriteThatDoesNotEndMakesTheStoreNotReady() {
        let probe = StoreProbe(engine: store) { [journal] in journal?.writeInProgressFor }
        XCTAssertNil(probe.unreachableReason())
        _ = changeTaken(count: 1)
        Thread.sleep(forTimeInterval: StoreProbe.longestWrite + 0.3)
        let reason = probe.unreachableReason()
        XCTAssertTrue(reason?.contains("has not finished a write") == true, String(describing: reason))
        store.allow(succeeding: true)
        XCTAssertTrue(waitUntil(timeout: 5) { probe.unreachableReason() == nil }, "ready once the write ended")
    }

    /// A change whose write committed is answered as stored, though the next write (queued behind
    /// it when the request asked) fails: it was answered 507, and a retry applied it twice.
    func testAChangeWhoseWriteCommittedIsStoredThoughTheNextWriteFails() {
        let first = changeTaken(count: 1)
        hub.publish(EncodedState(json: Array(#"{"count":2}"#.utf8), pulses: []))  // queued behind it
        let asked = outcome(through: first)
        let askedAfter = outcome(through: hub.latest.mark)
        store.allow(succeeding: true)
        store.allow(succeeding: false)
        XCTAssertTrue(waitUntil(timeout: 5) { asked.value != nil && askedAfter.value != nil }, "answered")
        XCTAssertEqual(asked.value.map { $0 == nil }, true, "committed: \(String(describing: asked.value))")
        XCTAssertNotNil(askedAfter.value ?? nil, "the second change is lost")
    }

    /// A change made just before its session ended, which the journal then never writes: the
    /// request that waits for it is told so (it waited forever, or was answered 200).
    func testAChangeDroppedAsItsSessionEndedIsNotAnsweredAsStored() {
        _ = changeTaken(count: 1)
        hub.publish(EncodedState(json: Array(#"{"count":2}"#.utf8), pulses: []))
        let dropped = hub.latest.mark
        hub.end(reason: nil)
        let asked = outcome(through: dropped)
        store.allow(succeeding: true)
        XCTAssertTrue(waitUntil(timeout: 5) { asked.value != nil }, "answered")
        XCTAssertNotNil(asked.value ?? nil, "never written, so not answered as stored")
    }

    /// A change taken while another request held the session's writes (an idempotency key's
    /// answer, an action log's entry): the journal unqueued the session and let it be, and the
    /// first request was answered before its change was written.
    func testAChangeWaitsForItsWriteWhileAnotherRequestHoldsTheWrites() {
        let first = changeTaken(count: 1)
        hub.publish(EncodedState(json: Array(#"{"count":2}"#.utf8), pulses: []))
        let mine = hub.latest.mark
        hub.holdWrites()
        let firstAsked = outcome(through: first)
        store.allow(succeeding: true)  // the first write; then the journal finds the writes held
        XCTAssertTrue(waitUntil(timeout: 5) { firstAsked.value != nil })
        usleep(50_000)
        let asked = outcome(through: mine)
        XCTAssertTrue(asked.value == nil, "not written yet, so not answered")
        hub.releaseWrites(adding: nil)
        XCTAssertTrue(store.waitForCommitsStarted(2), "written once the writes are let go")
        store.allow(succeeding: false)
        XCTAssertTrue(waitUntil(timeout: 5) { asked.value != nil }, "answered")
        XCTAssertNotNil(asked.value ?? nil, "its write failed")
    }

    /// Two reactors of one session with changes in one batch (in a cluster: one let go as its
    /// lease lapsed, one claimed since): each gets its own commit, so the store's refusal of the
    /// first is not the second's. Together, the second's stored change was answered 503 and a
    /// retry without a key applied it twice.
    func testTwoReactorsOfOneSessionAreCommittedApartSoOnlyTheRefusedOneFails() {
        _ = changeTaken(count: 1)  // the journal held in this commit
        hub.publish(EncodedState(json: Array(#"{"count":2}"#.utf8), pulses: []))
        let lettingGo = outcome(through: hub.latest.mark)
        let stored = StoredSession(
            id: "s", kind: "counter", stateJSON: Array(#"{"count":1}"#.utf8), version: 1, createdAt: 0,
            lastActive: 0, events: [])
        let record = SessionRecord(id: "s", kind: "counter", owner: nil, journal: journal, stored: stored, ttl: 0)
        let claimed = EventHub(historyLength: 10, metrics: ServiceMetrics(), record: record, restoring: stored)
        claimed.goLive()
        claimed.publish(EncodedState(json: Array(#"{"count":5}"#.utf8), pulses: []))
        let claimedOutcome = Locked<StoreError??>(.none)
        claimed.whenCommitted(through: claimed.latest.mark) { failure in claimedOutcome.update { $0 = .some(failure) } }
        let queuedBefore = Locked(false)  // waits for everything queued before it, the claimed change too
        journal.whenCommitted { _ in queuedBefore.update { $0 = true } }
        store.allow(succeeding: true)
        XCTAssertTrue(store.waitForCommitsStarted(2))
        store.allow(succeeding: true, refusing: ["s"])  // the reactor let go: refused
        XCTAssertTrue(store.waitForCommitsStarted(3), "the claimed reactor's change in a commit of its own")
        XCTAssertFalse(queuedBefore.value, "answered before the change queued ahead of it was written")
        store.allow(succeeding: true)
        XCTAssertTrue(waitUntil(timeout: 5) { queuedBefore.value })
        XCTAssertTrue(waitUntil(timeout: 5) { lettingGo.value != nil && claimedOutcome.value != nil }, "answered")
        XCTAssertEqual(store.batches, [["s"], ["s"], ["s"]])
        XCTAssertNotNil(lettingGo.value ?? nil, "refused")
        XCTAssertEqual(
            claimedOutcome.value.map { $0 == nil }, true, "stored: \(String(describing: claimedOutcome.value))")
    }

    /// Changes of more sessions than one transaction takes (a user change writes every session
    /// in memory) go in several, in order, and what waited for them is answered after the last:
    /// in one transaction, SQLite's WAL grew by a page a session, past what checkpoints bound.
    func testManySessionsChangesAreWrittenInTransactionsOfBoundedSize() {
        _ = changeTaken(count: 1)  // the journal held in this commit while the others queue
        let count = Journal.sessionsPerTransaction * 2 + 10
        let hubs = manySessionsChanged(count)
        let answered = Locked(false)
        let startedWhenAnswered = Locked(0)
        let store = self.store!
        journal.whenCommitted { _ in
            startedWhenAnswered.update { $0 = store.commitsStarted }
            answered.update { $0 = true }
        }
        store.allowForever()
        XCTAssertTrue(waitUntil(timeout: 5) { answered.value })
        XCTAssertEqual(startedWhenAnswered.value, 4, "answered after the batch's last transaction")
        let batches = store.batches.dropFirst()
        XCTAssertEqual(batches.map(\.count), [Journal.sessionsPerTransaction, Journal.sessionsPerTransaction, 10])
        XCTAssertEqual(batches.flatMap { $0 }, hubs.indices.map { "m\($0)" }, "every change, in order")
        let committed = Locked(0)
        for hub in hubs {
            hub.whenCommitted(through: hub.latest.mark) { if $0 == nil { committed.update { $0 += 1 } } }
        }
        XCTAssertTrue(waitUntil(timeout: 5) { committed.value == count })
    }

    /// A batch whose first transaction fails is not tried further (a stalled store would cost
    /// each its timeout) and fails whole: every change in it, and a user change carried in its
    /// last, are answered failed, as when the batch was one transaction.
    func testABatchFailsWholeAtItsFirstFailedTransaction() {
        _ = changeTaken(count: 1)
        let hubs = manySessionsChanged(Journal.sessionsPerTransaction + 10)
        let userWrite = Locked<StoreError??>(.none)
        journal.write([.user(Array(#"{"id":"u"}"#.utf8))]) { failure in userWrite.update { $0 = .some(failure) } }
        store.allow(succeeding: true)  // the held commit
        XCTAssertTrue(store.waitForCommitsStarted(2), "the batch's first transaction")
        store.allow(succeeding: false)
        XCTAssertTrue(waitUntil(timeout: 5) { userWrite.value != nil }, "answered")
        XCTAssertNotNil(userWrite.value ?? nil, "the user change was in a transaction never tried")
        XCTAssertEqual(store.commitsStarted, 2, "nothing tried after the failure")
        let failed = Locked(0)
        for hub in hubs { hub.whenCommitted(through: hub.latest.mark) { if $0 != nil { failed.update { $0 += 1 } } } }
        XCTAssertTrue(waitUntil(timeout: 5) { failed.value == hubs.count }, "\(failed.value) of \(hubs.count) failed")
    }

    /// `count` sessions, each with a change queued.
    private func manySessionsChanged(_ count: Int) -> [EventHub] {
        (0..<count).map { index in
            let id = "m\(index)"
            let stored = StoredSession(
                id: id, kind: "counter", stateJSON: Array(#"{"count":0}"#.utf8), version: 0, createdAt: 0,
                lastActive: 0, events: [])
            let record = SessionRecord(id: id, kind: "counter", owner: nil, journal: journal, stored: stored, ttl: 0)
            let hub = EventHub(historyLength: 10, metrics: ServiceMetrics(), record: record, restoring: stored)
            hub.goLive()
            hub.publish(EncodedState(json: Array(#"{"count":1}"#.utf8), pulses: []))
            return hub
        }
    }

    /// A new session whose state changes before the journal takes its first write (the global
    /// user, an effect): that write still keeps its version 0, the state its 201 showed.
    func testANewSessionsFirstWriteKeepsVersionZeroThoughItChangedBeforeIt() {
        _ = changeTaken(count: 1)  // the journal held in another session's commit
        let record = SessionRecord(id: "new", kind: "counter", owner: nil, journal: journal, stored: nil, ttl: 0)
        let fresh = EventHub(historyLength: 10, metrics: ServiceMetrics(), record: record, restoring: nil)
        fresh.publish(EncodedState(json: Array(#"{"count":0}"#.utf8), pulses: []))
        fresh.goLive()
        fresh.publish(EncodedState(json: Array(#"{"count":7}"#.utf8), pulses: []))
        store.allow(succeeding: true)
        XCTAssertTrue(store.waitForCommitsStarted(2), "the new session's first write taken")
        let first = store.written.first { $0.id == "new" }
        XCTAssertEqual(first?.events.map(\.seq), [0, 1])
        XCTAssertEqual(first?.events.first.map { String(decoding: $0.json, as: UTF8.self) }, #"{"count":0}"#)
        XCTAssertEqual(first?.version, 1)
    }
}

/// A store that commits only as the test allows, one outcome at a time.
private final class HeldStore: StoreEngine, @unchecked Sendable {
    let name = "held"
    private let condition = NSCondition()
    private var outcomes: [(succeeds: Bool, refused: Set<String>)] = []
    private var forever = false
    private var started = 0

    var commitsStarted: Int {
        condition.lock()
        defer { condition.unlock() }
        return started
    }

    func waitForCommitsStarted(_ count: Int) -> Bool {
        condition.lock()
        defer { condition.unlock() }
        let deadline = Date().addingTimeInterval(5)
        while started < count { if !condition.wait(until: deadline) { return false } }
        return true
    }

    /// Lets the next commit end: failed, or committed with `refusing`'s sessions refused.
    func allow(succeeding: Bool, refusing: Set<String> = []) {
        condition.lock()
        outcomes.append((succeeding, refusing))
        condition.broadcast()
        condition.unlock()
    }

    func allowForever() {
        condition.lock()
        forever = true
        condition.broadcast()
        condition.unlock()
    }

    /// The session writes of the commits started, in order.
    var written: [SessionWrite] {
        condition.lock()
        defer { condition.unlock() }
        return writes
    }
    private var writes: [SessionWrite] = []

    /// The sessions each commit started wrote, in order.
    var batches: [[String]] {
        condition.lock()
        defer { condition.unlock() }
        return sessionsByCommit
    }
    private var sessionsByCommit: [[String]] = []

    func commit(_ changes: [StoreChange], historyLength: Int, actionLogLength: Int) throws(StoreError) -> Set<String> {
        condition.lock()
        started += 1
        for case let .session(write) in changes { writes.append(write) }
        sessionsByCommit.append(changes.compactMap { if case let .session(write) = $0 { write.id } else { nil } })
        condition.broadcast()
        while outcomes.isEmpty && !forever { condition.wait() }
        let outcome = outcomes.isEmpty ? (succeeds: true, refused: []) : outcomes.removeFirst()
        condition.unlock()
        if !outcome.succeeds { throw .full("the test's disk is full") }
        return outcome.refused
    }

    func loadUser() throws(StoreError) -> [UInt8]? { nil }
    func sessionCount() throws(StoreError) -> Int { 0 }
    func sessionCount(ownedBy owner: String) throws(StoreError) -> Int { 0 }
    func session(_ id: String, historyLength: Int) throws(StoreError) -> StoredSession? { nil }
    func sessions(lastActiveBefore time: Double, limit: Int) throws(StoreError) -> [String] { [] }
    func answer(scope: String, key: String) throws(StoreError) -> StoredAnswer? { nil }
    func answerCount() throws(StoreError) -> Int { 0 }
    func close() {}
    func loggedActions(of session: String, after version: UInt64?, loggedSince time: Double, limit: Int)
        throws(StoreError) -> [LoggedAction]
    { [] }
    func state(of session: String, at version: UInt64) throws(StoreError) -> StateAtVersion { .noSession }
    func sessions(after id: String, limit: Int) throws(StoreError) -> [SessionSummary] { [] }
}
