internal import CSQLite

/// An error from libsqlite3: its result code and message.
struct SQLiteError: Error, CustomStringConvertible {
    let code: Int32
    let message: String

    /// The primary result code (extended codes carry it in their low byte).
    var primaryCode: Int32 { code & 0xff }

    var description: String { "\(message) (SQLite error \(code))" }
}

/// One libsqlite3 connection: the typed wall around the C API that the SQLite engine uses.
/// Not thread-safe: its owner serialises every use.
final class SQLiteConnection {
    private let handle: OpaquePointer
    /// Statements composed at run time, by their text.
    private var composed: [String: SQLiteStatement] = [:]
    /// Literal statements by the address of their text: a String key hashes all of its bytes,
    /// about as costly as binding the statement's values.
    private var literals: [UInt: SQLiteStatement] = [:]

    /// Opens `path`; `create` allows making a new file.
    init(path: String, readOnly: Bool = false, create: Bool = false) throws {
        var flags = SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_EXRESCODE
        flags |= readOnly ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE
        if create && !readOnly { flags |= SQLITE_OPEN_CREATE }
        var opened: OpaquePointer?
        let code = sqlite3_open_v2(path, &opened, flags, nil)
        guard code == SQLITE_OK, let opened else {
            let message = opened.map { String(cString: sqlite3_errmsg($0)) } ?? String(cString: sqlite3_errstr(code))
            sqlite3_close_v2(opened)
            throw SQLiteError(code: code, message: message)
        }
        handle = opened
    }

    deinit {
        composed.removeAll()  // statements are finalized before the connection closes
        literals.removeAll()
        sqlite3_close_v2(handle)
    }

    /// Runs one or more statements that return no rows.
    func execute(_ sql: String) throws {
        try check(sqlite3_exec(handle, sql, nil, nil, nil))
    }

    /// A prepared statement for `sql`, kept for the connection's life and reset for reuse.
    func statement(_ sql: StaticString) throws -> SQLiteStatement {
        let address = UInt(bitPattern: sql.utf8Start)
        if let cached = literals[address] {
            cached.reset()
            return cached
        }
        let statement = try prepare(sql.description)
        literals[address] = statement
        return statement
    }

    /// The same for a statement's text made at run time: found again by the whole text.
    func statement(composed sql: String) throws -> SQLiteStatement {
        if let cached = composed[sql] {
            cached.reset()
            return cached
        }
        let statement = try prepare(sql)
        composed[sql] = statement
        return statement
    }

    private func prepare(_ sql: String) throws -> SQLiteStatement {
        var prepared: OpaquePointer?
        try check(sqlite3_prepare_v3(handle, sql, -1, UInt32(SQLITE_PREPARE_PERSISTENT), &prepared, nil))
        guard let prepared else { throw SQLiteError(code: SQLITE_MISUSE, message: "empty statement: \(sql)") }
        return SQLiteStatement(handle: prepared, connection: self)
    }

    /// Resets every statement: a statement left on a row keeps its read transaction, and
    /// with it an old snapshot of the database, open.
    func resetAll() {
        for statement in composed.values { statement.reset() }
        for statement in literals.values { statement.reset() }
    }

    /// Runs `body` in one transaction: committed when it returns, rolled back when it throws.
    /// A statement `body` left on a row is reset with it: it would keep this connection's read
    /// snapshot, and with it every frame of the WAL after it, for as long as it stays there.
    func transaction<T>(_ body: () throws -> T) throws -> T {
        // Prepared once: `execute` would parse each text again, on every commit.
        try statement("BEGIN IMMEDIATE").run()
        do {
            let result = try body()
            resetBusyStatements()
            try statement("COMMIT").run()
            return result
        } catch {
            resetBusyStatements()
            rollbackIfOpen()
            throw error
        }
    }

    /// Resets the statements stepped to a row and not finished (a few instructions each when none is).
    private func resetBusyStatements() {
        var statement = sqlite3_next_stmt(handle, nil)
        while let current = statement {
            if sqlite3_stmt_busy(current) != 0 { sqlite3_reset(current) }
            statement = sqlite3_next_stmt(handle, current)
        }
    }

    /// Ends a transaction an error left open (SQLite rolls some back by itself).
    func rollbackIfOpen() {
        if sqlite3_get_autocommit(handle) == 0 { _ = sqlite3_exec(handle, "ROLLBACK", nil, nil, nil) }
    }

    /// Copies what it can of the WAL into the database file without waiting for anyone
    /// (`SQLITE_CHECKPOINT_PASSIVE`): all of it when no other connection is writing. Returns the
    /// WAL's frames and how many of them the file now holds.
    @discardableResult
    func checkpoint() throws -> (frames: Int, copied: Int) {
        var frames: Int32 = 0
        var copied: Int32 = 0
        try check(sqlite3_wal_checkpoint_v2(handle, nil, SQLITE_CHECKPOINT_PASSIVE, &frames, &copied))
        return (Int(frames), Int(copied))
    }

    /// Calls `checkpointer.committed(walFrames:on:)` after each commit, in place of SQLite's own
    /// checkpoints (which it turns off). `checkpointer` must outlive the connection.
    func reportCommits(to checkpointer: SQLiteCheckpointer) {
        let context = Unmanaged.passUnretained(checkpointer).toOpaque()
        sqlite3_wal_hook(
            handle,
            { context, database, _, frames in
                Unmanaged<SQLiteCheckpointer>.fromOpaque(context!).takeUnretainedValue()
                    .committed(walFrames: Int(frames), on: database!)
                return SQLITE_OK
            }, context)
    }

    /// Rows changed by the last INSERT, UPDATE or DELETE.
    var changes: Int { Int(sqlite3_changes(handle)) }

    func check(_ code: Int32) throws {
        guard code == SQLITE_OK || code == SQLITE_DONE || code == SQLITE_ROW else {
            throw SQLiteError(code: sqlite3_extended_errcode(handle), message: String(cString: sqlite3_errmsg(handle)))
        }
    }
}

/// A prepared statement: bind by 1-based index, step, read columns by 0-based index.
final class SQLiteStatement {
    private let handle: OpaquePointer
    private unowned let connection: SQLiteConnection

    fileprivate init(handle: OpaquePointer, connection: SQLiteConnection) {
        self.handle = handle
        self.connection = connection
    }

    deinit { sqlite3_finalize(handle) }

    /// Ends its run (a statement left on a row holds its read open) and clears its values.
    func reset() {
        sqlite3_reset(handle)
        sqlite3_clear_bindings(handle)
    }

    @discardableResult
    func bind(_ values: SQLiteValue...) throws -> SQLiteStatement { try bind(values) }

    @discardableResult
    func bind(_ values: [SQLiteValue]) throws -> SQLiteStatement {
        for (offset, value) in values.enumerated() { try bind(value, at: Int32(offset + 1)) }
        return self
    }

    /// Binds one value to the parameter numbered `index` (from 1).
    @discardableResult
    func bind(_ value: SQLiteValue, at index: Int32) throws -> SQLiteStatement {
        let code: Int32
        switch value {
        case let .integer(number): code = sqlite3_bind_int64(handle, index, number)
        case let .real(number): code = sqlite3_bind_double(handle, index, number)
        case let .text(string):
            var string = string
            code = string.withUTF8 { bindText($0, at: index) }
        case let .utf8(bytes):
            code = bytes.withUnsafeBufferPointer { bindText($0, at: index) }
        case .null: code = sqlite3_bind_null(handle, index)
        }
        try connection.check(code)
        return self
    }

    private func bindText(_ utf8: UnsafeBufferPointer<UInt8>, at index: Int32) -> Int32 {
        guard let base = utf8.baseAddress, !utf8.isEmpty else { return sqlite_shim_bind_text(handle, index, "", 0) }
        return base.withMemoryRebound(to: CChar.self, capacity: utf8.count) {
            sqlite_shim_bind_text(handle, index, $0, Int32(utf8.count))
        }
    }

    /// Runs a statement that returns no rows.
    func run() throws {
        defer { sqlite3_reset(handle) }
        try connection.check(sqlite3_step(handle))
    }

    /// Steps to the next row; false when there are no more.
    func next() throws -> Bool {
        let code = sqlite3_step(handle)
        if code == SQLITE_ROW { return true }
        try connection.check(code)
        return false
    }

    func isNull(_ column: Int32) -> Bool { sqlite3_column_type(handle, column) == SQLITE_NULL }

    func int64(_ column: Int32) -> Int64 { sqlite3_column_int64(handle, column) }

    func double(_ column: Int32) -> Double { sqlite3_column_double(handle, column) }

    /// A text column's UTF-8 bytes.
    func bytes(_ column: Int32) -> [UInt8] {
        guard let text = sqlite3_column_text(handle, column) else { return [] }
        let count = Int(sqlite3_column_bytes(handle, column))
        return Array(UnsafeBufferPointer(start: text, count: count))
    }

    func string(_ column: Int32) -> String { String(decoding: bytes(column), as: UTF8.self) }
}

/// A value to bind.
enum SQLiteValue {
    case integer(Int64)
    case real(Double)
    case text(String)
    /// Text given as UTF-8 bytes (JSON documents), bound without making a String.
    case utf8([UInt8])
    case null
}
