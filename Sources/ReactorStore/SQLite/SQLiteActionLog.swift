/// Where the SQLite engine keeps a session's action log: in the `events` table, under the
/// session's own key, because SQLite writes whole pages to its WAL and a row anywhere else costs
/// a page of its own per session per commit (BENCHMARKS.md, "The action log").
///
/// - An entry that ends on an event of the same commit rides on that event's row (its columns
///   `number`, `action`, `cause` and the rest): one row per action, where a row of its own made
///   a leaf fill, split and be written twice as often.
/// - Any other entry (one that changed nothing, one whose last event came in an earlier commit,
///   any with `--history 0`) is a row of its own, under a key counting down from far above any
///   event id, so that it lands beside the session's newest event; its `data` holds the action.
/// - The history's trim moves the entries of the events it drops to rows of their own; the log's
///   own trims clear an entry from an event's row and leave the event.
enum SQLiteActionLog {
    /// Every key of an entry's own row is above it; every event id below.
    static let base: Int64 = 1 << 62
    private static let top: Int64 = base + (1 << 61)

    /// The key of entry `number`'s own row (numbers stay far below 2^61).
    static func key(_ number: UInt64) -> Int64 { top - Int64(clamping: number) }

    /// An event, with the entry that ends on it.
    static func insert(
        _ event: StoredEvent, carrying entry: LoggedAction, of session: String, on writer: SQLiteConnection
    ) throws {
        try writer.statement(insertCarrying)
            .bind(
                .text(session), .integer(Int64(clamping: event.seq)), event.pulse.map(SQLiteValue.text) ?? .null,
                .utf8(event.json)
            )
            .bind(entry, from: 5)
            .bind(entry.json.map(SQLiteValue.utf8) ?? .null, at: 13)
            .run()
    }

    /// An entry as a row of its own.
    static func insert(_ entry: LoggedAction, of session: String, on writer: SQLiteConnection) throws {
        try writer.statement(insertAlone)
            .bind(.text(session), .integer(key(entry.number)), entry.json.map(SQLiteValue.utf8) ?? .text(""))
            .bind(entry, from: 4)
            .run()
    }

    /// Before the history drops the session's events up to `seq`: the entries they carry move to rows of their own.
    static func release(_ session: String, throughEvent seq: Int64, on writer: SQLiteConnection) throws {
        try writer.statement(
            composed:
                """
                INSERT OR REPLACE INTO events (session, seq, data, \(entryColumns))
                    SELECT session, \(top) - number, coalesce(action, ''), \(entryColumns) FROM events
                    WHERE session = ? AND seq <= ? AND number IS NOT NULL
                """
        ).bind(.text(session), .integer(seq)).run()
    }

    /// Drops the session's entries numbered `number` and below.
    static func drop(_ session: String, through number: UInt64, on writer: SQLiteConnection) throws {
        try writer.statement("DELETE FROM events WHERE session = ? AND seq >= ?").bind(
            .text(session), .integer(key(number))
        ).run()
        try writer.statement(composed: "UPDATE events SET \(cleared) WHERE session = ? AND seq < ? AND number <= ?")
            .bind(.text(session), .integer(base), .integer(Int64(clamping: number))).run()
    }

    /// Drops at most `limit` of the session's entries logged before `time`, all but its newest; how many it dropped.
    static func forget(_ session: String, before time: Double, limit: Int64, on writer: SQLiteConnection) throws
        -> Int64
    {
        guard let newest = try newestNumber(of: session, on: writer) else { return 0 }
        try writer.statement(
            """
            DELETE FROM events WHERE session = ?1 AND seq IN
                (SELECT seq FROM events WHERE session = ?1 AND seq > ?2 AND time < ?3 LIMIT ?4)
            """
        ).bind(.text(session), .integer(key(newest)), .real(time), .integer(limit)).run()
        let dropped = Int64(writer.changes)
        guard dropped < limit else { return dropped }
        try writer.statement(
            composed:
                """
                UPDATE events SET \(cleared) WHERE session = ?1 AND seq IN
                    (SELECT seq FROM events WHERE session = ?1 AND seq < ?2 AND number < ?3 AND time < ?4 LIMIT ?5)
                """
        ).bind(
            .text(session), .integer(base), .integer(Int64(clamping: newest)), .real(time), .integer(limit - dropped)
        )
        .run()
        return dropped + Int64(writer.changes)
    }

    /// The session's newest entry's number, nil when it has none. Only events up to `seq` are
    /// looked at: a caller that read the newer ones has their numbers.
    static func newestNumber(
        of session: String, eventsThrough seq: Int64 = base - 1,
        on connection: SQLiteConnection
    ) throws -> UInt64? {
        let newest = try connection.statement(
            composed:
                """
                SELECT (SELECT \(top) - min(seq) FROM events WHERE session = ?1 AND seq > ?2),
                       (SELECT max(number) FROM events WHERE session = ?1 AND seq <= ?3)
                """)
        try newest.bind(.text(session), .integer(base), .integer(min(seq, base - 1)))
        guard try newest.next() else { return nil }
        let numbers = try [0, 1].filter { !newest.isNull($0) }.map {
            try storedCount(newest.int64($0), "action log number")
        }
        return numbers.max()
    }

    /// The session's entries after `version` (nil: all), by version then number, at most `limit`
    /// but never ending inside a version (`ActionLogReading`).
    static func entries(
        of session: String, after version: UInt64?, loggedSince time: Double, limit: Int, on reader: SQLiteConnection
    ) throws -> [LoggedAction] {
        let page = try reader.statement(
            composed:
                """
                SELECT \(readColumns) FROM events WHERE session = ? AND cause IS NOT NULL AND version > ? AND time >= ?
                    ORDER BY version, 1 LIMIT ?
                """)
        try page.bind(
            .text(session), .integer(version.map { Int64(clamping: $0) } ?? -1), .real(time),
            .integer(Int64(max(limit, 0))))
        var entries: [LoggedAction] = []
        while try page.next() { entries.append(try entry(page)) }
        guard entries.count == limit, let last = entries.last else { return entries }
        let rest = try reader.statement(
            composed:
                """
                SELECT * FROM (SELECT \(readColumns) FROM events WHERE session = ? AND cause IS NOT NULL AND version = ?
                    AND time >= ?) WHERE n > ? ORDER BY n
                """)
        try rest.bind(
            .text(session), .integer(Int64(clamping: last.version)), .real(time), .integer(Int64(clamping: last.number))
        )
        while try rest.next() { entries.append(try entry(rest)) }
        return entries
    }

    // MARK: - Private

    /// An entry's columns but its action, in both kinds of rows.
    private static let entryColumns = "number, cause, origin, first_version, version, subject, idempotency_key, time"
    // The two inserts of every logged action, literals (`entryColumns` spelled out): a literal
    // statement is found again by its address, not by hashing its text.
    private static let insertCarrying: StaticString = """
        INSERT OR REPLACE INTO events (session, seq, pulse, data, number, cause, origin, first_version, version, \
        subject, idempotency_key, time, action) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
        """
    private static let insertAlone: StaticString = """
        INSERT OR REPLACE INTO events (session, seq, data, number, cause, origin, first_version, version, subject, \
        idempotency_key, time) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
        """
    private static let cleared = """
        number = NULL, cause = NULL, origin = NULL, first_version = NULL, version = NULL, subject = NULL,
        idempotency_key = NULL, time = NULL, action = NULL
        """
    /// An entry as `entry(_:)` reads it, from either kind of row (rows of their own from before
    /// the `number` column have it in their key).
    private static let readColumns = """
        coalesce(number, \(top) - seq) AS n, cause, origin, first_version, version,
        CASE WHEN seq > \(base) THEN data ELSE action END, subject, idempotency_key, time
        """

    private static func entry(_ row: SQLiteStatement) throws -> LoggedAction {
        guard let cause = LoggedAction.Cause(rawValue: row.string(1)) else {
            throw StoreError.damaged("its stored action log is damaged", cause: "unknown cause \(row.string(1))")
        }
        let json = row.bytes(5)
        return LoggedAction(
            number: try storedCount(row.int64(0), "action log number"), cause: cause,
            origin: row.isNull(2) ? nil : try storedCount(row.int64(2), "action log origin"),
            firstVersion: row.isNull(3) ? nil : try storedCount(row.int64(3), "first version"),
            version: try storedCount(row.int64(4), "version"), json: json.isEmpty ? nil : json,
            subject: row.isNull(6) ? nil : row.string(6), idempotencyKey: row.isNull(7) ? nil : row.string(7),
            time: row.double(8))
    }
}

extension SQLiteStatement {
    /// Binds `entry` to `SQLiteActionLog.entryColumns`' parameters, the first at `index`.
    fileprivate func bind(_ entry: LoggedAction, from index: Int32) throws -> SQLiteStatement {
        try bind(.integer(Int64(clamping: entry.number)), at: index)
            .bind(.text(entry.cause.rawValue), at: index + 1)
            .bind(entry.origin.map { .integer(Int64(clamping: $0)) } ?? .null, at: index + 2)
            .bind(entry.firstVersion.map { .integer(Int64(clamping: $0)) } ?? .null, at: index + 3)
            .bind(.integer(Int64(clamping: entry.version)), at: index + 4)
            .bind(entry.subject.map(SQLiteValue.text) ?? .null, at: index + 5)
            .bind(entry.idempotencyKey.map(SQLiteValue.text) ?? .null, at: index + 6)
            .bind(.real(entry.time), at: index + 7)
    }
}
