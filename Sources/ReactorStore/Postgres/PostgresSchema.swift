/// The tables of a reactord PostgreSQL database, and the migrations that made them. Every name
/// starts with `reactord_`: the database may hold other things. The version is recorded in
/// `reactord_schema`; a database written by a newer reactord is refused, an older one is
/// brought up to date in one transaction.
enum PostgresSchema {
    /// Migration `n` (1-based) brings a database from version n-1 to n. Append only: a shipped
    /// migration never changes.
    static let migrations: [String] = [
        // 1: sessions with their leases, their event history, the global user and its changes.
        """
        CREATE TABLE reactord_schema (version integer NOT NULL);
        INSERT INTO reactord_schema (version) VALUES (0);
        -- holder: the node holding the lease (NULL: nobody); fence grows on every takeover,
        -- and a write carries the fence it was made under.
        CREATE TABLE reactord_sessions (
            id text PRIMARY KEY,
            kind text NOT NULL,
            owner text,
            state text NOT NULL,
            version bigint NOT NULL,
            created_at float8 NOT NULL,
            last_active float8 NOT NULL,
            holder text,
            holder_address text,
            lease_until timestamptz,
            fence bigint NOT NULL DEFAULT 0
        );
        CREATE INDEX reactord_sessions_by_last_active ON reactord_sessions (last_active);
        -- pulse: NULL for a state event (data: the state), else the pulse's name (data: its value).
        CREATE TABLE reactord_events (
            session text NOT NULL,
            seq bigint NOT NULL,
            pulse text,
            data text NOT NULL,
            PRIMARY KEY (session, seq)
        );
        CREATE TABLE reactord_user (
            id integer PRIMARY KEY CHECK (id = 1),
            data text,
            version bigint NOT NULL
        );
        INSERT INTO reactord_user (id, data, version) VALUES (1, NULL, 0);
        CREATE TABLE reactord_user_changes (version bigint PRIMARY KEY, data text);
        """,
        // 2: a subject's sessions counted without a scan (--max-sessions-per-subject).
        "CREATE INDEX reactord_sessions_by_owner ON reactord_sessions (owner) WHERE owner IS NOT NULL;",
        // 3: answers kept under idempotency keys (scope: the caller's subject, '' without one).
        """
        CREATE TABLE reactord_answers (
            scope text NOT NULL,
            key text NOT NULL,
            request text NOT NULL,
            status integer NOT NULL,
            headers text NOT NULL,
            body text NOT NULL,
            expires float8 NOT NULL,
            PRIMARY KEY (scope, key)
        );
        CREATE INDEX reactord_answers_by_expiry ON reactord_answers (expires);
        """,
        // 4: each session's action log (cause: action, effect or user; first_version NULL: it
        // changed nothing).
        """
        CREATE TABLE reactord_action_log (
            session text NOT NULL,
            number bigint NOT NULL,
            cause text NOT NULL,
            origin bigint,
            first_version bigint,
            version bigint NOT NULL,
            action text,
            subject text,
            idempotency_key text,
            time float8 NOT NULL,
            PRIMARY KEY (session, number)
        );
        CREATE INDEX reactord_action_log_by_time ON reactord_action_log (time);
        """,
        // 5: places taken for sessions being made, so that a subject's creations on several nodes
        // at once count each other (--max-sessions-per-subject); id: the session's.
        """
        CREATE TABLE reactord_creations (
            id text PRIMARY KEY,
            owner text NOT NULL,
            until timestamptz NOT NULL
        );
        CREATE INDEX reactord_creations_by_owner ON reactord_creations (owner);
        """,
    ]

    static var currentVersion: Int { migrations.count }

    /// Any fixed number: every reactord takes this transaction-level advisory lock before it
    /// reads or migrates the schema, so nodes starting at once migrate one after another.
    static let migrationLock: Int64 = 0x7265_6163_746F_7264  // "reactord"

    /// Brings the database up to date, or refuses one a newer reactord wrote; `database`
    /// names it in the refusal.
    static func migrate(_ connection: PostgresConnection, database: String) throws {
        // Without a time limit: another node's migration holds the lock, and a migration may be long.
        try connection.execute("BEGIN", timeout: nil)
        do {
            try connection.execute("SELECT pg_advisory_xact_lock($1)", [String(migrationLock)], timeout: nil)
            let exists = try connection.execute("SELECT to_regclass('reactord_schema') IS NOT NULL")
            var version = 0
            if exists.bool(0, 0) {
                let row = try connection.execute("SELECT version FROM reactord_schema")
                guard row.count == 1, let found = row.int64(0, 0) else {
                    throw StoreError.cannotOpen("\(database): reactord_schema has no version row")
                }
                version = Int(found)
            }
            guard version <= currentVersion else {
                throw StoreError.cannotOpen(
                    "\(database) was written by a newer reactord (schema version \(version); "
                        + "this one knows \(currentVersion)); left untouched")
            }
            for migration in migrations[version...] { try connection.execute(migration, timeout: nil) }
            if version < currentVersion {
                try connection.execute("UPDATE reactord_schema SET version = $1", [String(currentVersion)])
            }
            try connection.execute("COMMIT", timeout: nil)
        } catch {
            _ = try? connection.execute("ROLLBACK")
            throw error
        }
    }
}
