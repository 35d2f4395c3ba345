import ArgumentParser
import Logging
import ReactorService

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// reactord's command line: one `@Option` per `ServiceConfiguration` field, each with its
/// `REACTORD_*` environment twin; the flag wins over the variable, the variable over the default.
///
/// `ReactorServer.main(registering:)` parses these for a server binary of your own; a command of
/// your own can take them whole with `@OptionGroup var server: ServerOptions`. A bad value, from a
/// flag or the environment, is a `ValidationError` naming the flag or the variable (exit 64 and
/// the usage, argument-parser's convention), never a default taken silently.
public struct ServerOptions: ParsableArguments {
    @Option(help: "Address to bind. [env: REACTORD_HOST] (default: 127.0.0.1)")
    var host: String?
    @Option(help: "Port to listen on, 0 for any free one. [env: REACTORD_PORT] (default: 8080)")
    var port: UInt16?
    @Option(
        help: "Epoll threads serving connections, each a libmicrohttpd daemon. [env: REACTORD_THREADS] (default: 1)")
    var threads: Int?
    @Option(
        help:
            "Bearer token for PUT/DELETE /user; when unset a random one is written to --admin-token-file (never logged). [env: REACTORD_ADMIN_TOKEN]"
    )
    var adminToken: String?
    @Option(
        help:
            "Where a generated admin token is written, mode 0600. [env: REACTORD_ADMIN_TOKEN_FILE] (default: reactord-admin-token)"
    )
    var adminTokenFile: String?
    @Option(
        help:
            "HS256 secret (at least 32 bytes) that turns on authentication: every session route needs a JWT, and sessions belong to its 'sub'. [env: REACTORD_JWT_SECRET]"
    )
    var jwtSecret: String?
    @Option(
        help:
            "PEM public key file (RSA for RS256, P-256 for ES256) that turns on authentication, instead of --jwt-secret. [env: REACTORD_JWT_KEY]"
    )
    var jwtKey: String?
    @Option(help: "When set, a token's 'iss' must equal it. [env: REACTORD_JWT_ISSUER]")
    var jwtIssuer: String?
    @Option(help: "When set, a token's 'aud' must contain it. [env: REACTORD_JWT_AUDIENCE]")
    var jwtAudience: String?
    @Option(
        help: "Seconds of clock skew allowed on a token's exp, nbf and iat. [env: REACTORD_JWT_LEEWAY] (default: 30)")
    var jwtLeeway: Double?
    @Option(
        help:
            "The claim whose value true makes a JWT an admin's (may write /user). [env: REACTORD_JWT_ADMIN_CLAIM] (default: reactord_admin)"
    )
    var jwtAdminClaim: String?
    @Option(
        help:
            "With authentication, most sessions one subject may hold; past it POST /sessions answers 429. [env: REACTORD_MAX_SESSIONS_PER_SUBJECT] (default: 100)"
    )
    var maxSessionsPerSubject: Int?
    @Option(
        help:
            "Without authentication, sessions one client address may create per second, 0 for no limit; past it 429. [env: REACTORD_SESSION_CREATE_RATE] (default: 10)"
    )
    var sessionCreateRate: Double?
    @Option(help: "The burst --session-create-rate allows. [env: REACTORD_SESSION_CREATE_BURST] (default: 100)")
    var sessionCreateBurst: Int?
    @Option(
        help:
            "Seconds a session lives without actions, reads (GET /sessions/{id}) or subscribers; 0: for ever. [env: REACTORD_SESSION_TTL] (default: 1800)"
    )
    var sessionTTL: Double?
    @Option(
        help:
            "Most sessions in memory at once. With a durable store the least recently used idle ones are unloaded to make room (503 only when all are busy); with the memory store, most sessions at all. [env: REACTORD_MAX_SESSIONS] (default: 100000)"
    )
    var maxSessions: Int?
    @Option(
        help:
            "With a durable store: seconds after which a session without subscribers, running effects or unwritten changes leaves memory (it stays stored; its next request loads it); 0: never. [env: REACTORD_UNLOAD_AFTER] (default: 60)"
    )
    var unloadAfter: Double?
    @Option(
        help:
            "With a durable store: most sessions stored at once; past it POST /sessions answers 507. [env: REACTORD_MAX_STORED_SESSIONS] (default: 10000000)"
    )
    var maxStoredSessions: Int?
    @Option(
        help:
            "Seconds an answer is kept under its Idempotency-Key: a repeat of the request within it gets that answer again instead of running. [env: REACTORD_IDEMPOTENCY_TTL] (default: 86400)"
    )
    var idempotencyTTL: Double?
    @Option(help: "Largest request body in bytes. [env: REACTORD_BODY_LIMIT] (default: 1048576)")
    var bodyLimit: Int?
    @Option(help: "Seconds between SSE keep-alive comments. [env: REACTORD_HEARTBEAT] (default: 15)")
    var heartbeat: Double?
    @Option(help: "Events kept per session for Last-Event-ID resumes. [env: REACTORD_HISTORY] (default: 1024)")
    var history: Int?
    @Option(
        help:
            "Action log entries kept per session (every action applied, and the changes effects and the global user made), read with GET /sessions/{id}/actions; 0: no log. [env: REACTORD_ACTION_LOG] (default: 1000)"
    )
    var actionLog: Int?
    @Option(
        help:
            "Seconds an action log entry is kept; older ones are forgotten in the background. [env: REACTORD_ACTION_LOG_AGE] (default: 604800)"
    )
    var actionLogAge: Double?
    @Option(help: "Most connections at once. [env: REACTORD_CONNECTION_LIMIT] (default: 10000)")
    var connectionLimit: Int?
    @Option(
        help:
            "Most connections from one client address, 0 for no limit; past it 429, then closed. --trusted-proxies are exempt. [env: REACTORD_CONNECTIONS_PER_IP] (default: a tenth of --connection-limit, at least 8)"
    )
    var connectionsPerIP: Int?
    @Option(
        help:
            "Comma-separated addresses and CIDR ranges of reverse proxies: exempt from --connections-per-ip, and their Forwarded / X-Forwarded-For names the client that per-client limits and the access log count. [env: REACTORD_TRUSTED_PROXIES] (default: none)"
    )
    var trustedProxies: String?
    @Option(
        help:
            "Seconds a client has to send a whole request head, however it trickles (slowloris); 0 for no limit. [env: REACTORD_HEAD_TIMEOUT] (default: 10)"
    )
    var headTimeout: Double?
    @Option(
        help:
            "Seconds after which an event stream is closed without 'event: end' so the client reconnects and resumes, 0 for never. [env: REACTORD_STREAM_MAX_AGE] (default: 0)"
    )
    var streamMaxAge: Double?
    @Option(
        help:
            "Seconds a connection may stay silent mid-request or between keep-alive requests before it is closed (slowloris), rounded up to whole seconds; event streams have none. [env: REACTORD_CONNECTION_TIMEOUT] (default: 30)"
    )
    var connectionTimeout: Double?
    @Option(
        help: "Comma-separated browser origins allowed by CORS, or '*'. [env: REACTORD_CORS_ORIGINS] (default: none)")
    var corsOrigins: String?
    @Option(
        help:
            "Log level: trace, debug, info, notice, warning, error, critical. [env: REACTORD_LOG_LEVEL] (default: info)"
    )
    var logLevel: String?
    @Option(
        help:
            "Where sessions, their history and the global user outlive the process: 'sqlite:PATH' (one process per file; 'sqlite:PATH?sync=full' fsyncs every commit), 'postgres://USER:PASSWORD@HOST:PORT/DB' (cluster mode: several nodes share it) or 'memory' (nothing survives). [env: REACTORD_STORE] (default: sqlite:reactord.sqlite)"
    )
    var store: String?
    @Option(
        help:
            "Cluster mode: the URL other nodes forward this node's sessions' requests to. [env: REACTORD_ADVERTISE] (default: http://HOST:PORT)"
    )
    var advertise: String?
    @Option(
        help:
            "Cluster mode: seconds a node's lease on a session lasts; a dead node's sessions move within about this long (a stopping node gives its leases back at once). [env: REACTORD_LEASE] (default: 2)"
    )
    var lease: Double?
    @Option(help: "Log format: text, or json (one object per line). [env: REACTORD_LOG_FORMAT] (default: text)")
    var logFormat: LogFormat?
    @Option(help: "One log line per request, at info: on or off. [env: REACTORD_ACCESS_LOG] (default: on)")
    var accessLog: Switch?

    /// Every option unset: the environment's `REACTORD_*` variables, then the defaults, apply.
    public init() {}

    /// Called by argument-parser after parsing: every value, flags and environment alike, is
    /// checked before anything starts.
    public mutating func validate() throws {
        let environment = ProcessInfo.processInfo.environment
        _ = try configuration(environment: environment)
        _ = try logLevel(environment: environment)
        _ = try logFormat(environment: environment)
    }

    /// Where a generated admin token goes when neither the flag nor its variable says.
    static let defaultAdminTokenFile = "reactord-admin-token"

    /// The configuration these flags and `environment`'s `REACTORD_*` variables describe.
    public func configuration(environment: [String: String] = ProcessInfo.processInfo.environment)
        throws -> ServiceConfiguration
    {
        let environment = Environment(environment)
        var configuration = ServiceConfiguration()
        configuration.host = try host ?? environment.value("REACTORD_HOST") ?? configuration.host
        configuration.port = try port ?? environment.value("REACTORD_PORT") ?? configuration.port
        configuration.threads = try threads ?? environment.value("REACTORD_THREADS") ?? configuration.threads
        configuration.adminToken = try adminToken ?? environment.value("REACTORD_ADMIN_TOKEN")
        configuration.sessionTTL =
            try seconds(sessionTTL, "session-ttl", environment, .from(0, "from 0 (never expire) to 1e9"))
            ?? configuration.sessionTTL
        configuration.maxSessions =
            try maxSessions ?? environment.value("REACTORD_MAX_SESSIONS") ?? configuration.maxSessions
        configuration.unloadAfter =
            try seconds(unloadAfter, "unload-after", environment, .from(0, "from 0 (never) to 1e9"))
            ?? configuration.unloadAfter
        configuration.idempotencyTTL =
            try seconds(idempotencyTTL, "idempotency-ttl", environment, .above(0, "above 0, up to 1e9"))
            ?? configuration.idempotencyTTL
        configuration.maxStoredSessions =
            try maxStoredSessions ?? environment.value("REACTORD_MAX_STORED_SESSIONS")
            ?? configuration.maxStoredSessions
        configuration.bodyLimit = try bodyLimit ?? environment.value("REACTORD_BODY_LIMIT") ?? configuration.bodyLimit
        configuration.heartbeat =
            try seconds(heartbeat, "heartbeat", environment, .from(0.01, "from 0.01 to 1e9")) ?? configuration.heartbeat
        configuration.historyLength =
            try history ?? environment.value("REACTORD_HISTORY") ?? configuration.historyLength
        configuration.actionLogLength =
            try actionLog ?? environment.value("REACTORD_ACTION_LOG")
            ?? configuration.actionLogLength
        configuration.actionLogAge =
            try seconds(actionLogAge, "action-log-age", environment, .above(0, "above 0, up to 1e9"))
            ?? configuration.actionLogAge
        configuration.connectionLimit =
            try connectionLimit ?? environment.value("REACTORD_CONNECTION_LIMIT")
            ?? configuration.connectionLimit
        configuration.connectionsPerIP = try connectionsPerIP ?? environment.value("REACTORD_CONNECTIONS_PER_IP")
        configuration.headTimeout =
            try seconds(headTimeout, "head-timeout", environment, .from(0, "from 0 (no deadline) to 1e9"))
            ?? configuration.headTimeout
        if let proxies: String = try trustedProxies ?? environment.value("REACTORD_TRUSTED_PROXIES") {
            do {
                configuration.trustedProxies = try AddressRanges(
                    parsing: proxies.split(separator: ",")
                        .map { $0.trimmingWhitespace() }.filter { !$0.isEmpty })
            } catch {
                throw ValidationError(
                    "\(trustedProxies != nil ? "--trusted-proxies" : "REACTORD_TRUSTED_PROXIES"): \(error)")
            }
        }
        configuration.streamMaxAge =
            try seconds(streamMaxAge, "stream-max-age", environment, .from(0, "from 0 to 1e9"))
            ?? configuration.streamMaxAge
        configuration.connectionTimeout =
            try seconds(connectionTimeout, "connection-timeout", environment, .above(0, "above 0, up to 1e9"))
            ?? configuration.connectionTimeout
        let origins: String? = try corsOrigins ?? environment.value("REACTORD_CORS_ORIGINS")
        configuration.corsOrigins = try (origins?.split(separator: ",") ?? []).map { $0.trimmingWhitespace() }
            .filter { !$0.isEmpty }.map { entry in
                // Checked here, taken in the form browsers send by CORSPolicy (for embedders too).
                guard ServiceConfiguration.corsOrigin(entry) != nil else {
                    throw ValidationError(
                        "\(corsOrigins != nil ? "--cors-origins" : "REACTORD_CORS_ORIGINS"): '\(entry)' is not an "
                            + "origin: scheme://host[:port] as a browser sends it (e.g. https://app.example.com), or *")
                }
                return entry
            }
        let storeText: String = try store ?? environment.value("REACTORD_STORE") ?? "sqlite:reactord.sqlite"
        do {
            configuration.store = try StoreLocation(parsing: storeText)
        } catch {
            throw ValidationError("\(store != nil ? "--store" : "REACTORD_STORE"): \(error)")
        }
        configuration.advertise = try advertise ?? environment.value("REACTORD_ADVERTISE")
        configuration.leaseDuration =
            try seconds(lease, "lease", environment, .from(0.5, "from 0.5 to 3600", upTo: 3_600))
            ?? configuration.leaseDuration
        configuration.accessLog = try (accessLog ?? environment.value("REACTORD_ACCESS_LOG") ?? .on) == .on
        configuration.adminTokenFile =
            try adminTokenFile ?? environment.value("REACTORD_ADMIN_TOKEN_FILE")
            ?? Self.defaultAdminTokenFile
        configuration.maxSessionsPerSubject =
            try maxSessionsPerSubject
            ?? environment.value("REACTORD_MAX_SESSIONS_PER_SUBJECT") ?? configuration.maxSessionsPerSubject
        configuration.sessionCreateRate =
            try sessionCreateRate ?? environment.value("REACTORD_SESSION_CREATE_RATE")
            ?? configuration.sessionCreateRate
        configuration.sessionCreateBurst =
            try sessionCreateBurst ?? environment.value("REACTORD_SESSION_CREATE_BURST")
            ?? configuration.sessionCreateBurst
        configuration.jwt = try jwtVerification(environment)
        try check(configuration)
        return configuration
    }
}
