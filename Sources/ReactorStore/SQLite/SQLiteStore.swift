internal import CSQLite
internal import ConcurrencyPrimitives

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
#if canImport(Glibc)
import Glibc
#endif

/// The embedded engine: one SQLite file in WAL mode, owned by one process (an exclusive
/// `flock` on the file, held while the store is open). Writes go through one connection,
/// in one transaction per `commit` (the service batches every change that arrived while the
/// previous commit ran); reads through a second one, so a restore never waits for a commit.
/// `sync` says whether a commit is fsynced before it returns (see `SQLiteSync`).
// why: owns two sqlite3 connections (C), the writer used only under `writeLock`, the reader under `readLock`.
package final class SQLiteStore: StoreEngine, @unchecked Sendable {
    package let name: String
    private let path: String
    private let lockFile: Int32
    private let writeLock = Mutex()
    private let readLock = Mutex()
    // Guarded by writeLock and readLock; nil once closed.
    private var writer: SQLiteConnection?
    private var reader: SQLiteConnection?
    /// Keys certainly not kept, answered without a read (`AnswerKeyFilter`).
    private let answerKeys = AnswerKeyFilter()
    /// Copies the WAL into the file beside the commits; nil: the commits do (SQLite's default).
    private let checkpointer: SQLiteCheckpointer?

    /// Opens (or creates) the file at `path`. Refuses, naming the file and leaving it as it
    /// was: a missing or unwritable folder, a file that is not a SQLite database or belongs to
    /// another program, one written by a newer reactord, one another process has open.
    package init(path: String, sync: SQLiteSync = .normal) throws(StoreError) {
        self.path = path
        name = StoreLocation.sqlite(path: path, sync: sync).description
        lockFile = try Self.lockExclusively(path)
        do {
            let writer = try SQLiteConnection(path: path, create: true)
            // cell_size_check: a page whose cell pointers are damaged is an error when it is read,
            // where SQLite otherwise found no row on it, and a session there answered 404 as if deleted.
            try writer.execute("PRAGMA busy_timeout = 5000; PRAGMA cell_size_check = ON")
            // Read the schema before anything writes: a foreign or newer file stays untouched.
            let version = try SQLiteSchema.version(of: writer, path: path)
            writer.resetAll()
            guard version <= SQLiteSchema.currentVersion else {
                throw StoreError.cannotOpen(
                    "\(path) was written by a newer reactord (schema version \(version); "
                        + "this one knows \(SQLiteSchema.currentVersion)); left untouched")
            }
            try writer.execute("PRAGMA journal_mode = WAL; PRAGMA synchronous = \(sync == .full ? "FULL" : "NORMAL")")
            try SQLiteSchema.migrate(writer, from: version)
            let reader = try SQLiteConnection(path: path, readOnly: true)
            try reader.execute("PRAGMA busy_timeout = 5000; PRAGMA cell_size_check = ON")
            checkpointer = try? SQLiteCheckpointer(path: path, writeLock: writeLock)
            if let checkpointer { writer.reportCommits(to: checkpointer) }
            self.writer = writer
            self.reader = reader
            answerKeys.load(from: path)
        } catch {
            Glibc.close(lockFile)
            throw Self.storeError(error, opening: path)
        }
    }

    deinit { close() }

    package func loadUser() throws(StoreError) -> [UInt8]? {
        try reading { connection in
            let select = try connection.statement("SELECT data FROM global_user WHERE only = 1")
            return try select.next() ? select.bytes(0) : nil
        }
    }

    package func sessionCount() throws(StoreError) -> Int {
        try reading { connection in
            let count = try connection.statement("SELECT count(*) FROM sessions")
            return try count.next() ? Int(count.int64(0)) : 0
        }
    }

    package func sessionCount(ownedBy owner: String) throws(StoreError) -> Int {
        try reading { connection in
            let count = try connection.statement("SELECT count(*) FROM sessions WHERE owner = ?")
            try count.bind(.text(owner))
            return try count.next() ? Int(count.int64(0)) : 0
        }
    }

    package func session(_ id: String, historyLength: Int) throws(StoreError) -> StoredSession? {
        try reading { connection in
            let row = try connection.statement(
                "SELECT kind, state, version, created_at, last_active, owner FROM sessions WHERE id = ?")
            try row.bind(.text(id))
            guard try row.next() else { return nil }
            var session = StoredSession(
                id: id, kind: row.string(0), owner: row.isNull(5) ? nil : row.string(5), stateJSON: row.bytes(1),
                version: try storedCount(row.int64(2), "version"), createdAt: row.double(3), lastActive: row.double(4),
                events: [])
            let oldestRead = Int64(clamping: session.version) - Int64(historyLength)
            let events = try connection.statement(
                "SELECT seq, pulse, data, number FROM events WHERE session = ? AND seq > ? AND seq < ? ORDER BY seq")
            try events.bind(.text(id), .integer(oldestRead), .integer(SQLiteActionLog.base))
            while try events.next() {
                session.events.append(
                    StoredEvent(
                        seq: try storedCount(events.int64(0), "event id"),
                        pulse: events.isNull(1) ? nil : events.string(1),
                        json: events.bytes(2)))
                if !events.isNull(3) {
                    session.lastLoggedAction = max(
                        session.lastLoggedAction, try storedCount(events.int64(3), "action log number"))
                }
            }
            let older = try SQLiteActionLog.newestNumber(of: id, eventsThrough: oldestRead, on: connection)
            session.lastLoggedAction = max(session.lastLoggedAction, older ?? 0)
            return session
        }
    }

    package func sessions(lastActiveBefore time: Double, limit: Int) throws(StoreError) -> [String] {
        try reading { connection in
            let select = try connection.statement("SELECT id FROM sessions WHERE last_active < ? LIMIT ?")
            try select.bind(.real(time), .integer(Int64(limit)))
            var ids: [String] = []
            while try select.next() { ids.append(select.string(0)) }
            return ids
        }
    }

    package func answer(scope: String, key: String) throws(StoreError) -> StoredAnswer? {
        guard answerKeys.mayHold(scope: scope, key: key) else { return nil }
        return try reading { connection in
            let row = try connection.statement(
                "SELECT request, status, headers, body, expires FROM answers WHERE key = ? AND scope = ?")
            try row.bind(.text(key), .text(scope))
            guard try row.next() else { return nil }
            return StoredAnswer(
                scope: scope, key: key, request: row.string(0), status: Int(row.int64(1)),
                headers: StoredAnswer.fields(fromText: row.string(2)), body: row.bytes(3),
                expires: row.double(4), session: nil)
        }
    }

    /// Whether the keys the file held when it was opened are known, so that a new key's lookup
    /// skips the read (for tests).
    package var knowsItsAnswerKeys: Bool { answerKeys.isComplete }

    package func answerCount() throws(StoreError) -> Int {
        try reading { connection in
            let count = try connection.statement("SELECT count(*) FROM answers")
            return try count.next() ? Int(count.int64(0)) : 0
        }
    }

    @discardableResult
    package func commit(_ changes: [StoreChange], historyLength: Int, actionLogLength: Int) throws(StoreError) -> Set<
        String
    > {
        writeLock.lock()
        defer { writeLock.unlock() }
        guard let writer else { throw .unavailable("the store is closed", cause: path) }
        // Written into a file no longer at its path, a change is lost to every restart.
        if let problem = fileProblem() { throw .unavailable(problem, cause: path) }
        var kept: Set<String> = []
        var gone: Set<String> = []  // written to after its delete: nothing of it is kept
        do {
            try writer.transaction {
                for change in changes {
                    switch change {
                    case let .session(write):
                        let logged = actionLogLength > 0 ? write.loggedActions : []
                        if try !apply(write, logging: logged, historyLength: historyLength, on: writer) {
                            gone.insert(write.id)
                        } else {
                            try trimLog(of: write.id, after: logged, keeping: actionLogLength, on: writer)
                        }
                    case let .delete(id, _, idleBefore):
                        if let idleBefore {
                            try writer.statement("DELETE FROM sessions WHERE id = ? AND last_active < ?")
                                .bind(.text(id), .real(idleBefore)).run()
                            guard writer.changes > 0 else {  // used since: it stays, with its events
                                kept.insert(id)
                                continue
                            }
                        } else {
                            try writer.statement("DELETE FROM sessions WHERE id = ?").bind(.text(id)).run()
                        }
                        // Its events and its log.
                        try writer.statement("DELETE FROM events WHERE session = ?").bind(.text(id)).run()
                    case let .activity(id, lastActive):
                        try writer.statement("UPDATE sessions SET last_active = ?2 WHERE id = ?1 AND last_active < ?2")
                            .bind(.text(id), .real(lastActive)).run()
                    case let .user(json?):
                        try writer.statement("INSERT OR REPLACE INTO global_user (only, data) VALUES (1, ?)")
                            .bind(.utf8(json)).run()
                    case .user(nil):
                        try writer.statement("DELETE FROM global_user").run()
                    case let .answer(answer):
                        if let session = answer.session, kept.contains(session) || gone.contains(session) { continue }
                        try keep(answer, on: writer)
                    case let .forgetAnswers(time, limit):
                        try forgetAnswers(expiredBefore: time, limit: limit, on: writer)
                    case let .forgetLoggedActions(time, limit):
                        try forgetLoggedActions(before: time, limit: limit, on: writer)
                    }
                }
            }
        } catch {
            throw Self.storeError(error, opening: nil)
        }
        return kept  // refused, as a shared store refuses what it no longer holds
    }

    package func loggedActions(of session: String, after version: UInt64?, loggedSince time: Double, limit: Int)
        throws(StoreError) -> [LoggedAction]
    {
        try reading { connection in
            try SQLiteActionLog.entries(of: session, after: version, loggedSince: time, limit: limit, on: connection)
        }
    }

    package func state(of session: String, at version: UInt64) throws(StoreError) -> StateAtVersion {
        try reading { connection in
            let row = try connection.statement("SELECT state, version FROM sessions WHERE id = ?")
            try row.bind(.text(session))
            guard try row.next() else { return .noSession }
            let current = try storedCount(row.int64(1), "version")
            if version == current { return .found(row.bytes(0)) }
            if version > current { return .notYet(current: current) }
            // The newest state event at or before `version` is its state when every event after it
            // up to `version` is there too (a run with --history 0 writes none, and leaves a gap
            // after the older ones). A refusal names the oldest state kept after `version`: with
            // none at or before it, the oldest kept; in a gap, the oldest after the gap.
            let kept = try connection.statement(
                """
                SELECT data, (SELECT count(*) FROM events WHERE session = ?1 AND seq > k.seq AND seq <= ?2) = ?2 - k.seq
                FROM (SELECT seq, data FROM events WHERE session = ?1 AND seq <= ?2 AND pulse IS NULL
                      ORDER BY seq DESC LIMIT 1) k
                """)
            try kept.bind(.text(session), .integer(Int64(clamping: version)))
            if try kept.next(), kept.int64(1) == 1 { return .found(kept.bytes(0)) }
            let oldest = try connection.statement(
                "SELECT seq FROM events WHERE session = ? AND seq > ? AND seq < ? AND pulse IS NULL ORDER BY seq LIMIT 1"
            )
            try oldest.bind(.text(session), .integer(Int64(clamping: version)), .integer(SQLiteActionLog.base))
            return .notRetained(oldest: try oldest.next() ? try storedCount(oldest.int64(0), "event id") : current)
        }
    }

    package func sessions(after id: String, limit: Int) throws(StoreError) -> [SessionSummary] {
        try reading { connection in
            let select = try connection.statement(
                """
                SELECT id, kind, owner, version, created_at, last_active FROM sessions WHERE id > ? ORDER BY id LIMIT ?
                """)
            try select.bind(.text(id), .integer(Int64(max(limit, 0))))
            var found: [SessionSummary] = []
            while try select.next() {
                found.append(
                    SessionSummary(
                        id: select.string(0), kind: select.string(1), owner: select.isNull(2) ? nil : select.string(2),
                        version: try storedCount(select.int64(3), "version"), createdAt: select.double(4),
                        lastActive: select.double(5)))
            }
            return found
        }
    }

    package func close() {
        answerKeys.close()
        checkpointer?.stop()
        writeLock.lock()
        readLock.lock()
        let wasOpen = writer != nil
        reader = nil  // the writer closes last: it checkpoints the WAL into the file and removes it
        writer = nil
        readLock.unlock()
        writeLock.unlock()
        if wasOpen { Glibc.close(lockFile) }  // the lock goes after SQLite has let go of the file
    }

    // MARK: - Private

    private static let trimStep: Int64 = 64

    /// Writes the session's change and the entries `logged` for it; false when there is no such
    /// session any more (deleted meanwhile: it stays deleted, and its late events, entries and
    /// answers are not kept).
    private func apply(
        _ write: SessionWrite, logging logged: [LoggedAction], historyLength: Int,
        on writer: SQLiteConnection
    ) throws -> Bool {
        if write.isNew {
            try writer.statement(
                """
                INSERT INTO sessions (id, kind, state, version, created_at, last_active, owner) VALUES (?, ?, ?, ?, ?, ?, ?)
                """
            )
            .bind(
                .text(write.id), .text(write.kind), .utf8(write.stateJSON), .integer(Int64(clamping: write.version)),
                .real(write.createdAt), .real(write.lastActive ?? write.createdAt),
                write.owner.map(SQLiteValue.text) ?? .null
            ).run()
        } else {
            if let lastActive = write.lastActive {
                try writer.statement("UPDATE sessions SET state = ?, version = ?, last_active = ? WHERE id = ?")
                    .bind(
                        .utf8(write.stateJSON), .integer(Int64(clamping: write.version)), .real(lastActive),
                        .text(write.id)
                    ).run()
            } else {
                try writer.statement("UPDATE sessions SET state = ?, version = ? WHERE id = ?")
                    .bind(.utf8(write.stateJSON), .integer(Int64(clamping: write.version)), .text(write.id)).run()
            }
            if writer.changes == 0 { return false }
        }
        for answer in write.answers { try keep(answer, on: writer) }
        guard historyLength > 0, !write.events.isEmpty else {
            for entry in logged { try SQLiteActionLog.insert(entry, of: write.id, on: writer) }
            return true
        }
        // An entry that ends on one of these events rides on its row (SQLiteActionLog).
        var riding: [UInt64: LoggedAction] = [:]
        var alone: [LoggedAction] = []
        for entry in logged {
            if entry.firstVersion != nil, riding[entry.version] == nil {
                riding[entry.version] = entry
            } else {
                alone.append(entry)
            }
        }
        let insert: StaticString = "INSERT OR REPLACE INTO events (session, seq, pulse, data) VALUES (?, ?, ?, ?)"
        for event in write.events {
            if let entry = riding.removeValue(forKey: event.seq) {
                try SQLiteActionLog.insert(event, carrying: entry, of: write.id, on: writer)
                continue
            }
            try writer.statement(insert)
                .bind(
                    .text(write.id), .integer(Int64(clamping: event.seq)), event.pulse.map(SQLiteValue.text) ?? .null,
                    .utf8(event.json)
                ).run()
        }
        for entry in alone + riding.values { try SQLiteActionLog.insert(entry, of: write.id, on: writer) }
        // Trimmed in steps of `trimStep` events, not on every write: a session keeps between
        // `historyLength` and `historyLength + trimStep` of them, and reads take the newest.
        let oldestKept = Int64(clamping: write.version) - Int64(historyLength)
        let previous = Int64(clamping: write.events[0].seq) - 1 - Int64(historyLength)
        if oldestKept > 0, oldestKept / Self.trimStep != max(previous, 0) / Self.trimStep {
            try SQLiteActionLog.release(write.id, throughEvent: oldestKept, on: writer)
            try writer.statement("DELETE FROM events WHERE session = ? AND seq <= ?")
                .bind(.text(write.id), .integer(oldestKept)).run()
        }
        return true
    }

    /// Keeps the session's newest `length` entries after `logged` was written (trimmed in steps,
    /// as its events are).
    private func trimLog(
        of session: String, after logged: [LoggedAction], keeping length: Int,
        on writer: SQLiteConnection
    ) throws {
        guard let first = logged.first, let last = logged.last else { return }
        let oldestKept = Int64(clamping: last.number) - Int64(length)
        let previous = Int64(clamping: first.number) - 1 - Int64(length)
        if oldestKept > 0, oldestKept / Self.trimStep != max(previous, 0) / Self.trimStep {
            try SQLiteActionLog.drop(session, through: UInt64(oldestKept), on: writer)
        }
    }

    /// Sessions whose log the next `forgetLoggedActions` looks at first: each call walks on from
    /// where the last one stopped (no index on the time: it would cost every commit a page).
    private var forgetCursor = ""

    /// Forgets log entries logged before `time` (at most `limit`) of the next few sessions, by id;
    /// a session's newest entry stays, whatever its age, so that its numbering goes on from it.
    private func forgetLoggedActions(before time: Double, limit: Int, on writer: SQLiteConnection) throws {
        let sessions = try writer.statement("SELECT id FROM sessions WHERE id > ? ORDER BY id LIMIT 64")
        try sessions.bind(.text(forgetCursor))
        var ids: [String] = []
        while try sessions.next() { ids.append(sessions.string(0)) }
        forgetCursor = ids.count == 64 ? ids[63] : ""
        var left = Int64(limit)
        for id in ids where left > 0 {
            left -= try SQLiteActionLog.forget(id, before: time, limit: left, on: writer)
        }
    }

    /// Forgets the oldest answers, up to the first one not expired (at most `limit`): answers
    /// are kept in time order, so only what is forgotten is read, without an index on the
    /// expiry. An answer kept for longer than those after it (a TTL shortened since) holds
    /// them back until it expires; none goes before its time.
    private func forgetAnswers(expiredBefore time: Double, limit: Int, on writer: SQLiteConnection) throws {
        let oldest = try writer.statement("SELECT id, expires FROM answers ORDER BY id LIMIT ?")
        try oldest.bind(.integer(Int64(limit)))
        var last: Int64?
        while try oldest.next(), oldest.double(1) < time { last = oldest.int64(0) }
        oldest.reset()
        guard let last else { return }
        try writer.statement("DELETE FROM answers WHERE id <= ?").bind(.integer(last)).run()
    }

    /// A key kept already keeps its first answer: looked for first, unless the filter knows
    /// it is new (the look, through a temporary table SQLite makes for an insert that reads its
    /// own table, was a third of the cost of a keyed action's writes).
    private func keep(_ answer: StoredAnswer, on writer: SQLiteConnection) throws {
        let isNew = answerKeys.add(scope: answer.scope, key: answer.key)
        try writer.statement(
            isNew
                ? "INSERT INTO answers (scope, key, request, status, headers, body, expires) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)"
                : """
                INSERT INTO answers (scope, key, request, status, headers, body, expires) SELECT ?1, ?2, ?3, ?4, ?5, ?6, ?7
                    WHERE NOT EXISTS (SELECT 1 FROM answers WHERE key = ?2 AND scope = ?1)
                """
        )
        .bind(
            .text(answer.scope), .text(answer.key), .text(answer.request), .integer(Int64(answer.status)),
            .utf8(answer.headerBytes), .utf8(answer.body), .real(answer.expires)
        ).run()
    }

    private func reading<T>(_ body: (SQLiteConnection) throws -> T) throws(StoreError) -> T {
        readLock.lock()
        defer { readLock.unlock() }
        guard let reader else { throw .unavailable("the store is closed", cause: path) }
        defer { reader.resetAll() }
        do {
            return try body(reader)
        } catch {
            throw Self.storeError(error, opening: nil)
        }
    }

    /// A full disk is 507 to the client, any other failure 503; while opening, a refusal to start.
    private static func storeError(_ error: any Error, opening path: String?) -> StoreError {
        if let error = error as? StoreError { return error }
        let sqlite = error as? SQLiteError
        if let path {
            if sqlite?.primaryCode == SQLITE_NOTADB {
                return .cannotOpen("\(path) is not a SQLite database; left untouched")
            }
            // A full disk may come as an I/O error (the WAL's shared-memory file cannot grow).
            if sqlite?.primaryCode == SQLITE_FULL || (sqlite?.primaryCode == SQLITE_IOERR && diskIsFull(under: path)) {
                return .cannotOpen("cannot open the store \(path): its disk is full (\(error))")
            }
            return .cannotOpen("cannot open the store \(path): \(error)")
        }
        if sqlite?.primaryCode == SQLITE_FULL { return .full("the store's disk is full", cause: "\(error)") }
        if sqlite?.primaryCode == SQLITE_CORRUPT || sqlite?.primaryCode == SQLITE_NOTADB {
            return .damaged("the store's file is damaged", cause: "\(error)")
        }
        return .unavailable("the store failed", cause: "\(error)")
    }

    /// Whether the file system holding `path` has less than a megabyte left for this process.
    private static func diskIsFull(under path: String) -> Bool {
        var space = statvfs()
        guard statvfs(folder(of: path), &space) == 0 else { return false }
        return UInt64(space.f_bavail) * UInt64(space.f_frsize) < 1 << 20
    }

    /// The folder `path` names its file in.
    private static func folder(of path: String) -> String {
        guard let slash = path.lastIndex(of: "/") else { return "." }
        return slash == path.startIndex ? "/" : String(path[..<slash])
    }

    /// Whether the file open (and locked) is still the one at `path`: an operator may have moved
    /// or deleted it, or its folder, while the server ran.
    package func fileProblem() -> String? {
        var open = stat()
        var named = stat()
        guard fstat(lockFile, &open) == 0 else { return nil }  // closed
        if open.st_nlink == 0 { return "the store's file \(path) was deleted while in use" }
        guard stat(path, &named) == 0 else { return "the store's file \(path) was moved or deleted while in use" }
        guard named.st_dev == open.st_dev, named.st_ino == open.st_ino else {
            return "the store's file \(path) was replaced by another while in use"
        }
        return nil
    }

    /// Checks the path, then takes the file's exclusive lock (creating an empty file, which
    /// SQLite treats as an empty database). SQLite's own locks are POSIX record locks, which
    /// do not interact with flock, so this lock is ours alone; it is held until `close()`.
    private static func lockExclusively(_ path: String) throws(StoreError) -> Int32 {
        let folder = folder(of: path)
        var info = stat()
        guard stat(folder, &info) == 0, (info.st_mode & S_IFMT) == S_IFDIR else {
            throw .cannotOpen("cannot open the store \(path): the folder \(folder) does not exist")
        }
        if stat(path, &info) == 0 {
            guard (info.st_mode & S_IFMT) == S_IFREG else {
                throw .cannotOpen("cannot open the store \(path): it is not a regular file")
            }
            guard access(path, R_OK | W_OK) == 0 else {
                throw .cannotOpen(
                    "cannot open the store \(path) for reading and writing: \(String(cString: strerror(errno)))")
            }
            if info.st_size > 0 && !hasSQLiteHeader(path) {
                throw .cannotOpen("\(path) is not a SQLite database; left untouched")
            }
        }
        let fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o640)
        guard fd >= 0 else {
            throw .cannotOpen("cannot open the store \(path) for writing: \(String(cString: strerror(errno)))")
        }
        guard access(folder.isEmpty ? "/" : folder, W_OK) == 0 else {
            Glibc.close(fd)
            throw .cannotOpen(
                "cannot open the store \(path): its folder \(folder) is not writable "
                    + "(SQLite writes its -wal and -shm files there)")
        }
        if flock(fd, LOCK_EX | LOCK_NB) != 0 {
            let busy = errno == EWOULDBLOCK
            Glibc.close(fd)
            throw .cannotOpen(
                busy
                    ? "the store \(path) is in use by another reactord process (one process per SQLite file; "
                        + "for several nodes use PostgreSQL)"
                    : "cannot lock the store \(path): \(String(cString: strerror(errno)))")
        }
        return fd
    }

    private static func hasSQLiteHeader(_ path: String) -> Bool {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return false }
        defer { Glibc.close(fd) }
        var header = [UInt8](repeating: 0, count: 16)
        let count = read(fd, &header, 16)
        return count == 16 && header == Array("SQLite format 3\0".utf8)
    }
}
