import Logging
import MicroHTTP

/// One line per routed request at info, probes and scrapes at debug (`--access-log off` turns it off): method, path, the
/// query with `access_token` redacted, status, body bytes, the handler's duration, and the
/// session id where the request names one. An event stream is logged when it opens (its
/// status and headers are sent then; it may stay open for hours).
struct AccessLog: Sendable {
    let logger: Logger
    /// info, or debug for probes and scrapes (the route is fixed per observer: decided once).
    let level: Logger.Level

    init(logger: Logger, route: String) {
        var logger = logger
        logger[metadataKey: "log"] = "access"
        self.logger = logger
        level = Self.quietRoutes.contains(route) ? .debug : .info
    }

    /// Routes probes and scrapers call every few seconds: logged at debug, not info.
    static let quietRoutes: Set<String> = ["/healthz", "/readyz", "/metrics"]

    func record(_ request: Request, route: String, reply: Reply, nanoseconds: UInt64) {
        guard logger.logLevel <= level else { return }
        var fields: Logger.Metadata = [
            "method": .string(request.method.rawValue),
            "path": .string(request.path),
            "route": .string(route),
            "duration_ms": .string(Self.milliseconds(nanoseconds)),
        ]
        if !request.query.isEmpty { fields["query"] = .string(Self.redactedQuery(request.query)) }
        // The client's address (the one a trusted proxy forwarded for), and the proxy's beside it.
        if let client = request.client { fields["peer"] = .string(client) }
        if let peer = request.peer, peer != request.client { fields["via"] = .string(peer) }
        var session = request.pathParameters["id"]
        switch reply {
        case let .response(response):
            fields["status"] = .stringConvertible(response.status)
            fields["bytes"] = .stringConvertible(response.body.count)
            if session == nil { session = Self.sessionID(in: response.body) }
        case .eventStream:
            fields["status"] = "200"
            fields["stream"] = "open"
        case .deferred:
            fields["status"] = "deferred"
        }
        if let session { fields["session"] = .string(session) }
        logger.log(level: level, "\(request.method.rawValue) \(request.path)", metadata: fields)
    }

    /// The query as logged. A parameter is a secret when its name mentions a token
    /// (`access_token`, `access_token[]`, `access_token%3D<token>` whose name holds the token) or
    /// its name or value looks like a JWT: its name is cut to its leading word, its value REDACTED.
    static func redactedQuery(_ query: [String: String]) -> String {
        query.keys.sorted().map { name in
            let value = query[name]!
            guard name.lowercased().contains("token") || looksLikeJWT(name) || looksLikeJWT(value) else {
                return "\(name)=\(value)"
            }
            let word = name.prefix { $0.isLetter || $0.isNumber || $0 == "_" || $0 == "-" }
            return "\(word.isEmpty ? "?" : word)=REDACTED"
        }.joined(separator: "&")
    }

    /// A JWT's header is base64url JSON: it starts with `eyJ` (`{"`).
    private static func looksLikeJWT(_ text: String) -> Bool { text.hasPrefix("eyJ") }

    /// The session a JSON reply is about: the service writes `"session":"…"` among the first
    /// members of every session document (POST /sessions, POST /action), so a short scan finds it.
    static func sessionID(in body: [UInt8]) -> String? {
        let key = Array(#""session":""#.utf8)
        let window = body.prefix(96)
        guard window.count > key.count else { return nil }
        var index = window.startIndex
        while index + key.count <= window.endIndex {
            if window[index..<index + key.count].elementsEqual(key) {
                let start = index + key.count
                guard let end = body[start...].prefix(64).firstIndex(of: UInt8(ascii: "\"")) else { return nil }
                return String(decoding: body[start..<end], as: UTF8.self)
            }
            index += 1
        }
        return nil
    }

    static func milliseconds(_ nanoseconds: UInt64) -> String {
        let micros = nanoseconds / 1_000
        let fraction = micros % 1_000
        return "\(micros / 1_000)." + (fraction < 10 ? "00" : fraction < 100 ? "0" : "") + "\(fraction)"
    }
}
