internal import CLibPQ

#if canImport(Glibc)
import Glibc
#endif

/// A failed libpq call: PostgreSQL's message, its SQLSTATE when the server sent one, and
/// whether the connection itself is gone (then it is dropped and a new one made).
struct PostgresError: Error, CustomStringConvertible {
    var message: String
    var sqlState: String?
    var connectionLost: Bool
    var description: String { message }
}

/// One blocking libpq connection. Not thread-safe: its owner serialises the calls (the store
/// gives each call a connection of its own). C stays in this file.
// why: a PGconn handle handed between threads (pool, writer, listener), used by one at a time.
final class PostgresConnection: @unchecked Sendable {
    private let handle: OpaquePointer
    /// Scrubbed from every message: libpq seldom repeats a password, but a DSN in an error can.
    private let secrets: [String]
    /// The names of the statements prepared on this connection (they last as long as it does).
    private var prepared: Set<String> = []

    /// Connects with a `postgres://` URI (libpq passes `sslmode` and the rest through).
    init(uri: String, secrets: [String], connectTimeout: Int = 5) throws(PostgresError) {
        self.secrets = secrets
        // Ours first: a setting in the URI overrides them (libpq's expand_dbname order).
        // Keepalives find a server that vanished without closing the connection (a partition).
        let settings = [
            ("connect_timeout", String(connectTimeout)), ("application_name", "reactord"),
            ("keepalives_idle", "5"), ("keepalives_interval", "2"), ("keepalives_count", "3"),
            ("dbname", uri),
        ]
        let keywords = settings.map { Optional($0.0) } + [nil]
        let values = settings.map { Optional($0.1) } + [nil]
        let connection = Self.withCStrings(keywords) { keywordPointers in
            Self.withCStrings(values) { valuePointers in
                PQconnectdbParams(keywordPointers, valuePointers, 1)
            }
        }
        guard let connection else { throw PostgresError(message: "out of memory", sqlState: nil, connectionLost: true) }
        handle = connection
        // libpq prints notices (and a server's farewell) to stderr by default; the errors that
        // matter reach the caller as PostgresError, so the rest stays out of reactord's output.
        PQsetNoticeProcessor(connection, { _, _ in }, nil)
        guard PQstatus(connection) == CONNECTION_OK else {
            let message = Self.scrub(String(cString: PQerrorMessage(connection)), secrets)
            // deinit finishes the connection
            throw PostgresError(message: message.trimmingTrailingNewlines, sqlState: nil, connectionLost: true)
        }
    }

    deinit { PQfinish(handle) }

    /// Given up on: PostgreSQL did not answer a statement in time (it may still run it).
    private(set) var timedOut = false

    var isBroken: Bool { timedOut || PQstatus(handle) != CONNECTION_OK }

    /// How long a statement may wait for PostgreSQL's answer before its connection is given up:
    /// a server that stops answering (a frozen backend, a partition that drops nothing) would
    /// otherwise hold the request's thread, and the requests queued behind it, for as long.
    static let answerTimeout: Double = 5

    /// False when the server has closed this idle connection meanwhile (a restart, an
    /// administrator, an idle timeout): its farewell and the end of the stream wait on the
    /// socket. One `poll`, no round trip: checked before an idle connection is used again, so
    /// a restart of PostgreSQL costs no request an error.
    var isUsableAfterIdle: Bool {
        // A few reads at most: the farewell (kept as a notice) may come before the end.
        for _ in 0..<4 {
            if isBroken { return false }
            var descriptor = pollfd(fd: socket, events: Int16(POLLIN), revents: 0)
            guard poll(&descriptor, 1, 0) > 0 else { return true }
            if !consumeInput() { return false }
        }
        return !isBroken
    }

    /// Runs one statement with text parameters `$1…` (nil is NULL); past `timeout` seconds
    /// without an answer (nil: none) the connection is given up and the error says so.
    @discardableResult
    func execute(_ sql: String, _ parameters: [String?] = [], timeout: Double? = answerTimeout) throws(PostgresError)
        -> PostgresResult
    {
        if parameters.isEmpty {
            // Without parameters libpq takes several statements at once (the schema's migrations).
            return try run(within: timeout) { PQsendQuery(handle, sql) }
        }
        return try run(within: timeout) {
            Self.withCStrings(parameters) { pointers in
                PQsendQueryParams(handle, sql, Int32(parameters.count), nil, pointers, nil, nil, 0)
            }
        }
    }

    /// Runs `sql` as the statement prepared on this connection under `name`, preparing it the
    /// first time: PostgreSQL parses, analyses and (with `plan_cache_mode` set so) plans it once.
    @discardableResult
    func execute(_ sql: String, _ parameters: [String?], preparedAs name: String) throws(PostgresError)
        -> PostgresResult
    {
        if !prepared.contains(name) {
            try run(within: Self.answerTimeout) { PQsendPrepare(handle, name, sql, 0, nil) }
            prepared.insert(name)
        }
        return try run(within: Self.answerTimeout) {
            Self.withCStrings(parameters) { pointers in
                PQsendQueryPrepared(handle, name, Int32(parameters.count), pointers, nil, nil, 0)
            }
        }
    }

    @discardableResult
    private func run(within timeout: Double?, _ send: () -> Int32) throws(PostgresError) -> PostgresResult {
        guard send() == 1 else { throw failure(nil) }
        try awaitAnswer(within: timeout)
        // The last result, as PQexec returns it (an error ends the statements before it).
        var result: OpaquePointer?
        while let next = PQgetResult(handle) {
            if let result { PQclear(result) }
            result = next
        }
        guard let result else { throw failure(nil) }
        let status = PQresultStatus(result)
        guard status == PGRES_COMMAND_OK || status == PGRES_TUPLES_OK else {
            let error = failure(result)
            PQclear(result)
            throw error
        }
        return PostgresResult(result)
    }

    private func awaitAnswer(within timeout: Double?) throws(PostgresError) {
        let deadline = timeout.map { monotonicNow() + $0 }
        while PQisBusy(handle) == 1 {
            var descriptor = pollfd(fd: socket, events: Int16(POLLIN), revents: 0)
            let wait = deadline.map { Int32(max(0, ($0 - monotonicNow()) * 1000).rounded(.up)) } ?? -1
            let ready = poll(&descriptor, 1, wait)
            if ready == 0 {
                timedOut = true
                throw PostgresError(
                    message: "PostgreSQL did not answer within \(Int(timeout ?? 0)) s", sqlState: nil,
                    connectionLost: true)
            }
            if ready < 0 && errno != EINTR { throw failure(nil) }
            if ready > 0 && PQconsumeInput(handle) != 1 { throw failure(nil) }
        }
    }

    /// The socket to poll for notifications.
    var socket: Int32 { PQsocket(handle) }

    /// Reads what the server sent; false when the connection is gone.
    func consumeInput() -> Bool { PQconsumeInput(handle) == 1 && !isBroken }

    /// The next notification received: (channel, payload).
    func nextNotification() -> (channel: String, payload: String)? {
        guard let notify = PQnotifies(handle) else { return nil }
        defer { PQfreemem(notify) }
        return (String(cString: notify.pointee.relname), String(cString: notify.pointee.extra))
    }

    private func failure(_ result: OpaquePointer?) -> PostgresError {
        var message = String(cString: result.map { PQresultErrorMessage($0) } ?? PQerrorMessage(handle))
        if message.isEmpty { message = String(cString: PQerrorMessage(handle)) }
        var sqlState: String?
        if let result, let field = PQresultErrorField(result, Int32(UInt8(ascii: "C"))) {
            sqlState = String(cString: field)
        }
        // Class 08 is a connection exception, 57P0x the server shutting down or restarting.
        let lost = isBroken || sqlState?.hasPrefix("08") == true || sqlState?.hasPrefix("57P0") == true
        return PostgresError(
            message: Self.scrub(message, secrets).trimmingTrailingNewlines, sqlState: sqlState,
            connectionLost: lost)
    }

    /// `message` with each secret replaced by `***` where it stands as a word of its own (as in
    /// an echoed URI, `user:secret@host`): a short password is not masked inside other words
    /// ("port", for a password "p").
    static func scrub(_ message: String, _ secrets: [String]) -> String {
        secrets.reduce(message) { text, secret in
            guard !secret.isEmpty else { return text }
            var scrubbed = ""
            var rest = text[...]
            while let found = rest.firstRange(of: secret) {
                let before = found.lowerBound > rest.startIndex ? rest[rest.index(before: found.lowerBound)] : nil
                let after = found.upperBound < rest.endIndex ? rest[found.upperBound] : nil
                let isWord = ![before, after].contains { $0.map { $0.isLetter || $0.isNumber } ?? false }
                scrubbed += rest[..<found.lowerBound] + (isWord ? "***" : rest[found])
                rest = rest[found.upperBound...]
            }
            return scrubbed + rest
        }
    }

    /// Calls `body` with a C array of `strings` (nil stays NULL), copied, each ended by a NUL,
    /// into one buffer that lives for the call.
    private static func withCStrings<R>(_ strings: [String?], _ body: ([UnsafePointer<CChar>?]) -> R) -> R {
        var buffer: [UInt8] = []
        buffer.reserveCapacity(strings.reduce(0) { $0 + ($1?.utf8.count ?? 0) + 1 })
        var starts: [Int?] = []
        starts.reserveCapacity(strings.count)
        for string in strings {
            guard let string else {
                starts.append(nil)
                continue
            }
            starts.append(buffer.count)
            buffer.append(contentsOf: string.utf8)
            buffer.append(0)
        }
        return buffer.withUnsafeBufferPointer { bytes in
            guard let start = bytes.baseAddress else { return body(starts.map { _ in nil }) }  // all nil
            let base = UnsafeRawPointer(start).assumingMemoryBound(to: CChar.self)
            return body(starts.map { $0.map { base + $0 } })
        }
    }
}

/// A statement's rows; text columns read as strings or bytes (NULL is nil).
final class PostgresResult {
    private let result: OpaquePointer

    init(_ result: OpaquePointer) { self.result = result }
    deinit { PQclear(result) }

    var count: Int { Int(PQntuples(result)) }

    func isNull(_ row: Int, _ column: Int) -> Bool { PQgetisnull(result, Int32(row), Int32(column)) == 1 }

    func string(_ row: Int, _ column: Int) -> String? {
        isNull(row, column) ? nil : String(cString: PQgetvalue(result, Int32(row), Int32(column)))
    }

    func bytes(_ row: Int, _ column: Int) -> [UInt8]? {
        if isNull(row, column) { return nil }
        let length = Int(PQgetlength(result, Int32(row), Int32(column)))
        guard let value = PQgetvalue(result, Int32(row), Int32(column)) else { return [] }
        return value.withMemoryRebound(to: UInt8.self, capacity: length) {
            Array(UnsafeBufferPointer(start: $0, count: length))
        }
    }

    func int64(_ row: Int, _ column: Int) -> Int64? { string(row, column).flatMap { Int64($0) } }

    func double(_ row: Int, _ column: Int) -> Double? { string(row, column).flatMap { Double($0) } }

    func bool(_ row: Int, _ column: Int) -> Bool { string(row, column) == "t" }
}

extension String {
    var trimmingTrailingNewlines: String {
        var text = Substring(self)
        while let last = text.last, last == "\n" || last == " " { text = text.dropLast() }
        return String(text)
    }
}
