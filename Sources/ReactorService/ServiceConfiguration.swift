import MicroHTTP
import ReactorStore

/// Which store keeps sessions, their history and the global user: `.memory`, `.sqlite(path:sync:)`,
/// or `.postgres(url:)` (cluster mode). `StoreLocation(parsing:)` reads the `--store` forms.
public typealias StoreLocation = ReactorStore.StoreLocation

/// The trusted proxies' addresses and ranges (`ServiceConfiguration.trustedProxies`).
public typealias AddressRanges = MicroHTTP.AddressRanges

/// Everything an operator can set. The defaults are docs/architecture.md's ("Defaults"); times are
/// `Duration`s (`.seconds(15)`, `.milliseconds(500)`).
public struct ServiceConfiguration: Sendable {
    /// Where sessions outlive the process. `.memory` (this type's default, for tests and
    /// embedding): they do not. The `reactord` executable defaults to `sqlite:reactord.sqlite`.
    public var store: StoreLocation = .memory
    /// Cluster mode (a `postgres://` store): where other nodes forward requests for the
    /// sessions this node holds, e.g. `http://10.0.0.5:8080`. nil: `http://HOST:PORT`, which
    /// needs a concrete host (not 0.0.0.0 or ::).
    public var advertise: String?
    /// Cluster mode: how long a node's lease on a session lasts without renewal (renewed every
    /// third of it). A dead node's sessions are taken over within about this long; a node that
    /// stops or unloads a session gives its lease back at once.
    public var leaseDuration: Duration = .seconds(2)
    /// Cluster mode: how long to wait for the holder's answer to a forwarded request before
    /// answering 504 (its outcome unknown).
    public var forwardTimeout: Duration = .seconds(10)
    /// The address to listen on; `0.0.0.0` or `::` for every interface.
    public var host = "127.0.0.1"
    /// 0 picks a free port; `ReactorServer.port` tells which after `start()`.
    public var port: UInt16 = 8080
    /// libmicrohttpd daemons serving connections, each with its own epoll thread (at least 1).
    public var threads = 1
    /// Bearer token for writes to `/user`. `nil`: a random one is made at start, written to
    /// `adminTokenFile` when set (mode 0600) and printed to stderr when it is a terminal; it is
    /// never logged. `ReactorServer.adminToken` has it.
    public var adminToken: String?
    /// Where a generated admin token is written (mode 0600); nil: nowhere.
    public var adminTokenFile: String?
    /// Bearer-token authentication (JWT): with it, sessions belong to the token's subject. nil:
    /// open mode, where knowing a session's id is all it takes to use it (see docs/authentication.md).
    public var jwt: JWTVerification?
    /// With authentication, the most sessions one subject may hold at once (429 past it).
    public var maxSessionsPerSubject = 100
    /// Without authentication, sessions one client address may create per second (a token
    /// bucket of `sessionCreateBurst`; 429 past it). 0: no limit.
    public var sessionCreateRate: Double = 10
    /// The bucket size for `sessionCreateRate`: sessions one address may create at once.
    public var sessionCreateBurst = 100
    /// How long a session may stay without an action and without a subscriber; `.zero`: for ever.
    /// With a durable store it is deleted there, without being loaded.
    public var sessionTTL: Duration = .seconds(30 * 60)
    /// The most sessions in memory at once. With a durable store the least recently used idle
    /// ones are unloaded to make room, and a new session or a load is refused (503) only when
    /// every loaded one is busy; with the memory store it is every session there is.
    public var maxSessions = 100_000
    /// With a durable store: the time after which a session with no subscriber, no running effect
    /// and nothing left to write is unloaded from memory (it stays stored, and its next request
    /// loads it again). `.zero`: sessions stay loaded until they expire or memory is needed.
    public var unloadAfter: Duration = .seconds(60)
    /// With a durable store: the most sessions stored at once; past it `POST /sessions` answers
    /// 507. With authentication, `maxSessionsPerSubject` bounds each subject as well.
    public var maxStoredSessions = 10_000_000
    /// How long an answer stays kept under its `Idempotency-Key` (a repeat within it gets the
    /// answer again instead of running); then it is forgotten, in the background.
    public var idempotencyTTL: Duration = .seconds(24 * 60 * 60)
    /// The largest request body in bytes; a larger one is answered 413.
    public var bodyLimit = 1 << 20
    /// The time between `: keep-alive` comments on every event stream.
    public var heartbeat: Duration = .seconds(15)
    /// Events kept per session for `Last-Event-ID` resumes (and `GET /sessions/{id}/states/{version}`).
    public var historyLength = 1_024
    /// Entries of its action log kept per session (every action applied, and the changes effects
    /// and the global user made); 0: no log.
    public var actionLogLength = 1_000
    /// How long an action log entry is kept; older ones are forgotten in the background.
    public var actionLogAge: Duration = .seconds(7 * 24 * 60 * 60)
    /// The `retry:` an event stream opens with: how long a client waits before it reconnects
    /// (sent in whole milliseconds).
    public var streamRetry: Duration = .milliseconds(3_000)
    /// The most connections at once; past it a new connection is answered 503 with `Retry-After`.
    public var connectionLimit = 10_000
    /// Most connections one client address may hold at once (past it: 429, then closed), so that
    /// no single client can take every connection. nil: `defaultConnectionsPerIP` of
    /// `connectionLimit`; 0: no per-address limit. `trustedProxies` are not limited.
    public var connectionsPerIP: Int?
    /// Reverse proxies (addresses and CIDR ranges) exempt from `connectionsPerIP`, whose
    /// `Forwarded` / `X-Forwarded-For` names the client that per-client limits (the session
    /// creation rate) and the access log count by. No other peer's forwarding header is believed.
    public var trustedProxies = AddressRanges()
    /// How long a client has to send a whole request head (a byte at a time does not extend it,
    /// unlike `connectionTimeout`); `.zero`: no head deadline. See `HTTPServerConfiguration.headTimeout`.
    public var headTimeout: Duration = .seconds(10)
    /// How long an ordinary (non-SSE) connection may stay silent before it is closed, also
    /// between requests on a keep-alive connection (in whole seconds, rounded up; at least one).
    public var connectionTimeout: Duration = .seconds(30)
    /// Bytes queued for one slow subscriber before its stream is closed.
    public var streamQueueLimit = 256 * 1024
    /// The age at which the server closes an event stream without `event: end`, so the
    /// client reconnects and resumes with `Last-Event-ID`. `.zero`: streams live as long as their
    /// session. Rotates long-lived connections (balancers, proxies) and lets tests prove resumes.
    public var streamMaxAge: Duration = .zero
    /// Reactor kind used by `POST /sessions` without a body; `nil`: the first registered.
    public var defaultReactor: String?
    /// Browser origins allowed to call the API (`https://app.example.com`), or `*`. Empty: same origin only.
    public var corsOrigins: [String] = []
    /// How long `stop()` waits for connections to drain.
    public var stopDeadline: Duration = .seconds(5)
    /// One log line per request at info (method, path, status, bytes, duration, session).
    public var accessLog = true

    /// The defaults above.
    public init() {}
}

extension ServiceConfiguration {
    /// The per-address connection limit when `connectionsPerIP` is nil: a tenth of the connection
    /// limit, so one address can hold at most a tenth of the server, but at least 8 (a browser
    /// opens up to 6 connections to a host, and an event stream holds one).
    public static func defaultConnectionsPerIP(connectionLimit: Int) -> Int {
        max(connectionLimit / 10, 8)
    }

    /// `connectionsPerIP`, or its default.
    public var effectiveConnectionsPerIP: Int {
        connectionsPerIP ?? Self.defaultConnectionsPerIP(connectionLimit: connectionLimit)
    }

    /// `text` as a browser sends it in `Origin` (`scheme://host[:port]`, scheme and host in lower
    /// case, no trailing `/`, no default port), `*`, `null` and `file://` as they are, or nil when
    /// it names something else (a path, a query, no scheme): a `corsOrigins` entry that could never
    /// match is a mistake to report, not ignore.
    public static func corsOrigin(_ text: String) -> String? {
        if ["*", "null", "file://"].contains(text) { return text }
        let origin = (text.hasSuffix("/") ? text.dropLast() : text[...]).lowercased()
        let parts = origin.split(separator: ":", maxSplits: 1, omittingEmptySubsequences: false)
        guard parts.count == 2, let scheme = parts.first, let first = scheme.first, first.isLetter,
            scheme.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || "+-.".contains($0)) }),
            parts[1].hasPrefix("//"), parts[1].count > 2,
            !parts[1].dropFirst(2).contains(where: { "/?#@ ".contains($0) })
        else { return nil }
        for (defaultScheme, port) in [("http", ":80"), ("https", ":443")] where scheme == defaultScheme {
            if origin.hasSuffix(port) { return String(origin.dropLast(port.count)) }
        }
        return origin
    }

    /// Whether `address` can be `advertise`: `http://HOST:PORT` (a path after it is ignored), read
    /// as forwards read it, with a host and a port above 0 (a missing port made every forward fail).
    public static func isNodeAddress(_ address: String) -> Bool {
        guard address.hasPrefix("http://"), let (host, port) = ForwardConnection.endpoint(address) else { return false }
        return port > 0 && !host.isEmpty && !host.contains("@")
    }
}
