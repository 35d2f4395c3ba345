/// The tables of a reactord SQLite file, and the migrations that made them. A file records
/// its version in `reactord_schema`; one written by a newer reactord is refused, an older one
/// is brought up to date by the migrations it lacks, in one transaction.
enum SQLiteSchema {
    /// Migration `n` (1-based) brings a file from version n-1 to n. Append only: a shipped
    /// migration never changes.
    static let migrations: [String] = [
        // 1: sessions, their event history, the global user.
        """
        CREATE TABLE reactord_schema (version INTEGER NOT NULL);
        INSERT INTO reactord_schema (version) VALUES (0);
        CREATE TABLE sessions (
            id TEXT PRIMARY KEY NOT NULL,
            kind TEXT NOT NULL,
            state TEXT NOT NULL,
            version INTEGER NOT NULL,
            created_at REAL NOT NULL,
            last_active REAL NOT NULL
        ) WITHOUT ROWID;
        CREATE INDEX sessions_by_last_active ON sessions (last_active);
        -- pulse: NULL for a state event (data: the state), else the pulse's name (data: its value).
        CREATE TABLE events (
            session TEXT NOT NULL,
            seq INTEGER NOT NULL,
            pulse TEXT,
            data TEXT NOT NULL,
            PRIMARY KEY (session, seq)
        ) WITHOUT ROWID;
        CREATE TABLE global_user (only INTEGER PRIMARY KEY CHECK (only = 1), data TEXT NOT NULL);
        """,
        // 2: the authenticated subject that created a session (NULL: created without one).
        "ALTER TABLE sessions ADD COLUMN owner TEXT;",
        // 3: a subject's sessions counted without a scan (--max-sessions-per-subject).
        "CREATE INDEX sessions_by_owner ON sessions (owner) WHERE owner IS NOT NULL;",
        // 4: answers kept under idempotency keys (scope: the caller's subject, '' without one).
        """
        CREATE TABLE answers (
            scope TEXT NOT NULL,
            key TEXT NOT NULL,
            request TEXT NOT NULL,
            status INTEGER NOT NULL,
            headers TEXT NOT NULL,
            body TEXT NOT NULL,
            expires REAL NOT NULL,
            PRIMARY KEY (scope, key)
        ) WITHOUT ROWID;
        CREATE INDEX answers_by_expiry ON answers (expires);
        """,
        // 5: each session's action log, as rows of `events` beside its events (see `SQLiteActionLog`):
        // cause is NULL for an event, else action, effect or user; data holds an action's JSON
        // ('' for the others); first_version NULL: it changed nothing.
        """
        ALTER TABLE events ADD COLUMN cause TEXT;
        ALTER TABLE events ADD COLUMN origin INTEGER;
        ALTER TABLE events ADD COLUMN first_version INTEGER;
        ALTER TABLE events ADD COLUMN version INTEGER;
        ALTER TABLE events ADD COLUMN subject TEXT;
        ALTER TABLE events ADD COLUMN idempotency_key TEXT;
        ALTER TABLE events ADD COLUMN time REAL;
        """,
        // 6: an entry rides on the row of the event it ended on (`SQLiteActionLog`): its number
        // (else in the key of a row of its own) and its action (else in `data`).
        """
        ALTER TABLE events ADD COLUMN number INTEGER;
        ALTER TABLE events ADD COLUMN action TEXT;
        """,
        // 7: answers appended in the order they are kept (a rowid table: a commit's answers fill
        // its last pages, where a key's own order scattered them over the B-tree's leaves), found
        // by a narrower index on the key, trimmed oldest first (no index on the expiry: one page
        // less a commit). BENCHMARKS.md, "Idempotency keys".
        """
        CREATE TABLE answers_7 (
            id INTEGER PRIMARY KEY,
            scope TEXT NOT NULL,
            key TEXT NOT NULL,
            request TEXT NOT NULL,
            status INTEGER NOT NULL,
            headers TEXT NOT NULL,
            body TEXT NOT NULL,
            expires REAL NOT NULL
        );
        INSERT INTO answers_7 (scope, key, request, status, headers, body, expires)
            SELECT scope, key, request, status, headers, body, expires FROM answers ORDER BY expires;
        DROP TABLE answers;
        ALTER TABLE answers_7 RENAME TO answers;
        CREATE INDEX answers_by_key ON answers (key, scope);
        """,
    ]

    static var currentVersion: Int { migrations.count }

    /// The file's version: 0 for an empty file; throws for a database of something else.
    static func version(of connection: SQLiteConnection, path: String) throws -> Int {
        let tables = try connection.statement("SELECT name FROM sqlite_master WHERE type = 'table'")
        var names: Set<String> = []
        while try tables.next() { names.insert(tables.string(0)) }
        if names.isEmpty { return 0 }
        guard names.contains("reactord_schema") else {
            throw StoreError.cannotOpen(
                "\(path) is a SQLite database of another program "
                    + "(no reactord_schema table); left untouched")
        }
        let version = try connection.statement("SELECT version FROM reactord_schema")
        guard try version.next() else {
            throw StoreError.cannotOpen("\(path): reactord_schema has no version row")
        }
        // reactord writes 1 and up: anything below is a damaged file, and migrating from it would trap.
        guard version.int64(0) >= 1 else {
            throw StoreError.cannotOpen(
                "\(path): reactord_schema holds version \(version.int64(0)), which no reactord "
                    + "writes; left untouched")
        }
        return Int(version.int64(0))
    }

    /// Brings the file from `version` to `currentVersion`.
    static func migrate(_ connection: SQLiteConnection, from version: Int) throws {
        guard version < currentVersion else { return }
        try connection.transaction {
            for migration in migrations[version...] { try connection.execute(migration) }
            try connection.statement("UPDATE reactord_schema SET version = ?")
                .bind(.integer(Int64(currentVersion))).run()
        }
    }
}
