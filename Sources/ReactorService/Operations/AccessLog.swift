import Logging
import MicroHTTP

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// One line per routed request at info, probes and scrapes at debug (`--access-log off` turns it off): method, path, the
/// query with `access_token` redacted, status, body bytes, the handler's duration, and the
/// session id where the request names one. An event stream is logged when it opens (its
/// status and headers are sent then; it may stay open for hours).
struct AccessLog: Sendable {
    let logger: Logger
    /// info, or debug for probes and scrapes (the route is fixed per observer: decided once).
    let level: Logger.Level
    /// The handler's own writer of access lines, when it has one (the server's stderr log): the
    /// line is then made from the request's fields directly, without swift-log's metadata
    /// dictionary, which cost more than half an action's throughput.
    let direct: (any AccessLineWriter)?

    init(logger: Logger, route: String) {
        var logger = logger
        logger[metadataKey: "log"] = "access"
        self.logger = logger
        level = Self.quietRoutes.contains(route) ? .debug : .info
        direct = (logger.handler as? any AccessLineWriting)?.accessLineWriter(level: level, source: Self.source)
    }

    /// swift-log's `source` of a line logged from this module.
    static let source = "ReactorService"

    /// Routes probes and scrapers call every few seconds: logged at debug, not info.
    static let quietRoutes: Set<String> = ["/healthz", "/readyz", "/metrics"]

    func record(_ request: Request, route: String, reply: Reply, nanoseconds: UInt64) {
        guard logger.logLevel <= level else { return }
        if let direct {
            direct.write(line(request, route: route, reply: reply, nanoseconds: nanoseconds))
            return
        }
        let path = Self.percentEncoded(request.path)
        var fields: Logger.Metadata = [
            "method": .string(request.method.rawValue),
            "path": .string(path),
            "route": .string(route),
            "duration_ms": .string(Self.milliseconds(nanoseconds)),
        ]
        if !request.query.isEmpty { fields["query"] = .string(Self.redactedQuery(request.query)) }
        // The client's address (the one a trusted proxy forwarded for), and the proxy's beside it.
        if let client = request.client { fields["peer"] = .string(client) }
        if let peer = request.peer, peer != request.client { fields["via"] = .string(peer) }
        var session = request.pathParameters["id"].map(Self.percentEncoded)
        switch reply {
        case let .response(response):
            fields["status"] = .stringConvertible(response.status)
            fields["bytes"] = .stringConvertible(Self.bodyBytes(of: response, to: request))
            if session == nil, Self.answerNamesSession(request) { session = Self.sessionID(in: response.body) }
        case .eventStream:
            fields["status"] = "200"
            if request.method != .HEAD { fields["stream"] = "open" }
        case .deferred:
            fields["status"] = "deferred"
        }
        if let session { fields["session"] = .string(session) }
        logger.log(level: level, "\(request.method.rawValue) \(path)", metadata: fields, source: Self.source)
    }

    /// The same fields as `record`'s metadata, as one value.
    func line(_ request: Request, route: String, reply: Reply, nanoseconds: UInt64) -> AccessLine {
        var line = AccessLine(
            method: request.method.rawValue, path: Self.percentEncoded(request.path), route: route,
            nanoseconds: nanoseconds)
        if !request.query.isEmpty { line.query = Self.redactedQuery(request.query) }
        line.peer = request.client
        if let peer = request.peer, peer != request.client { line.via = peer }
        line.session = request.pathParameters["id"].map { .text(Self.percentEncoded($0)) }
        switch reply {
        case let .response(response):
            line.status = .code(response.status)
            line.bytes = Self.bodyBytes(of: response, to: request)
            if line.session == nil, Self.answerNamesSession(request), let range = Self.sessionRange(in: response.body) {
                line.session = .utf8(response.body[range])  // no String made: the line copies the bytes
            }
        case .eventStream:
            line.status = .code(200)
            line.streamOpen = request.method != .HEAD  // a HEAD gets the headers, no stream
        case .deferred:
            line.status = .deferred
        }
        return line
    }

    /// The query as logged. A parameter is a secret when its name mentions a token
    /// (`access_token`, `access_token[]`, `access_token%3D<token>` whose name holds the token) or
    /// its name or value holds a JWT (`Bearer eyJ…` too): its name is cut to its leading word, its
    /// value REDACTED. The rest is percent-encoded again, as sent: a decoded space, line break or
    /// `&` would otherwise break the log line's `key=value` fields or the query's own shape.
    static func redactedQuery(_ query: [String: String]) -> String {
        query.keys.sorted().map { name in
            let value = query[name]!
            guard name.lowercased().contains("token") || containsJWT(name) || containsJWT(value) else {
                return "\(percentEncoded(name))=\(percentEncoded(value))"
            }
            let word = name.prefix { $0.isLetter || $0.isNumber || $0 == "_" || $0 == "-" }
            return "\(word.isEmpty ? "?" : word)=REDACTED"
        }.joined(separator: "&")
    }

    /// A JWT's header is base64url JSON: it starts with `eyJ` (`{"`), here where a base64url run
    /// starts (the text's start, or after a space, `+`, `=`…), so `Bearer eyJ…` counts.
    private static func containsJWT(_ text: String) -> Bool {
        let utf8 = text.utf8
        var index = utf8.startIndex
        var startsRun = true
        while index != utf8.endIndex {
            if startsRun, utf8[index...].starts(with: "eyJ".utf8) { return true }
            startsRun = !Base64URL.isAlphabet(utf8[index])
            utf8.formIndex(after: &index)
        }
        return false
    }

    /// The body's bytes sent: none on a 304 or to a HEAD, whose body only measures its
    /// Content-Length.
    private static func bodyBytes(of response: Response, to request: Request) -> Int {
        response.status == 304 || request.method == .HEAD ? 0 : response.body.count
    }

    /// `text` with every byte but the unreserved characters (RFC 3986) and `,:/@` as `%XX`: what
    /// the log shows of a path (libmicrohttpd hands it over decoded), its session id and its query.
    private static func percentEncoded(_ text: String) -> String {
        func isKept(_ byte: UInt8) -> Bool {
            Base64URL.isAlphabet(byte) || byte == UInt8(ascii: ".") || byte == UInt8(ascii: "~")
                || byte == UInt8(ascii: ",") || byte == UInt8(ascii: ":") || byte == UInt8(ascii: "/")
                || byte == UInt8(ascii: "@")
        }
        guard !text.utf8.allSatisfy(isKept) else { return text }
        let digits = Array("0123456789ABCDEF".utf8)
        var out: [UInt8] = []
        out.reserveCapacity(text.utf8.count * 3)
        for byte in text.utf8 {
            if isKept(byte) {
                out.append(byte)
            } else {
                out.append(UInt8(ascii: "%"))
                out.append(digits[Int(byte >> 4)])
                out.append(digits[Int(byte & 0xF)])
            }
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// A POST without a session in its path (`POST /sessions`, `POST /action`) is about the one
    /// its answer names; any other answer naming sessions (a page of `GET /sessions`) lists them.
    private static func answerNamesSession(_ request: Request) -> Bool { request.method == .POST }

    /// The session a JSON reply is about: the service writes `"session":"…"` among the first
    /// members of every session document (POST /sessions, POST /action), so a short scan finds it.
    static func sessionID(in body: [UInt8]) -> String? {
        sessionRange(in: body).map { String(decoding: body[$0], as: UTF8.self) }
    }

    /// Where `sessionID(in:)`'s id is in `body`.
    static func sessionRange(in body: [UInt8]) -> Range<Int>? {
        // On the bytes in place: an array for the key and slices compared per offset cost ~1k
        // instructions a logged action.
        body.withUnsafeBufferPointer { bytes -> Range<Int>? in
            let key: StaticString = #""session":""#
            let keyLength = key.utf8CodeUnitCount
            let window = min(bytes.count, 96)
            guard window > keyLength, let base = bytes.baseAddress else { return nil }
            for index in 0...(window - keyLength) where memcmp(base + index, key.utf8Start, keyLength) == 0 {
                let start = index + keyLength
                for end in start..<min(bytes.count, start + 64) where bytes[end] == UInt8(ascii: "\"") {
                    return start..<end
                }
                return nil
            }
            return nil
        }
    }

    static func milliseconds(_ nanoseconds: UInt64) -> String {
        let micros = nanoseconds / 1_000
        let fraction = micros % 1_000
        return "\(micros / 1_000)." + (fraction < 10 ? "00" : fraction < 100 ? "0" : "") + "\(fraction)"
    }
}

/// One access line's fields: what `AccessLog` logs as metadata, for a handler that writes the
/// line itself (the command line's buffered log; `package`: plumbing between our own targets). `forEachField` gives them in the order of their keys' names (sorted), as the text
/// and JSON handlers print metadata.
package struct AccessLine: Sendable {
    package enum Status: Sendable {
        case code(Int)
        /// The answer comes later (the request waits for the store, say).
        case deferred
    }

    /// The metadata keys, in the order of their names.
    package enum Key: Int, CaseIterable, Sendable {
        case bytes, durationMS, method, path, peer, query, route, session, status, stream, via

        package var name: String {
            switch self {
            case .bytes: "bytes"
            case .durationMS: "duration_ms"
            case .method: "method"
            case .path: "path"
            case .peer: "peer"
            case .query: "query"
            case .route: "route"
            case .session: "session"
            case .status: "status"
            case .stream: "stream"
            case .via: "via"
            }
        }
    }

    /// A field's value, as written: text (a `String`, or UTF-8 bytes of one), a decimal number,
    /// or nanoseconds as milliseconds with three decimals (`0.734`).
    package enum Value: Sendable {
        case text(String)
        case utf8(ArraySlice<UInt8>)
        case number(Int)
        case milliseconds(UInt64)
    }

    package var method: String
    package var path: String
    package var route: String
    package var nanoseconds: UInt64
    /// The query with secrets redacted (`AccessLog.redactedQuery`).
    package var query: String?
    package var peer: String?
    package var via: String?
    package var session: Value?
    package var status: Status = .deferred
    package var bytes: Int?
    package var streamOpen = false

    package init(method: String, path: String, route: String, nanoseconds: UInt64) {
        self.method = method
        self.path = path
        self.route = route
        self.nanoseconds = nanoseconds
    }

    /// The fields present, in `Key` order.
    @inlinable
    package func forEachField<Visitor: AccessLineVisitor>(_ visitor: inout Visitor) {
        if let bytes { visitor.visit(.bytes, .number(bytes)) }
        visitor.visit(.durationMS, .milliseconds(nanoseconds))
        visitor.visit(.method, .text(method))
        visitor.visit(.path, .text(path))
        if let peer { visitor.visit(.peer, .text(peer)) }
        if let query { visitor.visit(.query, .text(query)) }
        visitor.visit(.route, .text(route))
        if let session { visitor.visit(.session, session) }
        switch status {
        case let .code(code): visitor.visit(.status, .number(code))
        case .deferred: visitor.visit(.status, .text("deferred"))
        }
        if streamOpen { visitor.visit(.stream, .text("open")) }
        if let via { visitor.visit(.via, .text(via)) }
    }
}

/// What `AccessLine.forEachField` calls with each field (a struct: no closure context per line).
package protocol AccessLineVisitor {
    mutating func visit(_ key: AccessLine.Key, _ value: AccessLine.Value)
}

/// Writes access lines of one level for one logger (its label and metadata fixed when made).
package protocol AccessLineWriter: Sendable {
    func write(_ line: AccessLine)
}

/// A log handler that can write access lines itself, byte for byte as it would log them.
package protocol AccessLineWriting {
    /// A writer for lines at `level` from `source` with this handler's metadata, or nil when the
    /// lines must go through swift-log (a metadata provider, say).
    func accessLineWriter(level: Logger.Level, source: String) -> (any AccessLineWriter)?
}
