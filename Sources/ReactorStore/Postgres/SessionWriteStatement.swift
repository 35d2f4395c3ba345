/// The one statement that writes a batch's sessions, built from only the parts the batch has
/// rows for: PostgreSQL runs every CTE of a statement, even one over an empty array, and most
/// batches are updates with their events and log entries alone.
struct SessionWriteStatement {
    var updates = (
        ids: [String?](), states: [String?](), versions: [String?](), lastActive: [String?](), fences: [String?](),
        bases: [String?]()
    )
    var news = (
        ids: [String?](), kinds: [String?](), owners: [String?](), states: [String?](), versions: [String?](),
        createdAt: [String?](), lastActive: [String?]()
    )
    var events = (sessions: [String?](), seqs: [String?](), pulses: [String?](), data: [String?]())
    var trims = (sessions: [String?](), upto: [String?]())
    var notify = (ids: [String?](), seqs: [String?](), carried: [String?]())
    /// Each with its answer's columns as `PostgresStore.columns(of:)` orders them, its claim's
    /// body, and its session.
    var answers: (columns: [[String?]], claims: [String?], sessions: [String?]) = ([], [], [])
    var logged: [[String?]] = []
    var logTrims = (sessions: [String?](), upto: [String?]())

    /// The statement, its parameters and a name that is the same for every statement of the
    /// same parts: every write fenced and checked against its base version by the UPDATE's WHERE,
    /// the rows of the other parts kept only for the sessions it wrote, one notification per
    /// session. It returns the ids written.
    func sql(
        node: String, address: String, leaseDuration: Double, sentAt: String,
        lockedInOrder: (String) -> String, keeping: (String) -> String
    ) -> (text: String, parameters: [String?], name: String) {
        var p = Parameters()
        var parts: [String] = []
        // The statement's name says which parts it has, from the very tests that add them: one
        // name, one text.
        var shape = ""
        func has(_ rows: [String?]) -> Bool {
            shape += rows.isEmpty ? "0" : "1"
            return !rows.isEmpty
        }
        var written: [String] = []
        let holder = p.bind(node)
        if has(updates.ids) {
            let ids = p.array(updates.ids, "text")
            parts.append(
                """
                updated AS (
                    UPDATE reactord_sessions s
                    SET state = u.state, version = u.version, last_active = coalesce(u.last_active, s.last_active)
                    FROM unnest(\(ids), \(p.array(updates.states, "text")), \(p.array(updates.versions, "bigint")),
                                \(p.array(updates.lastActive, "float8")), \(p.array(updates.fences, "bigint")),
                                \(p.array(updates.bases, "bigint")))
                            AS u(id, state, version, last_active, fence, base),
                         (\(lockedInOrder("id = ANY(\(ids))"))) l
                    WHERE s.id = u.id AND l.id = u.id AND s.holder = \(holder) AND s.fence = u.fence
                        AND (u.base IS NULL OR s.version = u.base)
                    RETURNING s.id)
                """)
            written.append("SELECT id FROM updated")
        }
        if has(news.ids) {
            parts.append(
                """
                inserted AS (
                    INSERT INTO reactord_sessions
                        (id, kind, owner, state, version, created_at, last_active, holder, holder_address, lease_until,
                         fence)
                    SELECT n.id, n.kind, n.owner, n.state, n.version, n.created_at, n.last_active, \(holder),
                           \(p.bind(address)), now() + \(p.bind(String(leaseDuration)))::float8 * interval '1 second', 1
                    FROM unnest(\(p.array(news.ids, "text")), \(p.array(news.kinds, "text")),
                                \(p.array(news.owners, "text")), \(p.array(news.states, "text")),
                                \(p.array(news.versions, "bigint")), \(p.array(news.createdAt, "float8")),
                                \(p.array(news.lastActive, "float8")))
                        AS n(id, kind, owner, state, version, created_at, last_active)
                    ON CONFLICT (id) DO NOTHING
                    RETURNING id)
                """)
            written.append("SELECT id FROM inserted")
        }
        parts.append("written AS (\(written.joined(separator: " UNION ALL ")))")
        if has(events.sessions) {
            parts.append(
                """
                added AS (
                    INSERT INTO reactord_events (session, seq, pulse, data)
                    SELECT e.session, e.seq, e.pulse, e.data
                    FROM unnest(\(p.array(events.sessions, "text")), \(p.array(events.seqs, "bigint")),
                                \(p.array(events.pulses, "text")), \(p.array(events.data, "text")))
                        AS e(session, seq, pulse, data)
                    WHERE e.session IN (SELECT id FROM written)
                    ON CONFLICT (session, seq) DO UPDATE SET pulse = excluded.pulse, data = excluded.data)
                """)
        }
        if has(trims.sessions) {
            parts.append(
                """
                trimmed AS (
                    DELETE FROM reactord_events d
                    USING unnest(\(p.array(trims.sessions, "text")), \(p.array(trims.upto, "bigint"))) AS t(session, upto)
                    WHERE d.session = t.session AND d.seq <= t.upto AND t.session IN (SELECT id FROM written))
                """)
        }
        if has(answers.sessions) {
            let types = ["text", "text", "text", "integer", "text", "text", "float8"]
            let columns = zip(answers.columns, types).map { p.array($0, $1) }.joined(separator: ", ")
            parts.append(
                """
                answers AS (
                    SELECT a.* FROM unnest(\(columns), \(p.array(answers.claims, "text")),
                                           \(p.array(answers.sessions, "text")))
                        AS a(scope, key, request, status, headers, body, expires, claim, session)
                    WHERE a.session IN (SELECT id FROM written)),
                \(keeping("answers"))
                """)
        }
        if has(logged.first ?? []) {
            let types = ["text", "bigint", "text", "bigint", "bigint", "bigint", "text", "text", "text", "float8"]
            let columns = zip(logged, types).map { p.array($0, $1) }.joined(separator: ", ")
            parts.append(
                """
                logged AS (
                    INSERT INTO reactord_action_log
                        (session, number, cause, origin, first_version, version, action, subject, idempotency_key, time)
                    SELECT l.session, l.number, l.cause, l.origin, l.first_version, l.version, l.action, l.subject,
                           l.idempotency_key, l.time
                    FROM unnest(\(columns))
                        AS l(session, number, cause, origin, first_version, version, action, subject, idempotency_key,
                             time)
                    WHERE l.session IN (SELECT id FROM written)
                    ON CONFLICT (session, number) DO UPDATE SET
                        cause = excluded.cause, origin = excluded.origin, first_version = excluded.first_version,
                        version = excluded.version, action = excluded.action, subject = excluded.subject,
                        idempotency_key = excluded.idempotency_key, time = excluded.time)
                """)
        }
        if has(logTrims.sessions) {
            parts.append(
                """
                log_trimmed AS (
                    DELETE FROM reactord_action_log d
                    USING unnest(\(p.array(logTrims.sessions, "text")), \(p.array(logTrims.upto, "bigint")))
                        AS t(session, upto)
                    WHERE d.session = t.session AND d.number <= t.upto AND t.session IN (SELECT id FROM written))
                """)
        }
        let result =
            !has(notify.ids)
            ? "SELECT id FROM written"
            : """
            SELECT w.id, CASE WHEN x.seq IS NOT NULL
                              THEN pg_notify('reactord', 'e ' || x.seq || ' ' || \(p.bind(sentAt)) || ' ' || w.id
                                             || x.carried) END
            FROM written w
            LEFT JOIN unnest(\(p.array(notify.ids, "text")), \(p.array(notify.seqs, "bigint")),
                             \(p.array(notify.carried, "text"))) AS x(id, seq, carried) ON x.id = w.id
            """
        return (
            "WITH " + parts.joined(separator: ",\n") + "\n" + result, p.values,
            "reactord_write_" + shape
        )
    }
}

/// A statement's parameters as it is written: each placeholder binds the next one.
private struct Parameters {
    private(set) var values: [String?] = []

    mutating func bind(_ value: String?) -> String {
        values.append(value)
        return "$\(values.count)"
    }

    /// `column` as one array parameter of `type`'s elements.
    mutating func array(_ column: [String?], _ type: String) -> String {
        bind(PostgresStore.array(column)) + "::\(type)[]"
    }
}
