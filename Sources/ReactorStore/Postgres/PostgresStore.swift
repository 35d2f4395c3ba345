internal import ConcurrencyPrimitives

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
#if canImport(Glibc)
import Glibc
#endif

/// The cluster engine: one PostgreSQL database several nodes share. `commit` goes through one
/// connection (the service calls it from one thread) in one statement per batch whatever its
/// size; reads, claims and renewals through a small pool; wake-ups through a listener
/// connection. A broken connection is made again on the next call, so a node rides out a
/// PostgreSQL restart by itself (calls throw `.unavailable` meanwhile).
///
/// Leases: the database's clock decides expiry (`lease_until`), so node clocks do not matter;
/// each node also keeps, per lease, its fence and a deadline on its own monotonic clock, taken
/// before the statement that set the lease was sent, less a margin: `holds` turns false
/// before any other node can take the session over.
// why: owns a libpq writer connection (C) under `writeLock`; leases and listener are under `leaseLock`.
package final class PostgresStore: ClusterStore, @unchecked Sendable {
    package let name: String
    package let nodeID: String
    package let leaseDuration: Double
    /// How long before the lease's expiry, by this node's clock, it stops counting on it.
    private let margin: Double
    private let url: String
    private let secrets: [String]
    /// The database's clock when this store opened (seconds since 1970): a holder at this
    /// node's address that last renewed before it was this node before a restart.
    private let openedAt: Double

    private let writeLock = Mutex()
    private var writer: PostgresConnection?  // guarded by writeLock; nil until (re)connected
    private let pool: PostgresPool

    private struct Lease {
        var fence: Int64
        /// Monotonic seconds: the lease counts until then.
        var validUntil: Double
        /// Monotonic seconds when it was taken (a renewal started earlier says nothing of it).
        var since: Double
    }

    private let leaseLock = Mutex()
    // Guarded by leaseLock.
    private var leases: [String: Lease] = [:]
    private var address = ""
    private var listener: PostgresListener?
    private var closed = false

    /// Connects to `url` (a libpq URI) and creates or migrates the schema. Refuses, naming the
    /// server, database and user but never the password: an unreachable server, a failed
    /// login, a missing database, a schema of a newer reactord.
    package init(url: String, leaseDuration: Double = 5, poolSize: Int = 3) throws(StoreError) {
        self.url = url
        name = StoreLocation.postgres(url: url).description
        secrets = StoreLocation.passwords(in: url)
        self.leaseDuration = leaseDuration
        margin = min(1, leaseDuration / 4)
        nodeID = (0..<2).map { _ in String(UInt64.random(in: .min ... .max), radix: 16) }.joined(separator: "-")
        let connect = Self.connector(url: url, secrets: secrets)
        pool = PostgresPool(limit: max(1, poolSize), connect: connect)
        do {
            let writer = try connect()
            try PostgresSchema.migrate(writer, database: name)
            openedAt = try writer.execute("SELECT extract(epoch FROM now())::float8").double(0, 0) ?? 0
            self.writer = writer
        } catch let error as StoreError {
            throw error
        } catch {
            throw .cannotOpen("cannot open the store \(name): \(error)")
        }
    }

    deinit { close() }

    // MARK: - StoreEngine

    package func loadUser() throws(StoreError) -> [UInt8]? {
        try reading { connection in
            try connection.execute("SELECT data FROM reactord_user WHERE id = 1").bytes(0, 0)
        }
    }

    package func sessionCount() throws(StoreError) -> Int {
        try reading { connection in
            Int(try connection.execute("SELECT count(*) FROM reactord_sessions").int64(0, 0) ?? 0)
        }
    }

    package func sessionCount(ownedBy owner: String) throws(StoreError) -> Int {
        try reading { connection in
            Int(
                try connection.execute("SELECT count(*) FROM reactord_sessions WHERE owner = $1", [owner]).int64(0, 0)
                    ?? 0)
        }
    }

    package func session(_ id: String, historyLength: Int) throws(StoreError) -> StoredSession? {
        try reading { connection in
            let rows = try connection.execute(
                """
                SELECT s.kind, s.owner, s.state, s.version, s.created_at, s.last_active, e.seq, e.pulse, e.data,
                       (SELECT max(number) FROM reactord_action_log WHERE session = $1)
                FROM reactord_sessions s
                LEFT JOIN reactord_events e ON e.session = s.id AND e.seq > s.version - $2
                WHERE s.id = $1 ORDER BY e.seq
                """, [id, String(historyLength)])
            return try Self.storedSession(id, rows)
        }
    }

    package func sessions(lastActiveBefore time: Double, limit: Int) throws(StoreError) -> [String] {
        try reading { connection in
            // A session some node holds live is in use there, whatever its stored time says.
            let rows = try connection.execute(
                """
                SELECT id FROM reactord_sessions
                WHERE last_active < $1 AND (holder IS NULL OR lease_until < now()) LIMIT $2
                """, [String(time), String(limit)])
            return (0..<rows.count).compactMap { rows.string($0, 0) }
        }
    }

    package func answer(scope: String, key: String) throws(StoreError) -> StoredAnswer? {
        try reading { connection in
            let rows = try connection.execute(
                "SELECT request, status, headers, body, expires FROM reactord_answers WHERE scope = $1 AND key = $2",
                [scope, key])
            return rows.count > 0 ? Self.storedAnswer(scope: scope, key: key, rows) : nil
        }
    }

    /// The first row of `SELECT request, status, headers, body, expires` as an answer.
    private static func storedAnswer(scope: String, key: String, _ rows: PostgresResult) -> StoredAnswer {
        StoredAnswer(
            scope: scope, key: key, request: rows.string(0, 0) ?? "", status: Int(rows.int64(0, 1) ?? 0),
            headers: StoredAnswer.fields(fromText: rows.string(0, 2) ?? ""), body: rows.bytes(0, 3) ?? [],
            expires: rows.double(0, 4) ?? 0, session: nil)
    }

    package func answerCount() throws(StoreError) -> Int {
        try reading { connection in
            Int(
                try connection.execute(
                    "SELECT count(*) FROM reactord_answers WHERE status <> \(StoredAnswer.claimStatus)"
                ).int64(0, 0) ?? 0)
        }
    }

    /// A claim is a placeholder row, so the key's primary key decides between racing nodes: with an
    /// expiry on the database's clock, as leases have, and written as the 409 a repeat gets meanwhile
    /// (`claimBody`), so that a node of a version before claims replays that, not a broken answer.
    package func claimAnswer(
        scope: String, key: String, request: String, token: String, duration: Double
    ) throws(StoreError) -> StoredAnswer? {
        try reading { connection in
            // A row that another run inserts or releases meanwhile (after this statement's
            // snapshot) is not returned by the SELECT: then the next round decides.
            for _ in 0..<5 {
                let claimed = try connection.execute(
                    """
                    INSERT INTO reactord_answers (scope, key, request, status, headers, body, expires)
                    VALUES ($1, $2, $3, \(StoredAnswer.claimStatus), $6, $4, extract(epoch FROM now()) + $5)
                    ON CONFLICT (scope, key) DO UPDATE SET
                        request = excluded.request, body = excluded.body, expires = excluded.expires
                    WHERE reactord_answers.status = \(StoredAnswer.claimStatus)
                        AND reactord_answers.expires < extract(epoch FROM now())
                    RETURNING 1
                    """, [scope, key, request, Self.claimBody(token), String(duration), Self.claimHeaders])
                if claimed.count > 0 { return nil }
                let rows = try connection.execute(
                    "SELECT request, status, headers, body, expires FROM reactord_answers WHERE scope = $1 AND key = $2",
                    [scope, key])
                if rows.count > 0 { return Self.storedAnswer(scope: scope, key: key, rows) }
            }
            throw StoreError.unavailable("the idempotency key could not be claimed", cause: "\(name): it kept changing")
        }
    }

    /// A claim's row as the 409 answer it stands for, its run's token inside (what releases and
    /// replaces match it by).
    private static func claimBody(_ token: String) -> String {
        #"{"type":"about:blank","title":"Conflict","status":409,"detail":"a request with this "#
            + #"Idempotency-Key is still running; retry once it is answered","claim":"\#(token)"}"#
    }
    private static let claimHeaders = "Content-Type: application/problem+json\nRetry-After: 1\n"

    package func releaseClaim(scope: String, key: String, token: String) throws(StoreError) {
        _ = try reading { connection in
            try connection.execute(
                "DELETE FROM reactord_answers WHERE scope = $1 AND key = $2 AND status = \(StoredAnswer.claimStatus) "
                    + "AND body = $3", [scope, key, Self.claimBody(token)])
        }
    }

    @discardableResult
    package func commit(_ changes: [StoreChange], historyLength: Int, actionLogLength: Int) throws(StoreError) -> Set<
        String
    > {
        writeLock.lock()
        defer { writeLock.unlock() }
        let steps = Self.plan(changes)
        if steps.isEmpty { return [] }
        let connection = try writerConnection()
        // One statement commits by itself; several share a transaction.
        let transaction = steps.count > 1
        var outcome = CommitOutcome()
        // Once the commit is sent (the COMMIT, or the one statement that commits by itself), a lost
        // connection leaves it unknown whether it was stored.
        var isCommitSent = !transaction
        do {
            if transaction {
                try connection.execute("BEGIN")
                // A transaction of several statements takes all its rows' locks first, in order.
                try connection.execute(
                    "SELECT 1 FROM (\(Self.lockedInOrder("id = ANY($1::text[])"))) l",
                    [Self.array(strings: Self.sessionIDs(of: steps))])
            }
            for step in steps {
                switch step {
                case let .sessions(writes):
                    try write(
                        writes, historyLength: historyLength, actionLogLength: actionLogLength, on: connection,
                        into: &outcome)
                case let .delete(id, reason, idleBefore):
                    try delete(id, reason: reason, idleBefore: idleBefore, on: connection, into: &outcome)
                case let .activities(times):
                    try connection.execute(
                        """
                        UPDATE reactord_sessions s SET last_active = u.t FROM unnest($1::text[], $2::float8[]) u(id, t)
                            WHERE s.id = u.id AND s.last_active < u.t
                        """,
                        [
                            Self.array(strings: times.map(\.id)),
                            Self.array(strings: times.map { String($0.lastActive) }),
                        ])
                case let .user(json): try writeUser(json, on: connection)
                case let .answers(answers):
                    try keep(
                        answers.filter { $0.session.map { !outcome.refused.contains($0) } ?? true }, on: connection)
                case let .forgetAnswers(time, limit):
                    try connection.execute(
                        """
                        DELETE FROM reactord_answers WHERE (scope, key) IN
                            (SELECT scope, key FROM reactord_answers WHERE expires < $1
                             AND (status <> \(StoredAnswer.claimStatus) OR expires < extract(epoch FROM now())) LIMIT $2)
                        """, [String(time), String(limit)])
                case let .forgetLoggedActions(time, limit):
                    try connection.execute(
                        """
                        DELETE FROM reactord_action_log WHERE (session, number) IN
                            (SELECT session, number FROM reactord_action_log l WHERE time < $1
                                AND number < (SELECT max(number) FROM reactord_action_log m WHERE m.session = l.session)
                             LIMIT $2)
                        """, [String(time), String(max(limit, 0))])
                }
            }
            if transaction {
                isCommitSent = true
                try connection.execute("COMMIT")
            }
        } catch {
            if transaction && !connection.isBroken { _ = try? connection.execute("ROLLBACK") }
            if connection.isBroken { writer = nil }
            if isCommitSent, let lost = error as? PostgresError, lost.connectionLost {
                throw .outcomeUnknown(
                    "PostgreSQL was lost while committing: whether the change was stored is unknown",
                    cause: "\(name): \(lost.message)")
            }
            throw storeError(error)
        }
        leaseLock.lock()
        for (id, lease) in outcome.taken { leases[id] = lease }
        for id in outcome.dropped { leases[id] = nil }
        leaseLock.unlock()
        return outcome.refused
    }

    package func loggedActions(of session: String, after version: UInt64?, loggedSince time: Double, limit: Int)
        throws(StoreError) -> [LoggedAction]
    {
        try reading { connection in
            // One statement, one snapshot: the page, then (when it is full) the rest of its
            // last entry's version, so that a page never ends between two entries of one version.
            let rows = try connection.execute(
                """
                WITH p AS (
                    SELECT \(Self.logColumns) FROM reactord_action_log
                    WHERE session = $1 AND version > $2 AND time >= $4 ORDER BY version, number LIMIT $3),
                last AS (SELECT number, version FROM p ORDER BY version DESC, number DESC LIMIT 1)
                SELECT * FROM p
                UNION ALL
                SELECT \(Self.logColumns) FROM reactord_action_log
                WHERE session = $1 AND (SELECT count(*) FROM p) = $3
                    AND version = (SELECT version FROM last) AND number > (SELECT number FROM last) AND time >= $4
                ORDER BY version, number
                """, [session, String(version.map { Int64(clamping: $0) } ?? -1), String(max(limit, 0)), String(time)])
            return try (0..<rows.count).map { (row) throws(StoreError) in try Self.loggedAction(rows, row) }
        }
    }

    package func state(of session: String, at version: UInt64) throws(StoreError) -> StateAtVersion {
        try reading { connection in
            // The newest state event at or before `version` is its state when every event after
            // it up to `version` is there too (a run with --history 0 writes none, and leaves a
            // gap after the older ones). A refusal names the oldest state kept after `version`:
            // with none at or before it, the oldest kept; in a gap, the oldest after the gap.
            let rows = try connection.execute(
                """
                SELECT s.state, s.version, k.data,
                    CASE WHEN $2::bigint < s.version THEN
                        (SELECT min(seq) FROM reactord_events WHERE session = $1 AND pulse IS NULL AND seq > $2::bigint)
                    END,
                    (SELECT count(*) FROM reactord_events WHERE session = $1 AND seq > k.seq AND seq <= $2::bigint)
                        = $2::bigint - k.seq
                FROM reactord_sessions s
                LEFT JOIN LATERAL (
                    SELECT seq, data FROM reactord_events
                    WHERE $2::bigint < s.version AND session = $1 AND seq <= $2::bigint AND pulse IS NULL
                    ORDER BY seq DESC LIMIT 1) k ON true
                WHERE s.id = $1
                """, [session, String(Int64(clamping: version))])
            guard rows.count > 0 else { return .noSession }
            let current = try storedCount(rows.int64(0, 1) ?? 0, "version")
            if version == current { return .found(rows.bytes(0, 0) ?? []) }
            if version > current { return .notYet(current: current) }
            if let kept = rows.bytes(0, 2), rows.bool(0, 4) { return .found(kept) }
            return .notRetained(
                oldest: rows.isNull(0, 3) ? current : try storedCount(rows.int64(0, 3) ?? 0, "event id"))
        }
    }

    package func sessions(after id: String, limit: Int) throws(StoreError) -> [SessionSummary] {
        try reading { connection in
            // In byte order, as the SQLite engine compares ids, whatever the database's collation.
            let rows = try connection.execute(
                """
                SELECT id, kind, owner, version, created_at, last_active FROM reactord_sessions
                WHERE id COLLATE "C" > $1 ORDER BY id COLLATE "C" LIMIT $2
                """, [id, String(max(limit, 0))])
            return try (0..<rows.count).map { (row) throws(StoreError) in
                SessionSummary(
                    id: rows.string(row, 0) ?? "", kind: rows.string(row, 1) ?? "", owner: rows.string(row, 2),
                    version: try storedCount(rows.int64(row, 3) ?? 0, "version"),
                    createdAt: rows.double(row, 4) ?? 0, lastActive: rows.double(row, 5) ?? 0)
            }
        }
    }

    package func close() {
        leaseLock.lock()
        let wasOpen = !closed
        closed = true
        let held = Array(leases.keys)
        let listener = self.listener
        self.listener = nil
        leaseLock.unlock()
        guard wasOpen else { return }
        releaseInDatabase(held)
        listener?.stop()
        pool.close()
        writeLock.lock()
        writer = nil
        writeLock.unlock()
    }

    // MARK: - ClusterStore

    package func advertise(_ address: String) {
        leaseLock.lock()
        self.address = address
        leaseLock.unlock()
    }

    package func claim(_ id: String, historyLength: Int, onlyAtThisAddress: Bool = false) throws(StoreError)
        -> SessionClaim
    {
        let address = currentAddress()
        for _ in 0..<3 {
            let started = monotonicNow()
            let claimed: (StoredSession?, Int64, String?, Bool) = try reading { connection in
                let rows = try connection.execute(
                    """
                    WITH c AS (
                        UPDATE reactord_sessions
                        SET holder = $2, holder_address = $3,
                            fence = CASE WHEN holder = $2 THEN fence ELSE fence + 1 END,
                            lease_until = now() + $4::float8 * interval '1 second'
                        WHERE id = $1 AND (holder IS NULL OR holder = $2 OR lease_until < now()
                                           OR (holder_address = $3 AND $3 <> '' AND
                                               lease_until - $4::float8 * interval '1 second' < to_timestamp($6)))
                            AND (NOT $7::bool OR holder_address = $3)
                        RETURNING kind, owner, state, version, created_at, last_active, fence)
                    SELECT c.kind, c.owner, c.state, c.version, c.created_at, c.last_active, e.seq, e.pulse, e.data,
                           (SELECT max(number) FROM reactord_action_log WHERE session = $1), c.fence
                    FROM c LEFT JOIN reactord_events e ON e.session = $1 AND e.seq > c.version - $5
                    ORDER BY e.seq
                    """,
                    [
                        id, nodeID, address, String(leaseDuration), String(historyLength), String(openedAt),
                        onlyAtThisAddress ? "true" : "false",
                    ])
                if let session = try Self.storedSession(id, rows) {
                    return (session, rows.int64(0, 10) ?? 0, nil, false)
                }
                let holder = try connection.execute(
                    """
                    SELECT holder_address, holder IS NOT NULL AND lease_until >= now() FROM reactord_sessions WHERE id = $1
                    """, [id])
                return (
                    nil, 0, holder.count == 0 ? nil : holder.string(0, 0) ?? "", holder.count > 0 && holder.bool(0, 1)
                )
            }
            if let session = claimed.0 {
                leaseLock.lock()
                leases[id] = Lease(fence: claimed.1, validUntil: started + leaseDuration - margin, since: started)
                leaseLock.unlock()
                return .taken(session)
            }
            guard let holderAddress = claimed.2 else { return .missing }
            if claimed.3 { return .heldElsewhere(address: holderAddress) }
            if onlyAtThisAddress { return .heldElsewhere(address: "") }  // free: not this node's to take
            // The lease passed between the two statements: try again.
        }
        throw .unavailable("could not claim session \(id): its lease kept changing hands")
    }

    package func holds(_ id: String) -> Bool {
        leaseLock.lock()
        defer { leaseLock.unlock() }
        guard let lease = leases[id] else { return false }
        return monotonicNow() < lease.validUntil
    }

    package func renewLeases() throws(StoreError) -> [String] {
        let started = monotonicNow()
        leaseLock.lock()
        let held = leases.map { ($0.key, $0.value.fence) }
        leaseLock.unlock()
        if held.isEmpty { return [] }
        // Only leases this node still counts as its own: one it let go of locally runs out.
        let renewed: [String: Int64] = try reading { connection in
            let rows = try connection.execute(
                """
                UPDATE reactord_sessions s SET lease_until = now() + $2::float8 * interval '1 second'
                FROM (\(Self.lockedInOrder("holder = $1 AND id = ANY($3::text[])"))) l
                WHERE s.id = l.id RETURNING s.id, s.fence
                """, [nodeID, String(leaseDuration), Self.array(strings: held.map(\.0))])
            var renewed: [String: Int64] = [:]
            for row in 0..<rows.count { renewed[rows.string(row, 0) ?? ""] = rows.int64(row, 1) }
            return renewed
        }
        var lost: [String] = []
        leaseLock.lock()
        for (id, _) in held {
            guard var lease = leases[id] else { continue }
            if let fence = renewed[id], fence == lease.fence {
                lease.validUntil = max(lease.validUntil, started + leaseDuration - margin)
                leases[id] = lease
            } else if lease.since < started {
                leases[id] = nil
                lost.append(id)
            }
        }
        leaseLock.unlock()
        return lost
    }

    package func release(_ ids: [String]) {
        leaseLock.lock()
        for id in ids { leases[id] = nil }
        leaseLock.unlock()
        releaseInDatabase(ids)
    }

    package func events(of id: String, after seq: UInt64, limit: Int) throws(StoreError) -> SessionEvents? {
        try reading { connection in
            // One statement, one snapshot: the events and the state agree.
            let rows = try connection.execute(
                """
                SELECT s.state, s.version, e.seq, e.pulse, e.data FROM reactord_sessions s
                LEFT JOIN LATERAL (
                    SELECT seq, pulse, data FROM reactord_events
                    WHERE session = s.id AND seq > $2 ORDER BY seq LIMIT $3) e ON true
                WHERE s.id = $1 ORDER BY e.seq
                """, [id, String(seq), String(limit)])
            guard rows.count > 0 else { return nil }
            var result = SessionEvents(
                version: try storedCount(rows.int64(0, 1) ?? 0, "version"),
                stateJSON: rows.bytes(0, 0) ?? [], events: [])
            for row in 0..<rows.count where !rows.isNull(row, 2) {
                result.events.append(
                    StoredEvent(
                        seq: try storedCount(rows.int64(row, 2) ?? 0, "event id"),
                        pulse: rows.string(row, 3), json: rows.bytes(row, 4) ?? []))
            }
            return result
        }
    }

    package func watched(_ ids: [String]) throws(StoreError) -> [String: WatchedSession] {
        if ids.isEmpty { return [:] }
        return try reading { connection in
            let rows = try connection.execute(
                """
                SELECT id, version, holder IS NOT NULL AND lease_until >= now()
                FROM reactord_sessions WHERE id = ANY($1::text[])
                """, [Self.array(strings: ids)])
            var found: [String: WatchedSession] = [:]
            for row in 0..<rows.count {
                found[rows.string(row, 0) ?? ""] = WatchedSession(
                    version: try storedCount(rows.int64(row, 1) ?? 0, "version"), isHeld: rows.bool(row, 2))
            }
            return found
        }
    }

    package func touch(_ ids: [String]) throws(StoreError) {
        if ids.isEmpty { return }
        _ = try reading { connection in
            try connection.execute(
                """
                UPDATE reactord_sessions s SET last_active = $2
                FROM (SELECT id FROM reactord_sessions WHERE id = ANY($1::text[]) AND last_active < $2
                      FOR UPDATE SKIP LOCKED) l
                WHERE s.id = l.id
                """, [Self.array(strings: ids), String(wallClockNow())])
        }
    }

    package func userChanges(after version: UInt64) throws(StoreError) -> [UserChange] {
        try reading { connection in
            let rows = try connection.execute(
                "SELECT version, data FROM reactord_user_changes WHERE version > $1 ORDER BY version", [String(version)]
            )
            return try (0..<rows.count).map { (row) throws(StoreError) in
                UserChange(version: try storedCount(rows.int64(row, 0) ?? 0, "user version"), json: rows.bytes(row, 1))
            }
        }
    }

    package func listen(_ wake: @escaping @Sendable (StoreWakeup) -> Void) {
        let listener = PostgresListener(connect: Self.connector(url: url, secrets: secrets, timeout: 2), wake: wake)
        leaseLock.lock()
        guard !closed, self.listener == nil else {
            leaseLock.unlock()
            return
        }
        self.listener = listener
        leaseLock.unlock()
        listener.start()
    }

    // MARK: - Commit

    private enum Step {
        case sessions([SessionWrite])
        case delete(id: String, reason: String, idleBefore: Double?)
        /// Sessions' last activities, by id: one statement for a sweep's unloads, however many.
        case activities([(id: String, lastActive: Double)])
        case user([UInt8]?)
        case answers([StoredAnswer])
        case forgetAnswers(expiredBefore: Double, limit: Int)
        case forgetLoggedActions(before: Double, limit: Int)
    }

    private struct CommitOutcome {
        var refused: Set<String> = []
        var taken: [String: Lease] = [:]
        var dropped: Set<String> = []
    }

    /// The session rows matching `condition`, locked in the order of their ids. Every statement
    /// that updates several sessions' rows takes their locks through this (or skips locked
    /// rows): one order for all, so two never wait for each other in a cycle, which PostgreSQL
    /// would break only after its deadlock timeout (1 s) by failing one of them.
    private static func lockedInOrder(_ condition: String) -> String {
        "SELECT id FROM reactord_sessions WHERE \(condition) ORDER BY id FOR UPDATE"
    }

    private static func sessionIDs(of steps: [Step]) -> [String] {
        var ids: [String] = []
        for step in steps {
            switch step {
            case let .sessions(writes): ids += writes.map(\.id)
            case let .delete(id, _, _): ids.append(id)
            case let .activities(times): ids += times.map(\.id)
            case .user, .answers, .forgetAnswers, .forgetLoggedActions: break
            }
        }
        return ids
    }

    /// The batch as few statements: every session write in one (a session written several
    /// times counts once, with its last state and all its events), a delete or a user change
    /// on its own. A delete of a session written earlier in the batch comes after that write.
    /// A write that does not build on the one before it (two hubs of one session: one let go,
    /// one claimed since) goes in a statement of its own, checked against its own base.
    private static func plan(_ changes: [StoreChange]) -> [Step] {
        var steps: [Step] = []
        var pending: [SessionWrite] = []
        var index: [String: Int] = [:]
        func flush() {
            if !pending.isEmpty { steps.append(.sessions(pending)) }
            pending = []
            index = [:]
        }
        for change in changes {
            switch change {
            case let .session(write):
                if let at = index[write.id], write.base != nil && write.base != pending[at].version { flush() }
                if let at = index[write.id] {
                    var merged = pending[at]
                    merged.stateJSON = write.stateJSON
                    merged.version = write.version
                    merged.lastActive = write.lastActive ?? merged.lastActive
                    merged.events += write.events
                    merged.answers += write.answers
                    merged.loggedActions += write.loggedActions
                    pending[at] = merged
                } else {
                    index[write.id] = pending.count
                    pending.append(write)
                }
            case let .delete(id, reason, idleBefore):
                if index[id] != nil { flush() }
                steps.append(.delete(id: id, reason: reason, idleBefore: idleBefore))
            case let .activity(id, lastActive):
                // After the writes before it, as the SQLite engine applies them in order.
                flush()
                if case let .activities(previous)? = steps.last {
                    steps[steps.count - 1] = .activities(previous + [(id, lastActive)])
                } else {
                    steps.append(.activities([(id, lastActive)]))
                }
            case let .user(json):
                steps.append(.user(json))
            case let .answer(answer):
                // After the write of its session (a delete, or a change of the user, comes before it).
                flush()
                if case let .answers(previous)? = steps.last {
                    steps[steps.count - 1] = .answers(previous + [answer])
                } else {
                    steps.append(.answers([answer]))
                }
            case let .forgetAnswers(time, limit):
                steps.append(.forgetAnswers(expiredBefore: time, limit: limit))
            case let .forgetLoggedActions(time, limit):
                // After the writes before it, as the SQLite engine applies them in order.
                flush()
                steps.append(.forgetLoggedActions(before: time, limit: limit))
            }
        }
        flush()
        return steps
    }

    private static let trimStep: Int64 = 64

    /// Every session write of the batch in one statement: the fence check in the UPDATE's
    /// WHERE, events, answers and action log entries inserted only for the sessions it wrote,
    /// one notification per session.
    private func write(
        _ writes: [SessionWrite], historyLength: Int, actionLogLength: Int, on connection: PostgresConnection,
        into outcome: inout CommitOutcome
    ) throws {
        leaseLock.lock()
        let fences = writes.map { $0.isNew ? 0 : leases[$0.id]?.fence }
        let address = self.address
        leaseLock.unlock()
        var statement = SessionWriteStatement()
        var answers: [StoredAnswer] = []
        /// Each answer's session: the write it came with (whatever the answer says).
        var answerSessions: [String?] = []
        var logged: [(session: String, entry: LoggedAction)] = []
        var sent: [String] = []
        for (write, fence) in zip(writes, fences) {
            let version = Int64(clamping: write.version)
            if write.isNew {
                statement.news.ids.append(write.id)
                statement.news.kinds.append(write.kind)
                statement.news.owners.append(write.owner)
                statement.news.states.append(String(decoding: write.stateJSON, as: UTF8.self))
                statement.news.versions.append(String(version))
                statement.news.createdAt.append(String(write.createdAt))
                statement.news.lastActive.append(String(write.lastActive ?? write.createdAt))
            } else if let fence {
                statement.updates.ids.append(write.id)
                statement.updates.states.append(String(decoding: write.stateJSON, as: UTF8.self))
                statement.updates.versions.append(String(version))
                statement.updates.lastActive.append(write.lastActive.map { String($0) })
                statement.updates.fences.append(String(fence))
                statement.updates.bases.append(write.base.map { String(Int64(clamping: $0)) })
            } else {
                // This node does not hold it (never took it, or lost it): nothing of it is written.
                outcome.refused.insert(write.id)
                continue
            }
            sent.append(write.id)
            answers += write.answers
            answerSessions += repeatElement(Optional(write.id), count: write.answers.count)
            if actionLogLength > 0, let first = write.loggedActions.first, let last = write.loggedActions.last {
                // Trimmed in steps of `trimStep` entries, as the SQLite engine does; when it is,
                // only what the log keeps is inserted: the trim never meets a row inserted here.
                let oldestKept = Int64(clamping: last.number) - Int64(actionLogLength)
                let previous = Int64(clamping: first.number) - 1 - Int64(actionLogLength)
                let trim = oldestKept > 0 && oldestKept / Self.trimStep != max(previous, 0) / Self.trimStep
                if trim {
                    statement.logTrims.sessions.append(write.id)
                    statement.logTrims.upto.append(String(oldestKept))
                }
                // One row per number (a later entry replaces an earlier one, as in the SQLite
                // engine): one statement may not update a row twice.
                var numbers = Set<UInt64>()
                let entries = write.loggedActions.reversed().filter { numbers.insert($0.number).inserted }.reversed()
                for entry in entries where !trim || Int64(clamping: entry.number) > oldestKept {
                    logged.append((write.id, entry))
                }
            }
            guard let last = write.events.last else { continue }
            statement.notify.ids.append(write.id)
            statement.notify.seqs.append(String(last.seq))
            statement.notify.carried.append(write.version == last.seq ? PostgresListener.carried(write.events) : "")
            guard historyLength > 0 else { continue }
            // Only what the history keeps: the trim below never meets a row inserted here.
            let oldestKept = version - Int64(historyLength)
            for event in write.events where Int64(clamping: event.seq) > oldestKept {
                statement.events.sessions.append(write.id)
                statement.events.seqs.append(String(event.seq))
                statement.events.pulses.append(event.pulse)
                statement.events.data.append(String(decoding: event.json, as: UTF8.self))
            }
            // Trimmed in steps of `trimStep` events, as the SQLite engine does.
            let previous = Int64(clamping: write.events[0].seq) - 1 - Int64(historyLength)
            if oldestKept > 0, oldestKept / Self.trimStep != max(previous, 0) / Self.trimStep {
                statement.trims.sessions.append(write.id)
                statement.trims.upto.append(String(oldestKept))
            }
        }
        if sent.isEmpty { return }
        let started = monotonicNow()
        statement.answers = (
            Self.columns(of: answers), answers.map { $0.claim.map(Self.claimBody) }, answerSessions
        )
        statement.logged = Self.columns(of: logged)
        let (sql, parameters, name) = statement.sql(
            node: nodeID, address: address, leaseDuration: leaseDuration, sentAt: Self.sentAt(),
            lockedInOrder: Self.lockedInOrder, keeping: Self.keeping)
        let rows = try connection.execute(sql, parameters, preparedAs: name)
        var written = Set<String>()
        for row in 0..<rows.count { written.insert(rows.string(row, 0) ?? "") }
        for (write, fence) in zip(writes, fences) where fence != nil {
            if !written.contains(write.id) {
                // Another node took it over (its fence moved on), it was deleted meanwhile, or it was
                // written past this write's base.
                outcome.refused.insert(write.id)
                outcome.dropped.insert(write.id)
            } else if write.isNew {
                outcome.taken[write.id] = Lease(fence: 1, validUntil: started + leaseDuration - margin, since: started)
            }
        }
    }

    private func keep(_ answers: [StoredAnswer], on connection: PostgresConnection) throws {
        if answers.isEmpty { return }
        try connection.execute(
            """
            WITH answers AS (
                SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::integer[], $5::text[], $6::text[],
                                     $7::float8[], $8::text[])
                    AS a(scope, key, request, status, headers, body, expires, claim)),
            \(Self.keeping("answers"))
            SELECT 1
            """, (Self.columns(of: answers) + [answers.map { $0.claim.map(Self.claimBody) }]).map(Self.array))
    }

    /// The CTEs that keep the answers of the relation `answers` (an answer's columns and its
    /// `claim`). A key kept already keeps its first answer; a claimed key's answer replaces its
    /// own run's claim only (not a claim taken over since its own passed: that key is another run's).
    private static func keeping(_ answers: String) -> String {
        """
        kept AS (
            INSERT INTO reactord_answers (scope, key, request, status, headers, body, expires)
            SELECT scope, key, request, status, headers, body, expires FROM \(answers)
            ON CONFLICT (scope, key) DO NOTHING),
        replaced AS (
            UPDATE reactord_answers r SET
                request = a.request, status = a.status, headers = a.headers, body = a.body, expires = a.expires
            FROM \(answers) a
            WHERE r.scope = a.scope AND r.key = a.key AND r.status = \(StoredAnswer.claimStatus) AND r.body = a.claim)
        """
    }

    /// An answer's columns as the statements above unnest them, in their order.
    private static func columns(of answers: [StoredAnswer]) -> [[String?]] {
        [
            answers.map(\.scope), answers.map(\.key), answers.map(\.request), answers.map { String($0.status) },
            answers.map(\.headerText), answers.map { String(decoding: $0.body, as: UTF8.self) },
            answers.map { String($0.expires) },
        ]
    }

    /// Log entries' columns as the statement above unnests them, in their order.
    private static func columns(of logged: [(session: String, entry: LoggedAction)]) -> [[String?]] {
        [
            logged.map(\.session), logged.map { String(Int64(clamping: $0.entry.number)) },
            logged.map(\.entry.cause.rawValue),
            logged.map { $0.entry.origin.map { String(Int64(clamping: $0)) } },
            logged.map { $0.entry.firstVersion.map { String(Int64(clamping: $0)) } },
            logged.map { String(Int64(clamping: $0.entry.version)) },
            logged.map { $0.entry.json.map { String(decoding: $0, as: UTF8.self) } },
            logged.map(\.entry.subject), logged.map(\.entry.idempotencyKey), logged.map { String($0.entry.time) },
        ]
    }

    /// Deleted when this node holds it or nobody holds it live; a live lease of another node
    /// refuses it; a session not stored is already gone.
    /// `idleBefore`: an expiry, which leaves a session used since it was found expired.
    private func delete(
        _ id: String, reason: String, idleBefore: Double?, on connection: PostgresConnection,
        into outcome: inout CommitOutcome
    ) throws {
        let result = try connection.execute(
            """
            WITH d AS (
                DELETE FROM reactord_sessions
                WHERE id = $1 AND (holder = $2 OR holder IS NULL OR lease_until < now())
                    AND ($3::float8 IS NULL OR last_active < $3::float8) RETURNING id),
            e AS (DELETE FROM reactord_events WHERE session = $1 AND EXISTS (SELECT 1 FROM d)),
            l AS (DELETE FROM reactord_action_log WHERE session = $1 AND EXISTS (SELECT 1 FROM d))
            SELECT (SELECT count(*) FROM d), EXISTS (SELECT 1 FROM reactord_sessions WHERE id = $1)
            """, [id, nodeID, idleBefore.map { String($0) }])
        if result.int64(0, 0) ?? 0 > 0 {
            try connection.execute("SELECT pg_notify('reactord', $1)", ["d \(reason) \(id)"])
            outcome.dropped.insert(id)
        } else if result.bool(0, 1) {
            outcome.refused.insert(id)
        }
    }

    private func writeUser(_ json: [UInt8]?, on connection: PostgresConnection) throws {
        try connection.execute(
            """
            WITH v AS (UPDATE reactord_user SET data = $1::text, version = version + 1 WHERE id = 1 RETURNING version),
            c AS (INSERT INTO reactord_user_changes (version, data) SELECT version, $1::text FROM v),
            t AS (DELETE FROM reactord_user_changes WHERE version <= (SELECT version FROM v) - 1000)
            SELECT version, pg_notify('reactord', 'u ' || version) FROM v
            """, [json.map { String(decoding: $0, as: UTF8.self) }])
    }

    // MARK: - Connections

    private static func connector(url: String, secrets: [String], timeout: Int = 5)
        -> @Sendable () throws(PostgresError) -> PostgresConnection
    {
        { @Sendable () throws(PostgresError) in
            try PostgresConnection(uri: url, secrets: secrets, connectTimeout: timeout)
        }
    }

    private func writerConnection() throws(StoreError) -> PostgresConnection {
        if let writer, writer.isUsableAfterIdle { return writer }
        writer = nil
        if isClosed { throw .unavailable("the store is closed", cause: name) }
        do {
            let fresh = try PostgresConnection(uri: url, secrets: secrets)
            // The write statement is prepared (SessionWriteStatement): planned once, for any
            // values, it costs PostgreSQL a third less a commit. Its plan is made while the tables
            // may still be small, where a scan looks cheaper than an index; on this connection
            // every statement finds its rows through an index: none is to scan a table.
            try fresh.execute("SET plan_cache_mode = force_generic_plan; SET enable_seqscan = off")
            writer = fresh
            return fresh
        } catch {
            throw storeError(error)
        }
    }

    private var isClosed: Bool {
        leaseLock.lock()
        defer { leaseLock.unlock() }
        return closed
    }

    private func currentAddress() -> String {
        leaseLock.lock()
        defer { leaseLock.unlock() }
        return address
    }

    private func reading<T>(_ body: (PostgresConnection) throws -> T) throws(StoreError) -> T {
        do {
            guard let result = try pool.with(body) else {
                throw StoreError.unavailable("the store is closed", cause: name)
            }
            return result
        } catch {
            throw storeError(error)
        }
    }

    package func reserveCreation(_ id: String, owner: String, limit: Int) throws(StoreError) -> Bool {
        try reading { connection in
            // The lock first, in a statement of its own: the count that follows takes its snapshot
            // after the lock is held (read committed, whatever the database's default), so it sees
            // what the owner's last creation took. A lock not had within 2 s is a 503 to retry,
            // not a connection of the pool held meanwhile.
            try connection.execute("BEGIN ISOLATION LEVEL READ COMMITTED; SET LOCAL lock_timeout = '2s'")
            do {
                try connection.execute("SELECT pg_advisory_xact_lock(\(Self.creationLock), hashtext($1))", [owner])
                // A session stored and its place still taken are one: counted by their id once.
                let taken = try connection.execute(
                    """
                    WITH gone AS (DELETE FROM reactord_creations WHERE owner = $1 AND until < now()),
                    held AS (
                        SELECT count(*) AS n FROM (
                            SELECT id FROM reactord_sessions WHERE owner = $1
                            UNION SELECT id FROM reactord_creations WHERE owner = $1 AND until >= now()) c)
                    INSERT INTO reactord_creations (id, owner, until)
                    SELECT $2, $1, now() + interval '1 minute' FROM held WHERE n < $3
                    RETURNING 1
                    """, [owner, id, String(limit)])
                try connection.execute("COMMIT")
                return taken.count > 0
            } catch {
                if !connection.isBroken { _ = try? connection.execute("ROLLBACK") }
                throw error
            }
        }
    }

    @discardableResult
    package func releaseCreation(_ id: String) -> Bool {
        let released = try? pool.with { connection in
            try connection.execute("DELETE FROM reactord_creations WHERE id = $1", [id])
        }
        return released != nil
    }

    /// The advisory locks' first key for creations (the owner's hash is the second): "rctd".
    private static let creationLock: Int32 = 0x7263_7464

    private func releaseInDatabase(_ ids: [String]) {
        if ids.isEmpty { return }
        // Best effort: a lease not released runs out by itself.
        _ = try? pool.with { connection in
            try connection.execute(
                """
                UPDATE reactord_sessions s SET holder = NULL, holder_address = NULL
                FROM (\(Self.lockedInOrder("holder = $1 AND id = ANY($2::text[])"))) l
                WHERE s.id = l.id
                """, [nodeID, Self.array(strings: ids)])
        }
    }

    /// A full disk is 507 to the client, damaged data 409 or 500; anything else 503.
    private func storeError(_ error: any Error) -> StoreError {
        if let error = error as? StoreError { return error }
        guard let error = error as? PostgresError else {
            return .unavailable("the store failed", cause: "\(name): \(error)")
        }
        let cause = "\(name): \(error.message)"
        if error.sqlState == "53100" { return .full("the store is out of disk space", cause: cause) }
        // data_corrupted, index_corrupted
        if error.sqlState == "XX001" || error.sqlState == "XX002" {
            return .damaged("the store's data is damaged", cause: cause)
        }
        if error.connectionLost { return .unavailable("PostgreSQL is unreachable", cause: cause) }
        return .unavailable("the store failed", cause: cause)
    }

    // MARK: - Values

    private static func storedSession(_ id: String, _ rows: PostgresResult) throws(StoreError) -> StoredSession? {
        guard rows.count > 0 else { return nil }
        var session = StoredSession(
            id: id, kind: rows.string(0, 0) ?? "", owner: rows.string(0, 1), stateJSON: rows.bytes(0, 2) ?? [],
            version: try storedCount(rows.int64(0, 3) ?? 0, "version"), createdAt: rows.double(0, 4) ?? 0,
            lastActive: rows.double(0, 5) ?? 0, events: [],
            lastLoggedAction: rows.isNull(0, 9) ? 0 : try storedCount(rows.int64(0, 9) ?? 0, "action log number"))
        for row in 0..<rows.count where !rows.isNull(row, 6) {
            session.events.append(
                StoredEvent(
                    seq: try storedCount(rows.int64(row, 6) ?? 0, "event id"),
                    pulse: rows.string(row, 7), json: rows.bytes(row, 8) ?? []))
        }
        return session
    }

    /// The columns `loggedAction(_:_:)` reads, in its order.
    private static let logColumns =
        "number, cause, origin, first_version, version, action, subject, idempotency_key, time"

    private static func loggedAction(_ rows: PostgresResult, _ row: Int) throws(StoreError) -> LoggedAction {
        let causeText = rows.string(row, 1) ?? ""
        guard let cause = LoggedAction.Cause(rawValue: causeText) else {
            throw .damaged("its stored action log is damaged", cause: "unknown cause \(causeText)")
        }
        return LoggedAction(
            number: try storedCount(rows.int64(row, 0) ?? 0, "action log number"), cause: cause,
            origin: rows.isNull(row, 2) ? nil : try storedCount(rows.int64(row, 2) ?? 0, "action log origin"),
            firstVersion: rows.isNull(row, 3) ? nil : try storedCount(rows.int64(row, 3) ?? 0, "first version"),
            version: try storedCount(rows.int64(row, 4) ?? 0, "version"), json: rows.bytes(row, 5),
            subject: rows.string(row, 6), idempotencyKey: rows.string(row, 7), time: rows.double(row, 8) ?? 0)
    }

    /// A PostgreSQL array literal of `items` (NULL for nil), every element quoted. Made from
    /// the bytes: the states and events in a commit's arrays are JSON, full of quotes to escape.
    static func array(_ items: [String?]) -> String {
        if items.isEmpty { return "{}" }  // most of a commit's columns
        var text: [UInt8] = []
        text.reserveCapacity(items.reduce(2) { $0 + ($1?.utf8.count ?? 4) + 3 })
        text.append(UInt8(ascii: "{"))
        for (index, item) in items.enumerated() {
            if index > 0 { text.append(UInt8(ascii: ",")) }
            guard var item else {
                text.append(contentsOf: "NULL".utf8)
                continue
            }
            text.append(UInt8(ascii: "\""))
            item.withUTF8 { bytes in
                var run = 0
                for (offset, byte) in bytes.enumerated() where byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\")
                {
                    text.append(contentsOf: bytes[run..<offset])
                    text.append(UInt8(ascii: "\\"))
                    run = offset
                }
                text.append(contentsOf: bytes[run...])
            }
            text.append(UInt8(ascii: "\""))
        }
        text.append(UInt8(ascii: "}"))
        return String(decoding: text, as: UTF8.self)
    }

    static func array(strings items: [String]) -> String { array(items.map(Optional.some)) }

    /// This node's clock in seconds since 1970, to the millisecond (the notification lag).
    private static func sentAt() -> String {
        let milliseconds = Int64(wallClockNow() * 1000)
        let fraction = String(milliseconds % 1000)
        return "\(milliseconds / 1000).\(String(repeating: "0", count: 3 - fraction.count))\(fraction)"
    }
}
